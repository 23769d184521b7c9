"""``callagent cluster``: kamailio + 2 real workers on 127.0.0.1, called by sipp through kamailio.

The first tests need no models: port planning, the generated kamailio config (checked by the
real kamailio) and lost-call scoping on a real SQLite call log. Then one cluster (tiny.en +
SmolLM2-135M, 2 workers, SQLite call log in WAL mode) serves the module in order: 8 concurrent
calls that each stream a spoken question are answered 4 + 4 and a 9th is refused, and /metrics
matches the call log; a worker killed mid-call loses only its own calls, is restarted and put
back by kamailio's OPTIONS probe; ``report --by worker`` shows both; a ``bench call`` round
through kamailio measures one call per worker; SIGTERM stops everything.
Last, a smaller round on the suite's temporary PostgreSQL. Timeouts are generous: 2 shared
cores run both workers. Starting the cluster, placing calls and reading its log, call log and
/metrics are :mod:`cluster_harness`.
"""
from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path

import pytest
from cluster_harness import (
    by_worker,
    calls,
    needs_kamailio,
    real_cluster,
    routed,
    start_cluster,
)
from db_fixtures import call_started, pg_clean_url_fixture, pg_cluster_fixture, pg_url_fixture  # noqa: F401
from sipp.harness import ROOT
from sqlalchemy import text

from agent.cluster import kamailio
from agent.cluster.cluster import plan
from agent.cluster.probe import options_ping
from bench import call as bench_call
from db.migrate import make_engine, upgrade
from db.placement import call_places, close_lost_calls_of, place_groups, this_host
from db.reports import load_turns
from db.rows import apply
from db.stats import percentile
from dialplan import ConfigError, Dialplan, load_config
from testkit.agentproc import bench_config, free_port
from testkit.samples import QUESTION
from testkit.wire import Capture, scenario, sipp, sipp_refusals, split_calls, spoken_ulaw
from tests.waiting import wait_until

# ---- no models -------------------------------------------------------------------------------

@pytest.mark.unit
def test_plan_gives_each_worker_its_ports_and_names_the_bad_option():
    w1, w2 = plan(2, "127.0.0.1", 5060, 40000, metrics_port=9100)
    assert (w1.id, w1.sip_port, w1.rtp_port, w1.metrics_port) == ("w1", 5061, 40000, 9101)
    assert (w2.id, w2.sip_port, w2.rtp_port, w2.metrics_port) == ("w2", 5062, 40100, 9102)
    assert plan(1, "h", 5060, 40000)[0].metrics_port == 0  # no /metrics unless asked
    # /metrics is scraped where it listens: sip.metrics_host (this machine unless set), not
    # the SIP host; a worker listening on every address is scraped on loopback.
    assert w1.metrics_url == "http://127.0.0.1:9101/metrics"
    (public,) = plan(1, "10.0.0.11", 5060, 40000, metrics_port=9100, metrics_host="0.0.0.0")
    assert public.metrics_url == "http://127.0.0.1:9101/metrics"
    (lan,) = plan(1, "10.0.0.11", 5060, 40000, metrics_port=9100, metrics_host="10.0.0.11")
    assert lan.metrics_url == "http://10.0.0.11:9101/metrics"
    assert "--worker-id" in w1.argv(None, None, "INFO") and w1.argv(None, None, "INFO")[-1] == \
        "--worker"
    for kwargs, key in ((dict(workers=0), "--workers"), (dict(rtp_port=65500), "sip.rtp_port"),
                        (dict(worker_port=5060), "--worker-port"),
                        (dict(metrics_port=5059), "/metrics port of worker w1.*sip.port"),
                        (dict(metrics_port=5062), "worker w2.*already the sip.metrics_port"),
                        (dict(metrics_port=40050), "sip.metrics_port")):
        args = dict(workers=2, host="127.0.0.1", public_port=5060, rtp_port=40000) | kwargs
        with pytest.raises(ConfigError, match=key):
            plan(**args)


@pytest.mark.tool  # kamailio -c, and the CLI in a child process
@needs_kamailio
def test_kamailio_accepts_the_generated_config(tmp_path):
    dests = [kamailio.Destination("w1", "sip:127.0.0.1:5061"),
             kamailio.Destination("w2", "sip:127.0.0.1:5062")]
    k = kamailio.Kamailio("udp:127.0.0.1:5060", dests, tmp_path)
    cfg = k.write_config().read_text()
    for needle in ('ds_select_dst("1", "4")', "record_route()", 't_on_failure("NEXT_WORKER")',
                   "ds_next_dst()", 't_check_status("486|503|408")', '"ds_ping_interval", 1',
                   '"ds_probing_mode", 1', "event_route[dispatcher:dst-down]"):
        assert needle in cfg
    assert (tmp_path / "dispatcher.list").read_text().splitlines()[1:] == [
        "1 sip:127.0.0.1:5061 9 0 duid=w1", "1 sip:127.0.0.1:5062 9 0 duid=w2"]
    k.check()  # kamailio -c: parses, modules load
    # A standalone front for agents on other hosts (Debian's kamailio.service: syslog).
    out = tmp_path / "etc"
    res = subprocess.run([sys.executable, "-m", "agent.cli.main", "cluster", "--write-kamailio",
                          str(out), "--listen", "udp:127.0.0.1:5070", "--agent",
                          "sip:10.0.0.11:5060", "--agent", "sip:10.0.0.12:5060"],
                         capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert res.returncode == 0, res.stderr
    assert "log_stderror=no" in (out / "kamailio.cfg").read_text()
    assert "sip:10.0.0.12:5060 9 0 duid=w2" in (out / "dispatcher.list").read_text()
    chk = subprocess.run([kamailio.executable(), "-c", "-f", str(out / "kamailio.cfg")],
                         capture_output=True, text=True, timeout=30)
    assert chk.returncode == 0, chk.stderr[-1500:]
    bad = subprocess.run([sys.executable, "-m", "agent.cli.main", "cluster", "--write-kamailio",
                          str(out), "--listen", "udp:127.0.0.1:5070", "--agent", "10.0.0.11"],
                         capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert bad.returncode == 2 and "--agent" in bad.stderr


@pytest.mark.unit
def test_bench_call_takes_a_list_of_setups_and_writes_a_config_the_agent_loads(tmp_path):
    assert bench_call.worker_counts("1,2") == [1, 2] and bench_call.worker_counts("4") == [4]
    for bad in ("0", "1,x", ""):
        with pytest.raises(argparse.ArgumentTypeError):
            bench_call.worker_counts(bad)
    path = tmp_path / "config.toml"
    path.write_text(bench_config(5060, 40000, tmp_path, "smollm2-135m", 1, "tiny.en",
                                 stage_threads=1, max_silence_s=120))
    config = load_config(path)
    fast = config.profiles["fast"]
    assert (config.sip.port, config.sip.rtp_port, config.sip.max_calls) == (5060, 40000, 4)
    assert (fast.asr.model, fast.asr.threads, fast.llm.threads, fast.tts.threads) == (
        "tiny.en", 1, 1, 1)
    assert fast.limits.max_silence_s == 120 and not fast.under_load
    assert config.db.url == f"sqlite:///{tmp_path}/calls.db"
    path.write_text(bench_config(5060, 40000, tmp_path, "qwen2.5-1.5b-instruct", 2, "base",
                                 stage_threads=2, under_load=("tiny.en", "smollm2-135m")))
    dial = Dialplan.from_config(load_config(path))
    cheap = dial.fallback(dial.resolve("101"))
    assert (cheap.name, cheap.asr.model, cheap.asr.threads, cheap.llm.model) == (
        "fast/quick", "tiny.en", 2, "smollm2-135m")
    assert bench_call._model_pair("tiny.en, smollm2-135m") == ("tiny.en", "smollm2-135m")
    with pytest.raises(argparse.ArgumentTypeError):
        bench_call._model_pair("tiny.en")
    assert bench_call._model_pair("none") is None
    # By default the bench profile falls back as config.toml's default profile does.
    shipped = Dialplan.from_config(load_config(Path(__file__).parents[1] / "config.toml"))
    lite = shipped.fallback(shipped.resolve("100"))
    assert (lite.asr.model, lite.llm.model) == bench_call.SHIPPED_UNDER_LOAD
    # sipp's error file as SIPp 3.6 writes it: refusals are counted by status, a timeout is not.
    err = tmp_path / "stream_8.err"
    abort = ("2026-11-23\t15:38:03.296171\t1795448283.296171: Aborting call on unexpected "
             "message for Call-Id '{n}-28622@127.0.0.1': while expecting '100' (index 1), "
             "received 'SIP/2.0 {code} Busy Here\nVia: SIP/2.0/UDP 127.0.0.1:52299\nCSeq: 1 "
             "INVITE\n\n'")
    err.write_text("The following events occurred:\n" + "".join(
        abort.format(n=n, code=code) for n, code in ((5, 486), (6, 486), (7, 503)))
        + "2026-11-23\t15:39:00.1\t1.1: Call-Id '9-28622@127.0.0.1' timed out\n")
    assert sipp_refusals(tmp_path / "stream_8.xml") == {486: 2, 503: 1}


@pytest.mark.unit
def test_a_dead_workers_calls_are_closed_not_its_neighbours(tmp_path):
    url = f"sqlite:///{tmp_path / 'calls.db'}"
    upgrade(url)
    engine = make_engine(url)
    from sqlalchemy.orm import Session

    t0 = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)
    with Session(engine) as s, s.begin():
        for cid, worker, host in (("a", "w1", "h1"), ("b", "w2", "h1"), ("c", "w1", "h2"),
                                  ("d", None, "h1")):
            apply(s, call_started(cid, t0, worker=worker, host=host))
    assert close_lost_calls_of(engine, "w1", "h1", detail="worker w1 pid 7 died: SIGKILL") == 1
    with engine.connect() as conn:
        rows = dict(conn.execute(text("SELECT id, end_reason FROM calls")).all())
        lost = conn.execute(text("SELECT call_id, detail FROM events")).all()
    assert rows == {"a": "lost", "b": "", "c": "", "d": ""}
    assert lost == [("a", "worker w1 pid 7 died: SIGKILL")]
    assert close_lost_calls_of(engine, None, "h1") == 1  # a lone serve: only worker-less calls
    assert call_places(engine) == {"a": ("w1", "h1"), "b": ("w2", "h1"), "c": ("w1", "h2"),
                                   "d": (None, "h1")}
    engine.dispose()


# ---- a real cluster --------------------------------------------------------------------------

@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("cluster")
    c = start_cluster(tmp, f"sqlite:///{tmp / 'calls.db'}")
    yield c
    c.stop()


@pytest.fixture(scope="module")
def question(tmp_path_factory):
    # Silent RTP after the question until the BYE, as a phone sends (no RTP = a dead line).
    return spoken_ulaw(QUESTION, tmp_path_factory.mktemp("audio") / "q.ulaw", lead_s=2.0,
                       tail_s=90.0)


@real_cluster
@pytest.mark.timeout(900)
def test_eight_calls_are_answered_four_and_four_and_a_ninth_is_refused(cluster, question,
                                                                      tmp_path):
    assert options_ping("127.0.0.1", cluster.port) == 200  # kamailio
    assert options_ping("127.0.0.1", cluster.port + 1) == 200  # a worker: pjsua2 answers too
    # 8 calls on 2 shared cores (load average 6-9 from other jobs): in trial runs replies came
    # 14-52 s after the question, each worker's 4th caller last.
    xml = routed(tmp_path, "eight", question, hold_ms=90000)
    with Capture(tmp_path / "eight.pcap", cluster.rtp_ports) as cap:
        eight = calls(cluster, xml, 8, timeout_s=150)
        assert wait_until(lambda: by_worker(cluster, "ended_at IS NULL") == {"w1": 4, "w2": 4},
                          timeout=60), by_worker(cluster)
        ninth = scenario("uac_reject", tmp_path / "ninth.xml", code=486)
        res = sipp(ninth, "101", cluster.port, free_port(), free_port(), timeout_s=20)
        assert res.returncode == 0, res.stdout[-1500:]  # both workers full: 486 after failover
        out, _ = eight.communicate(timeout=200)
    assert eight.returncode == 0, out[-3000:]  # 8 x (200 with SDP, BYE answered 200)
    assert cluster.events("refused", status="486")
    assert cluster.events("failover", status="486")
    wire = split_calls(cap.packets(), cluster.rtp_ports)
    assert len(wire) == 8
    for call in wire.values():
        assert sum(b - a for a, b in call.reply_runs()) >= 0.5, "no reply speech on the wire"
    assert by_worker(cluster, "end_reason = 'caller-bye'") == {"w1": 4, "w2": 4}
    assert {h for (h,) in cluster.query("SELECT DISTINCT host FROM calls")} == {this_host()}
    assert wait_until(lambda: cluster.query("SELECT count(*) FROM turns")[0][0] >= 8, 30)

    # /metrics: each worker's counters are the call log's.
    def agrees() -> bool:
        m = cluster.metrics()
        for w in ("w1", "w2"):
            turns = cluster.query("SELECT t.unanswered, t.voice_to_voice_s FROM turns t JOIN "
                                  "calls c ON c.id = t.call_id WHERE c.worker = :w", w=w)
            answered = [v for why, v in turns if not why and v is not None]
            unanswered = Counter(why for why, _ in turns if why)
            got = {k[2]: v for k, v in m.items()
                   if k[:2] == ("callagent_unanswered_turns_total", w)}
            if (m.get(("callagent_calls_total", w)), m.get(("callagent_turns_total", w)),
                    m.get(("callagent_voice_to_voice_seconds_count", w)), got,
                    m.get(("callagent_calls_active", w))) != (
                    4, len(turns), len(answered), unanswered, 0):
                return False
            assert m[("callagent_voice_to_voice_seconds_sum", w)] == pytest.approx(sum(answered))
            assert m[("callagent_worker_up", w)] == 1
            assert ("callagent_scheduler_queue_depth", w) in m
        return m[("callagent_calls_ended_total", "w1", "caller-bye")] == 4
    assert wait_until(agrees, timeout=30, every=1), cluster.metrics()


@real_cluster
@pytest.mark.timeout(900)
def test_a_killed_worker_loses_only_its_calls_and_comes_back(cluster, question, tmp_path):
    quiet = tmp_path / "quiet.ulaw"
    quiet.write_bytes(b"\xff" * 8000 * 30)  # μ-law silence
    before = set(c for (c,) in cluster.query("SELECT id FROM calls"))
    held = calls(cluster, routed(tmp_path, "held", quiet, hold_ms=25000), 4, timeout_s=60)
    assert wait_until(lambda: by_worker(cluster, "ended_at IS NULL") == {"w1": 2, "w2": 2},
                      timeout=60), by_worker(cluster, "ended_at IS NULL")
    (started,) = cluster.events("worker-started", worker="w1")[-1:]
    readies = len(cluster.events("ready", worker="w1"))
    os.kill(int(started["pid"]), signal.SIGKILL)

    assert wait_until(lambda: cluster.events("worker-died", worker="w1"), timeout=30)
    (died,) = cluster.events("worker-died", worker="w1")
    assert (died["reason"], died["calls_lost"]) == ("SIGKILL", "2")
    lost = cluster.query("SELECT c.worker, e.detail FROM calls c JOIN events e ON e.call_id = "
                         "c.id WHERE c.end_reason = 'lost' AND e.kind = 'lost'")
    assert [w for w, _ in lost] == ["w1", "w1"]
    assert all("worker w1" in d and "SIGKILL" in d for _, d in lost)
    assert by_worker(cluster, "ended_at IS NULL") == {"w2": 2}  # the neighbour's calls go on
    # kamailio takes w1 out; a call now goes to w2 (2 free slots) instead of into the void.
    assert wait_until(lambda: cluster.events("worker-down", worker="w1"), timeout=20)
    one = calls(cluster, routed(tmp_path, "one", quiet, hold_ms=3000), 1, timeout_s=30)
    assert one.wait(60) == 0, one.stdout.read()[-2000:]
    held.wait(90)  # w1's two calls fail at their BYE (no one answers it); w2's end normally
    new = "id NOT IN ({})".format(",".join(f"'{c}'" for c in before) or "''")
    assert wait_until(lambda: by_worker(cluster, f"end_reason = 'caller-bye' AND {new}")
                      == {"w2": 3}, 30), by_worker(cluster, new)

    # The supervisor restarts w1, kamailio's probe puts it back: the next 4 calls spread 2 + 2.
    assert wait_until(lambda: len(cluster.events("ready", worker="w1")) > readies, timeout=400)
    assert wait_until(lambda: len(cluster.events("worker-up", worker="w1")) >= 2, timeout=30)
    seen = set(c for (c,) in cluster.query("SELECT id FROM calls"))
    nxt = calls(cluster, routed(tmp_path, "next", question, hold_ms=25000), 4, timeout_s=60)
    out, _ = nxt.communicate(timeout=120)
    assert nxt.returncode == 0, out[-3000:]

    def fresh() -> list[tuple]:
        return [r for r in cluster.query("SELECT id, worker, end_reason FROM calls")
                if r[0] not in seen]
    assert wait_until(lambda: {r for _, _, r in fresh()} == {"caller-bye"}, 30), fresh()
    assert sorted(w for _, w, _ in fresh()) == ["w1", "w1", "w2", "w2"]
    assert wait_until(lambda: {cid for (cid,) in cluster.query(
        "SELECT DISTINCT call_id FROM turns WHERE unanswered = ''")} >= {c for c, _, _ in fresh()},
        30), "a call of the 4 was not answered"


@real_cluster
def test_report_by_worker_shows_both_workers(cluster):
    host = this_host()
    res = subprocess.run([sys.executable, "-m", "agent.cli.main", "report", "--db",
                          cluster.db_url, "--by", "worker", "--format", "json"],
                         capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert res.returncode == 0, res.stderr
    groups = {g["key"]: g for g in json.loads(res.stdout)["groups"]}
    assert set(groups) == {f"w1@{host}", f"w2@{host}"}
    db = dict(cluster.query("SELECT c.worker, count(*) FROM turns t JOIN calls c "
                            "ON c.id = t.call_id GROUP BY c.worker"))
    assert {k.split("@")[0]: g["turns"] for k, g in groups.items()} == db
    table = subprocess.run([sys.executable, "-m", "agent.cli.main", "report", "--db",
                            cluster.db_url, "--by", "host"], capture_output=True, text=True,
                           cwd=ROOT, timeout=60)
    assert table.returncode == 0 and "Latency by host" in table.stdout and host in table.stdout


@real_cluster
@pytest.mark.timeout(300)
def test_bench_call_round_through_kamailio_measures_each_worker(cluster, question, capsys):
    # One round of `bench call --workers 2` against the running cluster: the wire and the call
    # log must agree on 2 answered calls, one per worker.
    args = argparse.Namespace(hold_s=45.0, rounds=1)
    setup = Path(cluster.db_url.removeprefix("sqlite:///")).parent
    r = bench_call.one_round(2, 2, args, setup, cluster.port, [question], cluster.rtp_ports)
    assert (r.placed, r.answered, r.refused, r.sipp_rc) == (2, 2, {}, 0)
    assert r.per_worker == {"w1": 1, "w2": 1}
    assert len(r.v2v_ms) == 2 and all(0 < v < 39000 for v in r.v2v_ms), r.v2v_ms
    assert r.turns >= 2 and r.unanswered == {}
    assert r.gaps_ms and min(r.gaps_ms) > 0
    assert len(r.holes_ms) == 2  # each call's reply read for dead air
    bench_call.print_table([r], baseline_s=percentile(r.v2v_ms, 50) / 1000)
    row = [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("| cluster 2 ")][-1]
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[1:4] == ["2", "2/2", "0"] and cells[6] == "1.00x" and cells[-1] == "w1 1, w2 1"


@real_cluster
def test_sigterm_stops_workers_and_kamailio(cluster):
    pids = [int(e["pid"]) for e in cluster.events("worker-started")]
    pids += [int(e["pid"]) for e in cluster.events("kamailio-started")]
    started = time.monotonic()
    assert cluster.stop() == 0
    assert time.monotonic() - started < 60
    assert cluster.events("kamailio-stopped") and cluster.events("cluster-stopped")
    assert len(cluster.events("stopped")) == 2  # each worker's clean shutdown line
    for pid in pids:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)
    assert options_ping("127.0.0.1", cluster.port, timeout=0.5) is None


@real_cluster
@pytest.mark.timeout(900)
def test_cluster_on_postgres(pg_clean_url, question, tmp_path):
    c = start_cluster(tmp_path, pg_clean_url, metrics=False)
    try:
        two = calls(c, routed(tmp_path, "two", question, hold_ms=25000), 2, timeout_s=60)
        assert wait_until(lambda: by_worker(c, "ended_at IS NULL") == {"w1": 1, "w2": 1}, 60)
        (started,) = c.events("worker-started", worker="w2")[-1:]
        os.kill(int(started["pid"]), signal.SIGKILL)
        assert wait_until(lambda: by_worker(c, "end_reason = 'lost'") == {"w2": 1}, 30)
        two.wait(90)
        assert wait_until(lambda: by_worker(c, "end_reason = 'caller-bye'") == {"w1": 1}, 30)
        assert wait_until(lambda: len(c.events("worker-up", worker="w2")) >= 2, timeout=400)
        nxt = calls(c, routed(tmp_path, "next", question, hold_ms=25000), 2, timeout_s=60)
        out, _ = nxt.communicate(timeout=120)
        assert nxt.returncode == 0, out[-3000:]
        assert wait_until(lambda: by_worker(c, "end_reason = 'caller-bye'")
                          == {"w1": 2, "w2": 1}, 30), by_worker(c)
        engine = make_engine(pg_clean_url)
        groups = place_groups(load_turns(engine), call_places(engine), "worker")
        engine.dispose()
        assert [g.key.split("@")[0] for g in groups] == ["w1", "w2"]
        assert all(g.turns >= 1 for g in groups)
    finally:
        assert c.stop() == 0
