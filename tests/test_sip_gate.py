"""The SIP gate's parts without a network (issue 47).

Digest authentication, the INVITE rate limit, and their order in
:class:`~agent.sip.gate.CallGate`.

The digest arithmetic is checked against RFC 2617's worked example (section 3.5); the INVITEs
are text as pjsua2 hands them over (``rdata.wholeMsg``), with a hand-made clock.
"""

from __future__ import annotations

import pytest

from agent.sip.digest import DigestAuth, digest_response, header_values, parse_digest
from agent.sip.flood import InviteLimiter
from agent.sip.gate import CallGate, Screens
from dialplan import ConfigError, parse_config
from dialplan.config import sip_passwords

pytestmark = pytest.mark.unit

URI = "sip:101@127.0.0.1:5070"


class Clock:
    def __init__(self, t: float = 1_000_000.0):
        self.t = t

    def __call__(self) -> float:
        return self.t


def invite(authorization: str = "", uri: str = URI) -> str:
    lines = [f"INVITE {uri} SIP/2.0", "Via: SIP/2.0/UDP 127.0.0.1:5080;branch=z9hG4bK1",
             "From: <sip:alice@127.0.0.1>;tag=1", f"To: <{uri}>", "Call-ID: c1@x",
             "CSeq: 2 INVITE"]
    if authorization:
        lines.append(f"Authorization: {authorization}")
    return "\r\n".join(lines + ["Content-Length: 0", "", ""])


def credentials(auth: DigestAuth, source: str, password: str, user: str = "alice",
                nc: str = "00000001", uri: str = URI, nonce: str | None = None) -> str:
    """What a phone answers to the challenge ``auth`` gives ``source``."""
    challenge = parse_digest(auth.challenge(source))
    nonce = nonce or challenge["nonce"]
    resp = digest_response(user, challenge["realm"], password, "INVITE", uri, nonce, nc,
                           "0a4f113b", "auth")
    return (f'Digest username="{user}", realm="{challenge["realm"]}", nonce="{nonce}", '
            f'uri="{uri}", response="{resp}", algorithm=MD5, cnonce="0a4f113b", qop=auth, '
            f"nc={nc}")


def test_digest_matches_rfc_2617s_worked_example():
    # RFC 2617 3.5: Mufasa / "Circle Of Life", GET /dir/index.html.
    assert digest_response("Mufasa", "testrealm@host.com", "Circle Of Life", "GET",
                           "/dir/index.html", "dcd98b7102dd2f0e8b11d0f600bfb0c093", "00000001",
                           "0a4f113b", "auth") == "6629fae49393a05397450978507c4ef1"
    header = ('Digest username="Mufasa", realm="testrealm@host.com", '
              'nonce="dcd98b7102dd2f0e8b11d0f600bfb0c093", uri="/dir/index.html", qop=auth, '
              'nc=00000001, cnonce="0a4f113b", response="6629fae49393a05397450978507c4ef1", '
              'opaque="5ccc069c403ebaf9f0171e9517f40e41"')
    params = parse_digest(header)
    assert params["username"] == "Mufasa" and params["nc"] == "00000001"
    assert params["response"] == "6629fae49393a05397450978507c4ef1"
    assert parse_digest('Basic QWxhZGRpbjpvcGVu') is None
    assert parse_digest('Digest realm="a\\"b"') == {"realm": 'a"b'}


def test_headers_are_found_folded_and_in_any_case():
    msg = "INVITE sip:a@b SIP/2.0\r\nauthorization: Digest a=1,\r\n b=2\r\nX: y\r\n\r\nbody: no"
    assert header_values(msg, "Authorization") == ["Digest a=1, b=2"]
    assert header_values(msg, "body") == []


def test_right_credentials_pass_wrong_ones_are_bad_none_are_challenged():
    clock = Clock()
    auth = DigestAuth("callagent", {"alice": "s3cret"}, clock=clock, key=b"k")
    assert auth.check(invite(), "127.0.0.1").verdict == "challenge"
    good = auth.check(invite(credentials(auth, "127.0.0.1", "s3cret")), "127.0.0.1")
    assert (good.verdict, good.user) == ("ok", "alice")
    wrong = auth.check(invite(credentials(auth, "127.0.0.1", "guess")), "127.0.0.1")
    assert (wrong.verdict, wrong.why) == ("bad", "wrong password")
    assert auth.check(invite(credentials(auth, "127.0.0.1", "x", user="bob")),
                      "127.0.0.1").why == "unknown user"
    # Credentials computed for another URI than the INVITE's request-URI...
    other = credentials(auth, "127.0.0.1", "s3cret", uri="sip:999@127.0.0.1:5070")
    assert auth.check(invite(other), "127.0.0.1").why == "uri is not the request-URI"
    # ...but the agent's own address, as sipp's [authentication] sends it, is the agent.
    sipp = credentials(auth, "127.0.0.1", "s3cret", uri="sip:127.0.0.1:5070", nc="00000002")
    assert auth.check(invite(sipp), "127.0.0.1").verdict == "ok"
    elsewhere = credentials(auth, "127.0.0.1", "s3cret", uri="sip:127.0.0.1:5999")
    assert auth.check(invite(elsewhere), "127.0.0.1").verdict == "bad"
    # Another realm's credentials are not ours: challenged, not refused.
    foreign = credentials(auth, "127.0.0.1", "s3cret").replace('"callagent"', '"pbx"')
    assert auth.check(invite(foreign), "127.0.0.1").verdict == "challenge"
    assert "s3cret" not in repr(auth)


def test_nonces_expire_are_bound_to_the_source_and_cannot_be_replayed():
    clock = Clock()
    auth = DigestAuth("callagent", {"alice": "s3cret"}, nonce_ttl_s=300, clock=clock, key=b"k")
    msg = invite(credentials(auth, "127.0.0.1", "s3cret"))
    assert auth.check(msg, "127.0.0.1").verdict == "ok"
    assert auth.check(msg, "127.0.0.1").why == "replayed"
    # The next nonce count of the same nonce is a new request.
    again = invite(credentials(auth, "127.0.0.1", "s3cret", nc="00000002",
                               nonce=parse_digest(msg.split("Authorization: ")[1].split("\r\n")[0]
                                                  )["nonce"]))
    assert auth.check(again, "127.0.0.1").verdict == "ok"
    # A nonce issued to one address is not good from another; a forged one is not either.
    assert auth.check(invite(credentials(auth, "127.0.0.1", "s3cret")),
                      "127.0.0.9").verdict == "challenge"
    forged = credentials(auth, "127.0.0.1", "s3cret", nonce="5f5e100.deadbeef")
    assert auth.check(invite(forged), "127.0.0.1").why == "unknown nonce"
    old = invite(credentials(auth, "127.0.0.1", "s3cret"))
    clock.t += 301
    assert auth.check(old, "127.0.0.1").verdict == "stale"
    assert 'stale=true' in auth.challenge("127.0.0.1", stale=True)


def test_token_bucket_lets_a_burst_through_then_refills_at_the_rate():
    clock = Clock(0.0)
    limiter = InviteLimiter(rate=0.5, burst=3, clock=clock)
    assert [limiter.take("a") for _ in range(3)] == [None, None, None]
    first = limiter.take("a")
    assert first is not None and first.retry_after_s == 2 and first.log and first.refused == 1
    assert limiter.take("b") is None  # another source has its own bucket
    clock.t = 0.2
    quiet = limiter.take("a")
    assert not quiet.log and quiet.refused == 1  # at most one log line a second per source
    clock.t = 1.1
    line = limiter.take("a")  # 0.55 tokens back: still refused, and logged again
    assert line.log and line.refused == 2  # this one and the unlogged one at 0.2 s
    assert line.retry_after_s == 1  # 0.45 of a token to go at 0.5 a second
    clock.t = 2.0
    assert limiter.take("a") is None  # a whole token back
    assert InviteLimiter(rate=0, burst=1, clock=clock).take("a") is None  # 0 = off


def test_a_flood_at_ten_times_the_rate_is_refused_and_logged_once_a_second():
    clock = Clock(0.0)
    limiter = InviteLimiter(rate=5.0, burst=10, clock=clock)
    results = []
    for i in range(500):  # 50 INVITEs a second for 10 s
        clock.t = i / 50
        results.append(limiter.take("203.0.113.9"))
    admitted = sum(r is None for r in results)
    assert 10 + 5 * 10 - 1 <= admitted <= 10 + 5 * 10 + 1
    lines = [r for r in results if r is not None and r.log]
    assert 9 <= len(lines) <= 11
    assert sum(r.refused for r in lines) <= 500 - admitted


def gate(clock: Clock | None = None, **sip) -> CallGate:
    config = parse_config({"sip": sip})
    env = {"ALICE_SIP_PASSWORD": "s3cret"}
    return CallGate(config.sip, sip_passwords(config.sip.auth, env), clock=clock or Clock(),
                    wall_clock=Clock())


def test_gate_order_rate_then_network_then_credentials():
    g = gate(invite_rate=1, invite_burst=2, allow=["127.0.0.1"],
             auth={"users": {"alice": "env:ALICE_SIP_PASSWORD"}})
    s = g.screen("127.0.0.1", invite())
    assert (s.code, s.reason) == (401, "challenge")
    (name, value), = s.headers
    assert name == "WWW-Authenticate" and value.startswith('Digest realm="callagent"')
    assert 'qop="auth"' in value and "algorithm=MD5" in value
    ok = g.screen("127.0.0.1", invite(credentials(g.auth, "127.0.0.1", "s3cret")))
    assert ok.admitted and ok.user == "alice"
    flood = g.screen("127.0.0.1", invite())
    assert (flood.code, flood.headers) == (503, (("Retry-After", "1"),))
    assert g.screen("127.0.0.2", invite()).code == 403  # not allowed, before any challenge
    # Another process's nonce (a restart, another worker): challenged again, not refused.
    foreign = gate(auth={"users": {"alice": "env:ALICE_SIP_PASSWORD"}}).screen(
        "127.0.0.1", invite(credentials(g.auth, "127.0.0.1", "s3cret")))
    assert (foreign.code, foreign.detail) == (401, "unknown nonce")
    g2 = gate(auth={"users": {"alice": "env:ALICE_SIP_PASSWORD"}})
    wrong = g2.screen("127.0.0.1", invite(credentials(g2.auth, "127.0.0.1", "guess")))
    assert (wrong.code, wrong.reason, wrong.user) == (403, "bad-credentials", "alice")


def test_default_allow_is_loopback_and_private_networks_and_empty_means_anyone():
    sip = parse_config({}).sip
    for ok in ("127.0.0.1", "127.0.0.2", "::1", "10.1.2.3", "172.16.0.9", "192.168.1.1",
               "fd00::1"):
        assert sip.allows(ok), ok
    for refused in ("203.0.113.9", "8.8.8.8", "172.32.0.1", "2001:db8::1"):
        assert not sip.allows(refused), refused
    assert parse_config({"sip": {"allow": []}}).sip.allows("203.0.113.9")
    no_auth = gate()
    assert no_auth.auth is None and no_auth.screen("10.0.0.5", invite()).admitted
    assert gate().screen("203.0.113.9", invite()).code == 403


def test_auth_config_names_the_key_and_never_takes_or_echoes_a_password(tmp_path):
    with pytest.raises(ConfigError, match=r"sip\.auth\.users\.alice: expected \"env:") as e:
        parse_config({"sip": {"auth": {"users": {"alice": "hunter2"}}}})
    assert "hunter2" not in str(e.value)
    with pytest.raises(ConfigError, match=r"sip\.auth\.nonce_ttl_s"):
        parse_config({"sip": {"auth": {"nonce_ttl_s": 0}}})
    with pytest.raises(ConfigError, match=r"sip\.invite_rate"):
        parse_config({"sip": {"invite_rate": -1}})
    auth = parse_config({"sip": {"auth": {"users": {
        "alice": "env:ALICE_SIP_PASSWORD", "bob": f"file:{tmp_path / 'bob'}"}}}}).sip.auth
    assert "hunter2" not in repr(auth)
    with pytest.raises(ConfigError, match=r"sip\.auth\.users\.alice: environment variable "
                                          r"ALICE_SIP_PASSWORD is not set"):
        sip_passwords(auth, {})
    with pytest.raises(ConfigError, match=r"sip\.auth\.users\.bob: cannot read"):
        sip_passwords(auth, {"ALICE_SIP_PASSWORD": "a"})
    (tmp_path / "bob").write_text("b0b pass\nignored\n")
    assert sip_passwords(auth, {"ALICE_SIP_PASSWORD": "a"}) == {"alice": "a", "bob": "b0b pass"}
    (tmp_path / "bob").write_text("")
    with pytest.raises(ConfigError, match=r"sip\.auth\.users\.bob: .* is empty"):
        sip_passwords(auth, {"ALICE_SIP_PASSWORD": "a"})


def test_tls_and_srtp_keys_are_checked_and_name_the_key():
    with pytest.raises(ConfigError, match=r'sip\.tls\.certificate: needed by transport = "tls"'):
        parse_config({"sip": {"transport": "tls"}})
    with pytest.raises(ConfigError, match=r"sip\.tls\.private_key: needed with certificate"):
        parse_config({"sip": {"tls": {"certificate": "/etc/cert.pem"}}})
    with pytest.raises(ConfigError, match=r"sip\.tls\.ca_list: needed by verify_clients"):
        parse_config({"sip": {"tls": {"verify_clients": True}}})
    with pytest.raises(ConfigError, match=r"sip\.srtp: 'always' is not one of"):
        parse_config({"sip": {"srtp": "always"}})
    sip = parse_config({"sip": {"transport": "tls", "srtp": "mandatory", "tls": {
        "certificate": "c.pem", "private_key": "k.pem"}}}).sip
    assert (sip.transport, sip.srtp, sip.tls.port) == ("tls", "mandatory", 5061)


def test_an_invite_is_screened_once_as_its_account_is_picked_and_the_call_gets_that_verdict():
    from dialplan.sip import SIPOptions

    clock = [0.0]
    screens = Screens(CallGate(SIPOptions(allow=("127.0.0.1/32",), invite_rate=1,
                                          invite_burst=1), clock=lambda: clock[0]))
    invite = "INVITE sip:101@h SIP/2.0\r\nCall-ID: a@h\r\n\r\n"
    assert screens.select("127.0.0.1", "OPTIONS sip:h SIP/2.0\r\n\r\n") is None
    first = screens.select("127.0.0.1", invite)
    assert first.admitted and screens.incoming("a@h", "127.0.0.1", invite) is first
    # One token spent, not two: the next INVITE is over the rate.
    assert screens.select("127.0.0.1", invite.replace("a@h", "b@h")).code == 503
    # A call pjsua never asked about (or another one's) is screened when it is reported.
    clock[0] = 10.0
    assert screens.incoming("c@h", "127.0.0.2", invite).code == 403
