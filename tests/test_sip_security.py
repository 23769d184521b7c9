"""Only the callers you allow (issue 47), without kamailio.

``callagent serve`` with ``[sip.auth]`` and a low ``sip.invite_rate``, called by sipp on
loopback addresses.

One agent serves the module (models load once): extension 101 answers with the fast profile
once the caller has authenticated as ``alice`` (password from a file). The default ``sip.allow``
(loopback and private networks) lets 127.0.0.2 and 127.0.0.3 call; the 403 for a source outside
an explicit list is tested in ``test_sip_call.py``. The unit side (digest arithmetic, token
bucket, order of the checks) is ``test_sip_gate.py``.
"""

from __future__ import annotations

import subprocess

import pytest
from sipp.harness import start_agent

from testkit.agentproc import free_port
from testkit.wire import scenario, sipp_argv, sipp_refusals
from tests.waiting import wait_until

pytestmark = [pytest.mark.sip, pytest.mark.model, pytest.mark.tool]

PASSWORD = "correct horse 47"
REALM = "callagent-test"
RATE, BURST = 2, 4
PROFILES = """
[profiles.fast]
greeting = "Hello."
llm = { model = "smollm2-135m", max_tokens = 20, threads = 1 }
"""
needs_sipp = pytest.mark.needs("sipp")


@pytest.fixture(scope="module")
def agent(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("agent")
    secret = tmp / "alice.password"
    secret.write_text(PASSWORD + "\n")
    proc = start_agent(tmp, PROFILES, '"101" = "fast"', sip_extra=f"""
invite_rate = {RATE}
invite_burst = {BURST}
[sip.auth]
realm = "{REALM}"
users = {{ alice = "file:{secret}" }}
""")
    yield proc
    rc = proc.stop()
    assert rc == 0, proc.log_text()[-2000:]
    assert PASSWORD not in proc.log_text()


def caller(xml, agent, source: str = "127.0.0.1", password: str | None = None,
           calls: int = 1, per_s: int = 1, timeout_s: float = 30) -> list[str]:
    """The sipp command line from ``source`` (a loopback address), with -au/-ap credentials."""
    argv = sipp_argv(xml, "101", agent.port, free_port(), free_port(), calls=calls,
                     concurrent=per_s, timeout_s=timeout_s)
    argv[argv.index("-i") + 1] = source
    argv[argv.index("-mi") + 1] = source
    if password is not None:
        argv += ["-au", "alice", "-ap", password]
    return argv


def run(argv: list[str], timeout_s: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s)


def rejected(agent, **fields) -> list[dict[str, str]]:
    return [e for e in agent.events("call-rejected")
            if all(e.get(k) == str(v) for k, v in fields.items())]


@needs_sipp
def test_no_credentials_get_401_with_a_digest_challenge(agent, tmp_path):
    # From 127.0.0.2: loopback, so the default sip.allow lets it as far as the challenge.
    xml = scenario("uac_refused", tmp_path / "c.xml", code=401, header="WWW-Authenticate",
                   value=f"^ *Digest realm=.{REALM}., nonce=.[0-9a-f]+[.][0-9a-f]{{32}}., "
                         "algorithm=MD5, qop=.auth.$")
    res = run(caller(xml, agent, source="127.0.0.2"))
    assert res.returncode == 0, res.stdout[-1500:] + res.stderr[-1500:]
    assert rejected(agent, code=401, reason="challenge", source="127.0.0.2")


@needs_sipp
def test_right_credentials_are_answered(agent, tmp_path):
    answered = len(agent.events("call-answered"))
    xml = scenario("uac_auth", tmp_path / "a.xml", hold_ms=2000)
    res = run(caller(xml, agent, password=PASSWORD))
    # rc 0: 401, then 200 with an SDP answer to the INVITE with credentials, BYE answered.
    assert res.returncode == 0, res.stdout[-1500:] + res.stderr[-1500:]
    assert agent.events("call-authenticated")[-1]["user"] == "alice"
    assert wait_until(lambda: len(agent.events("call-answered")) > answered)


@needs_sipp
def test_wrong_password_gets_403_after_the_challenge(agent, tmp_path):
    xml = scenario("uac_auth_refused", tmp_path / "w.xml", code=403)
    res = run(caller(xml, agent, password="not the password"))
    assert res.returncode == 0, res.stdout[-1500:] + res.stderr[-1500:]
    (line,) = rejected(agent, code=403, reason="bad-credentials")
    assert (line["user"], line["why"], line["source"]) == ("alice", "wrong password", "127.0.0.1")
    assert "not the password" not in agent.log_text()


@needs_sipp
def test_a_flood_gets_503_with_retry_after_while_an_allowed_call_is_answered(agent, tmp_path):
    answered = len(agent.events("call-answered"))
    good = subprocess.Popen(caller(scenario("uac_auth", tmp_path / "a.xml", hold_ms=4000),
                                   agent, password=PASSWORD),
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    n, per_s = 60, 30  # 30 INVITEs a second from one source for 2 s: 15 times the rate
    flood_xml = scenario("uac_refused", tmp_path / "f.xml", code=503, header="Retry-After",
                         value="^ *[1-9][0-9]*$")
    flood = run(caller(flood_xml, agent, source="127.0.0.3", calls=n, per_s=per_s))
    out, _ = good.communicate(timeout=60)
    assert good.returncode == 0, out[-2000:]
    assert wait_until(lambda: len(agent.events("call-answered")) > answered)
    # Calls that got something else than a 503 with Retry-After: the bucket's challenges.
    others = sipp_refusals(flood_xml)
    assert set(others) <= {401}, (others, flood.stdout[-1500:])
    challenged = others.get(401, 0)
    assert BURST <= challenged <= BURST + RATE * 3, others  # burst + refill over the ~2 s
    limited = n - challenged
    lines = rejected(agent, code=503, reason="flood", source="127.0.0.3")
    # One line per source per second, each counting the refusals it stands for.
    assert 1 <= len(lines) <= 4, lines
    assert sum(int(e["refused"]) for e in lines) <= limited
    print(f"flood of {n} INVITEs at {per_s}/s: {challenged} challenged (401), {limited} got "
          f"503 with Retry-After, {len(lines)} log lines; the authenticated call was answered")
