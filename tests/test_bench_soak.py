"""``bench soak``: its ``--keep`` folder, and 403 for INVITEs from outside ``sip.allow``.

A ``--keep`` folder with an earlier run's call log is refused: the counts come from the call log
in that folder, so an earlier run's records would be added to this run's (a soak of 500 calls
once reported 995 call records). A short soak (issue 47) answers every INVITE from outside
``sip.allow`` with 403 between its calls: the small models (tiny.en + SmolLM2-135M), 4 calls, 2 at
once, and a seed whose first two calls each bring 3 INVITEs from 127.0.0.2 (both batches at once,
within the source's burst).
"""

from __future__ import annotations

import json
import shutil

import pytest

from agent.cli import main as cli
from bench.soak_callers import plan_calls

SEED = 18
"""Its first calls bring 3 + 3 unauthorised INVITEs (asserted below, before the soak)."""


@pytest.mark.unit
def test_keep_folder_with_a_call_log_is_refused(tmp_path, capsys, monkeypatch):
    # The soak looks for its programs first; it is refused before it would run any of them.
    monkeypatch.setattr(shutil, "which", lambda name, *_, **__: f"/usr/bin/{name}")
    (tmp_path / "calls.db").write_bytes(b"")
    assert cli.main(["bench", "soak", "--calls", "1", "--keep", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "already holds a call log" in err and str(tmp_path) in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["calls.db"]  # nothing started


@pytest.mark.sip
@pytest.mark.model
@pytest.mark.tool
@pytest.mark.needs("sipp", "espeak-ng", "sox")
@pytest.mark.timeout(400)
def test_a_short_soak_answers_every_unauthorised_invite_403(tmp_path, capsys):
    plans = tmp_path / "plans"
    plans.mkdir()
    assert [p.unauthorised for p in plan_calls(4, SEED, plans, 5060)] == [3, 3, 0, 0]
    work = tmp_path / "soak"
    assert cli.main(["bench", "soak", "--calls", "4", "--concurrency", "2", "--seed", str(SEED),
                     "--asr-model", "tiny.en", "--profile-llm", "smollm2-135m", "--no-capture",
                     "--max-minutes", "4", "--keep", str(work), "--format", "json"]) == 0
    out = capsys.readouterr().out
    r = json.loads(out[out.index("{"):])
    log = (work / "serve.log").read_text()
    assert (r["unauthorised_sent"], r["unauthorised_answered_403"]) == (6, 6), r
    assert r["unauthorised_answers"] == {"403": 6} and r["unauthorised_unanswered"] == 0, r
    assert r["unauthorised_logged"] == 6, log[-3000:]
    # None of them reached a session; the callers from 127.0.0.1 were let in.
    assert r["calls_placed"] == r["answered"] == r["call_records"] == 4, r
    assert r["worker_crashes"] == 0 and r["worker_starts"] == 1, log[-3000:]
    assert r["open_records_after_stop"] == 0 and r["calls_without_end_reason"] == 0, r
