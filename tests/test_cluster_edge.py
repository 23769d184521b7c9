"""Only the callers you allow, behind kamailio (issue 47).

``callagent cluster`` with ``sip.allow``, ``sip.invite_rate`` and ``[sip.auth]``.

kamailio screens callers at the edge (pike for the rate, permissions for the networks, auth for
the credentials, :mod:`agent.cluster.edge`); the workers take INVITEs from kamailio alone and
check no credentials themselves. The unit tests check the pieces (the workers' command line,
the address file, the auth routes and the passwords' quoting, kamailio's acceptance of the
config); then one real cluster (2 workers, tiny.en + SmolLM2-135M) allowing 127.0.0.1 and
127.0.0.3, at 2 INVITEs a second per source, serves the module: kamailio challenges an INVITE
without credentials (401), answers a wrong password 403 and hands the right one to a worker,
which answers; the same authenticated INVITE sent again is challenged (one-time nonces); sipp
from 127.0.0.2 gets 403 from kamailio (no worker hears of it), and a flood from 127.0.0.3 gets
503 with Retry-After while an authenticated call is answered.
"""

from __future__ import annotations

import dataclasses
import re
import socket
import stat
import subprocess
from pathlib import Path

import pytest
from cluster_harness import needs_kamailio, real_cluster, start_cluster

from agent.cli import serve
from agent.cli.main import build_parser
from agent.cluster import edge, kamailio
from agent.cluster.cluster import edge_address, plan
from dialplan import ConfigError
from dialplan.sip import SIPAuthOptions, SIPOptions
from testkit.agentproc import free_port
from testkit.wire import scenario, sipp_argv, sipp_refusals
from tests.waiting import wait_until

PASSWORD = "correct horse 47"
REALM = "callagent-edge"
RATE, BURST = 2, 4
AUTH_ROUTED = Path(kamailio.__file__).parent / "sipp" / "uac_auth_routed.xml"
ODD_PASSWORD = 'pa$s "w\\rd" $ru'
"""Quotes, a backslash and kamailio variables: written into kamailio.cfg as a plain string."""


# ---- no processes ------------------------------------------------------------------------------

def _auth_screen(password: str = ODD_PASSWORD, **sip: object) -> edge.EdgeScreen:
    options = SIPOptions(auth=SIPAuthOptions(realm=REALM, users={"alice": "env:X"},
                                             nonce_ttl_s=60), **sip)
    return edge.screen_of(options, {"alice": password})


@pytest.mark.unit
def test_kamailio_authenticates_with_one_time_nonces_and_strips_the_credentials():
    screen = _auth_screen()
    assert screen.authenticates and ODD_PASSWORD not in repr(screen)
    mods, routes = edge.modules(screen, "x"), edge.route(screen)
    for needle in ('loadmodule "auth.so"', 'loadmodule "htable.so"', '"one_time_nonce", 1',
                   '"nonce_expire", 60'):
        assert needle in mods, needle
    for needle in ("route(AUTH);", "t_newtran()", f'has_credentials("{REALM}")',
                   f'www_challenge("{REALM}", "1")', "consume_credentials();",
                   f'pv_www_authenticate("{REALM}", "$sht(callers=>$au)", "0")',
                   '$var(user) = "alice";',
                   r'$sht(callers=>$var(user)) = "pa$s \"w\\rd\" $ru";'):
        assert needle in routes, needle
    assert routes.index("consume_credentials();") < routes.index("event=call-authenticated")
    # Without users nothing of it: the lone serve's own gate authenticates (or nobody does).
    plain = edge.screen_of(SIPOptions(), {})
    assert not plain.authenticates
    assert "auth" not in edge.modules(plain, "x") and "AUTH" not in edge.route(plain)
    with pytest.raises(ConfigError, match="control character"):
        edge.route(_auth_screen("two\nlines"))
    with pytest.raises(ConfigError, match="sip.auth.realm"):
        edge.route(dataclasses.replace(screen, realm="$fd"))  # kamailio would expand it


@pytest.mark.unit
def test_workers_accept_kamailio_alone_and_kamailio_screens_callers(tmp_path):
    w1, _ = plan(2, "127.0.0.1", 5060, 40000)
    argv = w1.argv(None, None, "INFO")
    assert argv[argv.index("--allow") + 1] == "127.0.0.1"
    assert argv[argv.index("--invite-rate") + 1] == "0"  # kamailio's pike limits each source
    assert "--no-auth" in argv  # kamailio authenticated every INVITE that reaches a worker
    config = tmp_path / "config.toml"
    config.write_text(f'[sip.auth]\nrealm = "{REALM}"\nusers = {{ alice = "env:UNSET_47" }}\n')
    args = build_parser().parse_args(["serve", "--config", str(config), "--worker", "--no-auth"])
    assert serve._config(args).sip.auth.users == {}  # so no password is read (UNSET_47)
    assert edge_address("0.0.0.0") == "127.0.0.1" and edge_address("10.0.0.10") == "10.0.0.10"
    assert edge.address_list(("127.0.0.1/32", "10.0.0.0/8", "::1", "10.1.2.3/16")).splitlines()[
        1:] == ["1 127.0.0.1 32", "1 10.0.0.0 8", "1 [::1] 128", "1 10.1.0.0 16"]
    assert edge.pike_density(5, 10) == 10 and edge.pike_density(20, 4) == 40
    assert "pike_check_req" not in edge.route(edge.EdgeScreen())  # nothing to check: no modules
    assert edge.modules(edge.EdgeScreen(), "x") == ""


@pytest.mark.tool  # kamailio -c
@needs_kamailio
def test_kamailio_accepts_the_screening_config(tmp_path):
    screen = _auth_screen(allow=("127.0.0.1/32", "::1", "192.168.0.0/16"), invite_rate=RATE,
                          invite_burst=BURST)
    k = kamailio.Kamailio("udp:127.0.0.1:5060", [kamailio.Destination("w1", "sip:127.0.0.1:5061")],
                          tmp_path, screen=screen)
    path = k.write_config()
    cfg = path.read_text()
    for needle in ('loadmodule "pike.so"', '"reqs_density_per_unit", 4',
                   f'"address_file", "{tmp_path / "address.list"}"', "route(SCREEN);",
                   'allow_source_address("1")', 'append_to_reply("Retry-After: 2\\r\\n")',
                   "route(AUTH);", "event_route[htable:mod-init]"):
        assert needle in cfg, needle
    assert cfg.index("route(SCREEN);") < cfg.index("ds_select_dst")
    assert stat.S_IMODE(path.stat().st_mode) == 0o600  # it holds the passwords
    k.check()


# ---- a real cluster ----------------------------------------------------------------------------

@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("edge")
    secret = tmp / "alice.password"
    secret.write_text(PASSWORD + "\n")
    c = start_cluster(tmp, f"sqlite:///{tmp / 'calls.db'}", metrics=False, sip_extra=f"""
allow = ["127.0.0.1/32", "127.0.0.3/32"]
invite_rate = {RATE}
invite_burst = {BURST}
[sip.auth]
realm = "{REALM}"
users = {{ alice = "file:{secret}" }}
""")
    yield c
    assert c.stop() == 0
    assert PASSWORD not in c.log.read_text()


def caller(cluster, xml, source: str = "127.0.0.1", password: str | None = None,
           calls: int = 1, per_s: int = 1, timeout_s: float = 40) -> list[str]:
    """Sipp at kamailio's port from ``source`` (a loopback address), with -au/-ap credentials."""
    argv = sipp_argv(xml, "101", cluster.port, free_port(), free_port(), calls=calls,
                     concurrent=per_s, timeout_s=timeout_s)
    argv[argv.index("-i") + 1] = source
    argv[argv.index("-mi") + 1] = source
    return argv + (["-au", "alice", "-ap", password] if password is not None else [])


def run(argv: list[str], timeout_s: float = 90) -> subprocess.CompletedProcess:
    return subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s)


def _authenticated_call(cluster, tmp_path, name: str, *more: str) -> subprocess.Popen:
    xml = scenario(AUTH_ROUTED, tmp_path / f"{name}.xml", hold_ms=3000)
    return subprocess.Popen(caller(cluster, xml, password=PASSWORD) + list(more),
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def _sent_invite_with_credentials(messages: Path) -> str:
    """The INVITE that carried sipp's Authorization header, from its message trace."""
    for block in re.split(r"\n-{20,}[^\n]*\n", "\n" + messages.read_text(errors="replace")):
        head, _, message = block.replace("\r\n", "\n").partition("\n\n")
        if "message sent" in head and message.startswith("INVITE ") and \
                "\nAuthorization: Digest" in message:
            return message
    raise AssertionError(f"no INVITE with credentials in {messages}")


def _send_again(message: str, kamailio_port: int, local_port: int) -> str:
    """Send ``message`` to kamailio from ``local_port`` again; returns the final response.

    The Via's branch is new, or kamailio would take it for a retransmission of the first one.
    """
    head, _, body = message.partition("\n\n")
    head = re.sub(r"branch=[^;\s]+", "branch=z9hG4bK-replayed", head.strip())
    head = re.sub(r"(?im)^Content-Length:.*$", "", head).strip()
    body = "\r\n".join(body.strip("\n").split("\n")) + "\r\n" if body.strip() else ""
    text = "\r\n".join(head.split("\n")) + f"\r\nContent-Length: {len(body)}\r\n\r\n" + body
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", local_port))
        s.settimeout(10)
        s.sendto(text.encode(), ("127.0.0.1", kamailio_port))
        while True:  # past 100 Trying
            reply = s.recv(65535).decode(errors="replace")
            if not reply.startswith("SIP/2.0 1"):
                return reply


@real_cluster
def test_no_credentials_get_401_from_kamailio(cluster, tmp_path):
    xml = scenario("uac_refused", tmp_path / "c.xml", code=401, header="WWW-Authenticate",
                   value=f'^ *Digest realm="{REALM}", nonce="[^"]+", qop="auth"$')
    before = len(cluster.events("call-rejected"))
    res = run(caller(cluster, xml))
    assert res.returncode == 0, res.stdout[-1500:] + res.stderr[-1500:]
    assert wait_until(lambda: len(cluster.events("call-rejected")) > before, 10)
    (line,) = cluster.events("call-rejected")[before:]
    assert (line["by"], line["reason"]) == ("kamailio", "challenge")
    assert "worker" not in line  # no worker heard of it


@real_cluster
@pytest.mark.timeout(600)
def test_right_credentials_are_answered_and_the_same_invite_again_is_challenged(cluster,
                                                                                tmp_path):
    answered = len(cluster.events("call-answered"))
    authenticated = len(cluster.events("call-authenticated"))
    messages = tmp_path / "auth.messages"
    proc = _authenticated_call(cluster, tmp_path, "auth", "-trace_msg", "-message_file",
                               str(messages))
    out, _ = proc.communicate(timeout=90)
    # rc 0: 401 from kamailio, then 200 with an SDP answer from a worker, BYE answered.
    assert proc.returncode == 0, out[-3000:]
    (ok,) = cluster.events("call-authenticated")[authenticated:]
    assert (ok["by"], ok["user"], ok["source"]) == ("kamailio", "alice", "127.0.0.1")
    assert wait_until(lambda: len(cluster.events("call-answered")) > answered, 30)
    # A captured INVITE sent again: same nonce, same response; kamailio took that nonce once.
    invite = _sent_invite_with_credentials(messages)
    local_port = int(proc.args[proc.args.index("-p") + 1])
    reply = _send_again(invite, cluster.port, local_port)
    assert reply.startswith("SIP/2.0 401 "), reply
    # kamailio's log line reaches the cluster's log through its relay thread: wait for it.
    assert wait_until(lambda: cluster.events("call-rejected", why="nonce-reused"), 10)
    again = cluster.events("call-rejected", code="401", why="nonce-reused")
    assert [(e["by"], e["user"]) for e in again] == [("kamailio", "alice")]
    assert len(cluster.events("call-authenticated")) == authenticated + 1
    print(f"replayed INVITE: {reply.splitlines()[0]} "
          f"(WWW-Authenticate with a new nonce: {'WWW-Authenticate' in reply})")


@real_cluster
def test_wrong_password_gets_403_after_the_challenge(cluster, tmp_path):
    xml = scenario("uac_auth_refused", tmp_path / "w.xml", code=403)
    res = run(caller(cluster, xml, password="not the password"))
    assert res.returncode == 0, res.stdout[-1500:] + res.stderr[-1500:]
    assert wait_until(lambda: cluster.events("call-rejected", reason="bad-credentials"), 10)
    (line,) = cluster.events("call-rejected", code="403", reason="bad-credentials")
    assert (line["by"], line["user"], line["why"], line["source"]) == (
        "kamailio", "alice", "wrong-password", "127.0.0.1")
    assert "not the password" not in cluster.log.read_text()


@real_cluster
def test_a_caller_outside_sip_allow_gets_403_from_kamailio(cluster, tmp_path):
    xml = scenario("uac_reject", tmp_path / "out.xml", code=403)
    res = run(caller(cluster, xml, source="127.0.0.2", password=PASSWORD))
    assert res.returncode == 0, res.stdout[-1500:] + res.stderr[-1500:]
    (line,) = cluster.events("call-rejected", source="127.0.0.2")
    assert (line["by"], line["code"], line["reason"]) == ("kamailio", "403", "not-allowed")
    assert "worker" not in line  # no worker heard of it


@real_cluster
@pytest.mark.timeout(600)
def test_a_flood_gets_503_from_kamailio_while_an_allowed_call_is_answered(cluster, tmp_path):
    answered = len(cluster.events("call-authenticated"))
    good = _authenticated_call(cluster, tmp_path, "during")
    n, per_s = 60, 30  # from 127.0.0.3 (allowed) for 2 s: 15 times the rate
    xml = scenario("uac_refused", tmp_path / "flood.xml", code=503, header="Retry-After",
                   value=f"^ *{edge.PIKE_WINDOW_S}$")
    flood = run(caller(cluster, xml, source="127.0.0.3", calls=n, per_s=per_s))
    out, _ = good.communicate(timeout=90)
    assert good.returncode == 0, out[-3000:]
    assert len(cluster.events("call-authenticated")) == answered + 1
    # What got through pike reached kamailio's auth, which challenged it (401): no call was set
    # up, no worker heard of it.
    others = sipp_refusals(xml)
    assert set(others) <= {401}, (others, flood.stdout[-1500:])
    challenged = others.get(401, 0)
    # pike blocks a source between 1 and 3 times its density in a window (its README).
    assert 1 <= challenged <= 3 * edge.pike_density(RATE, BURST), others
    print(f"flood of {n} INVITEs at {per_s}/s through kamailio: {n - challenged} got 503 with "
          f"Retry-After from pike, {challenged} got kamailio's challenge (401); the "
          "authenticated call was answered")
