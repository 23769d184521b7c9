"""A call is one loop: one thread per call, model work only in the scheduler's workers.

Exactly one thread per call runs agent code, and the call core neither polls nor sleeps.

Four simulated calls at once on fake stages (real sessions, real scheduler, real lines paced
in real time): the threads are counted while they talk, and each fake records the threads its
work ran on.
"""

from __future__ import annotations

import ast
import re
import threading
import time
from pathlib import Path

import numpy as np
import pytest
from fakes import FakeASR, FakeEOT, FakeLLM, FakeTTS, fake_stages, silence, tone

from agent.simulate import simulate
from agent.turn.load import LoadPolicy
from agent.turn.runner import TurnRunner
from dialplan import parse_config

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[1]
CORE = ("agent/call", "agent/turn")
OWN_THREADS = {"agent/call/session.py": "the call's loop",
               "agent/call/timers.py": "the process's one timer thread",
               "agent/turn/mcp_tool.py": "the process's one MCP client loop (asyncio)"}
TIMED_WAITS = {"agent/turn/mcp_tool.py": "a down MCP server's retry backoff, on that loop: "
                                         "a timer of the client, no call's state polled"}
PER_TURN_THREADS = re.compile(r"^(turn-|prefill-|prime-|llm-stream|.*-eot$)")


def _profile():
    return parse_config({
        "profiles": {"p": {"greeting": "", "audio": {
            "endpoint_silence_s": 0.3, "speculate_s": 0.15, "min_speech_s": 0.1,
            "prefill_every_s": 0.5}}},
        "dialplan": {"1": "p"}}).profiles["p"]


def test_four_calls_run_one_thread_each_and_models_only_in_the_scheduler():
    profile = _profile()
    stages = fake_stages(asr=FakeASR(["what time do you open?"], delay_s=0.05),
                         llm=FakeLLM("The library opens at ten, and closes at six.",
                                     token_s=0.02),
                         tts=FakeTTS(s_per_char=0.02, delay_s=0.02), eot=FakeEOT([0.2]))
    caller = np.concatenate([tone(0.8), silence(0.9), tone(0.6), silence(1.0)]).astype(
        np.float32) / 32768
    phrase = TurnRunner(stages, profile).prepare_phrases()  # before the calls, as serve does
    load = LoadPolicy(stages.llm.scheduler)  # the process's, shared by its calls
    stages.tts.threads.clear()
    base = {t.name for t in threading.enumerate()}
    results, seen, stop = [], [], threading.Event()

    def watch():
        while not stop.is_set():
            seen.append([t.name for t in threading.enumerate() if t.name not in base])
            time.sleep(0.05)

    def call():
        results.append(simulate(caller, 8000, profile, stages, greeting=False, phrase=phrase,
                                load=load))

    calls = [threading.Thread(target=call, name=f"caller-{i}") for i in range(4)]
    watcher = threading.Thread(target=watch, name="watcher")
    watcher.start()
    for c in calls:
        c.start()
    for c in calls:
        c.join(60)
    stop.set()
    watcher.join()

    assert len(results) == 4 and all(len(r.turns) >= 1 for r in results)
    assert all(t.reply_text for r in results for t in r.turns)
    busiest = max(seen, key=lambda names: sum(n.startswith("call-") for n in names))
    assert sum(n.startswith("call-") for n in busiest) == 4, busiest
    every = {n for names in seen for n in names}
    assert not {n for n in every if PER_TURN_THREADS.match(n)}, every
    # Beside the callers' own threads (the test's, and each simulated line's clock), only
    # the calls' loops and the scheduler's fixed pool (and the timer thread) ever ran.
    others = {re.sub(r"-\w+$", "", n) for n in every} - {"caller", "line", "watcher"}
    assert others <= {"call", "model", "scheduler", "timers"}, every
    workers = stages.llm.scheduler.workers
    assert max(sum(n.startswith("model-") for n in names) for names in seen) <= workers
    for fake in (stages.asr, stages.llm, stages.tts, stages.eot):
        assert fake.threads and all(n.startswith("model-") for n in fake.threads), (
            type(fake).__name__, fake.threads)


def _calls(tree: ast.AST):
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            yield node


@pytest.mark.parametrize("package", CORE)
def test_the_call_core_neither_polls_nor_sleeps(package):
    """No ``Event.wait(0.01)``-style polling, no ``Queue.get(timeout=...)``, no sleeps."""
    bad = []
    for path in sorted((ROOT / package).rglob("*.py")):
        for call in _calls(ast.parse(path.read_text(encoding="utf-8"))):
            name = call.func.attr
            where = f"{path.relative_to(ROOT)}:{call.lineno}"
            if name == "wait" and call.args and isinstance(call.args[0], ast.Constant):
                bad.append(f"{where} .wait({call.args[0].value})")
            if name == "get" and any(k.arg == "timeout" for k in call.keywords):
                bad.append(f"{where} .get(timeout=...)")
            if name == "sleep" and path.relative_to(ROOT).as_posix() not in TIMED_WAITS:
                bad.append(f"{where} sleep")
            if name == "Thread" and path.relative_to(ROOT).as_posix() not in OWN_THREADS:
                bad.append(f"{where} a thread of its own")
    assert not bad, bad
