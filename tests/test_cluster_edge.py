"""Only the callers you allow, behind kamailio (issue 47): ``callagent cluster`` with ``sip.allow``,
``sip.invite_rate`` and ``[sip.auth]``.

kamailio screens callers at the edge (pike for the rate, permissions for the networks,
:mod:`agent.cluster.edge`), the workers take INVITEs from kamailio alone and check credentials
with one nonce key the cluster gives them all. The unit tests check the pieces (the shared key,
the workers' command line, the address file, kamailio's acceptance of the config); then one real
cluster (2 workers, tiny.en + SmolLM2-135M) allowing 127.0.0.1 and 127.0.0.3, at 2 INVITEs a
second per source, serves the module: an authenticated sipp call is answered although kamailio
hands its second INVITE to the other worker, sipp from 127.0.0.2 gets 403 from kamailio (no
worker hears of it), and a flood from 127.0.0.3 gets 503 with Retry-After while an authenticated
call is answered.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from cluster_harness import needs_kamailio, real_cluster, start_cluster

from agent.bench.agentproc import free_port
from agent.bench.wire import scenario, sipp_argv, sipp_refusals
from agent.cluster import edge, kamailio
from agent.cluster.cluster import edge_address, plan
from agent.sip.digest import digest_response
from agent.sip.gate import CallGate
from dialplan import ConfigError
from dialplan.config import NONCE_KEY_ENV, sip_nonce_key
from dialplan.options import SIPAuthOptions, SIPOptions
from tests.waiting import wait_until

PASSWORD = "correct horse 47"
REALM = "callagent-edge"
RATE, BURST = 2, 4
AUTH_ROUTED = Path(kamailio.__file__).parent / "sipp" / "uac_auth_routed.xml"


# ---- no processes ------------------------------------------------------------------------------

def _invite(nonce: str, password: str = PASSWORD) -> str:
    uri = "sip:101@127.0.0.1:5060"
    response = digest_response("alice", REALM, password, "INVITE", uri, nonce, "00000001", "c0ffee",
                               "auth")
    return (f"INVITE {uri} SIP/2.0\r\nAuthorization: Digest username=\"alice\", realm=\"{REALM}\", "
            f"nonce=\"{nonce}\", uri=\"{uri}\", response=\"{response}\", algorithm=MD5, "
            f"qop=auth, nc=00000001, cnonce=\"c0ffee\"\r\n\r\n")


def _gate(key: bytes | None) -> CallGate:
    options = SIPOptions(auth=SIPAuthOptions(realm=REALM, users={"alice": "env:X"}))
    return CallGate(options, {"alice": PASSWORD}, nonce_key=key)


def _nonce(gate: CallGate, source: str) -> str:
    challenge = dict(gate.screen(source, "INVITE sip:101@127.0.0.1:5060 SIP/2.0\r\n\r\n").headers)
    return challenge["WWW-Authenticate"].split('nonce="')[1].split('"')[0]


@pytest.mark.unit
def test_workers_with_one_nonce_key_accept_each_others_challenges():
    key = bytes(range(32))
    w1, w2 = _gate(key), _gate(key)
    nonce = _nonce(w1, "127.0.0.1")  # kamailio's address: every call comes from there
    assert w2.screen("127.0.0.1", _invite(nonce)).admitted
    # Each with its own random key (a lone serve), the other worker challenges again.
    alone = _gate(None)
    refused = alone.screen("127.0.0.1", _invite(_nonce(_gate(None), "127.0.0.1")))
    assert (refused.code, refused.detail) == (401, "unknown nonce")
    assert sip_nonce_key({}) is None
    assert sip_nonce_key({NONCE_KEY_ENV: key.hex()}) == key
    for bad in ("not hex", "00" * 8):
        with pytest.raises(ConfigError, match=NONCE_KEY_ENV):
            sip_nonce_key({NONCE_KEY_ENV: bad})


@pytest.mark.unit
def test_workers_accept_kamailio_alone_and_kamailio_screens_callers():
    w1, _ = plan(2, "127.0.0.1", 5060, 40000)
    argv = w1.argv(None, None, "INFO")
    assert argv[argv.index("--allow") + 1] == "127.0.0.1"
    assert argv[argv.index("--invite-rate") + 1] == "0"  # kamailio's pike limits each source
    assert edge_address("0.0.0.0") == "127.0.0.1" and edge_address("10.0.0.10") == "10.0.0.10"
    assert edge.address_list(("127.0.0.1/32", "10.0.0.0/8", "::1", "10.1.2.3/16")).splitlines()[
        1:] == ["1 127.0.0.1 32", "1 10.0.0.0 8", "1 [::1] 128", "1 10.1.0.0 16"]
    assert edge.pike_density(5, 10) == 10 and edge.pike_density(20, 4) == 40
    assert "pike_check_req" not in edge.route(edge.EdgeScreen())  # nothing to check: no modules
    assert edge.modules(edge.EdgeScreen(), "x") == ""


@pytest.mark.tool  # kamailio -c
@needs_kamailio
def test_kamailio_accepts_the_screening_config(tmp_path):
    screen = edge.EdgeScreen(("127.0.0.1/32", "::1", "192.168.0.0/16"), RATE, BURST)
    k = kamailio.Kamailio("udp:127.0.0.1:5060", [kamailio.Destination("w1", "sip:127.0.0.1:5061")],
                          tmp_path, screen=screen)
    cfg = k.write_config().read_text()
    for needle in ('loadmodule "pike.so"', '"reqs_density_per_unit", 4',
                   f'"address_file", "{tmp_path / "address.list"}"', "route(SCREEN);",
                   'allow_source_address("1")', 'append_to_reply("Retry-After: 2\\r\\n")'):
        assert needle in cfg, needle
    assert cfg.index("route(SCREEN);") < cfg.index("ds_select_dst")
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
    """sipp at kamailio's port from ``source`` (a loopback address), with -au/-ap credentials."""
    argv = sipp_argv(xml, "101", cluster.port, free_port(), free_port(), calls=calls,
                     concurrent=per_s, timeout_s=timeout_s)
    argv[argv.index("-i") + 1] = source
    argv[argv.index("-mi") + 1] = source
    return argv + (["-au", "alice", "-ap", password] if password is not None else [])


def run(argv: list[str], timeout_s: float = 90) -> subprocess.CompletedProcess:
    return subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s)


def _authenticated_call(cluster, tmp_path, name: str) -> subprocess.Popen:
    xml = scenario(AUTH_ROUTED, tmp_path / f"{name}.xml", hold_ms=3000)
    return subprocess.Popen(caller(cluster, xml, password=PASSWORD), stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)


@real_cluster
@pytest.mark.timeout(600)
def test_an_authenticated_call_is_answered_by_the_worker_that_did_not_challenge(cluster,
                                                                                tmp_path):
    for i in range(2):  # two calls: round-robin starts the second one's INVITEs elsewhere
        proc = _authenticated_call(cluster, tmp_path, f"auth{i}")
        out, _ = proc.communicate(timeout=90)
        assert proc.returncode == 0, out[-3000:]
    answered = cluster.events("call-authenticated", user="alice")
    assert len(answered) == 2
    for ev in answered:
        (challenge,) = cluster.events("call-rejected", call=ev["call"], reason="challenge")
        # kamailio gave the answer to the challenge to the other worker, which took its nonce.
        assert challenge["worker"] != ev["worker"], (challenge, ev)
        assert ev["source"] == "127.0.0.1"
    assert wait_until(lambda: len(cluster.events("call-answered")) >= 2, 30)


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
    # What got through pike reached a worker, which challenged it (401): no call was set up.
    others = sipp_refusals(xml)
    assert set(others) <= {401}, (others, flood.stdout[-1500:])
    challenged = others.get(401, 0)
    # pike blocks a source between 1 and 3 times its density in a window (its README).
    assert 1 <= challenged <= 3 * edge.pike_density(RATE, BURST), others
    print(f"flood of {n} INVITEs at {per_s}/s through kamailio: {n - challenged} got 503 with "
          f"Retry-After from pike, {challenged} reached a worker (401); the authenticated call "
          "was answered")
