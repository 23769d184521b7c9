"""A call is one loop: one thread per call, model work only in the scheduler's workers.

Exactly one thread per call runs agent code, and neither the call core nor the models (the
scheduler, its pool, the LLM engines) poll or sleep: a cancel is notified, as a grant is.

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

import pytest
from fakes import FourCalls

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[1]
CORE = ("agent/call", "agent/turn")
OWN_THREADS = {"agent/call/session.py": "the call's loop",
               "agent/call/timers.py": "the process's one timer thread",
               "agent/turn/mcp_tool.py": "the process's one MCP client loop (asyncio)"}
NO_POLLING = ("agent/call/**/*.py", "agent/turn/**/*.py", "models/**/*.py")
"""Where no wait polls (the scheduler, the pool and every LLM engine among the models)."""
TIMED_WAITS = {
    "agent/call/inputs.py::CallInputs.wait_frames":
        "a driver's (simulate's, a test's) bound on a wait_for the loop notifies per frame",
    "agent/call/jobs.py::CallJobs.wait":
        "the ended call's jobs, up to the drain's deadline; each completion wakes it",
    "agent/call/jobs.py::CallJobs.drain":
        "the time left of the ended call's one drain deadline, not a period",
    "agent/call/legs.py::LegInputs.join":
        "the reaper's own timeout (0: look now), as a session's join; no loop",
    "agent/call/timers.py::Timers._run":
        "the timer thread sleeps until its earliest timer, notified when one is added",
    "agent/turn/mcp_tool.py::McpHub.tools":
        "a server's first tool list, once, up to its connect_timeout_s",
    "agent/turn/mcp_tool.py::McpHub.call":
        "a tool's answer, up to its timeout_s",
    "agent/turn/mcp_tool.py::McpHub.close":
        "the process's end: each session's close, bounded",
    "agent/turn/mcp_tool.py::_Session.run":
        "a down MCP server's retry backoff, on the client's loop: no call's state polled",
    "agent/turn/mcp_tool.py::_Session.close":
        "a session's task, up to 8 s, then cancelled",
    "agent/turn/mcp_tool.py::_Session.call":
        "the time left of a tool call's deadline for its session to be up",
    "models/asr/voxtral_batcher.py::MicroBatcher._take_batch":
        "the time left of a batch's window; each request that joins notifies it",
    "models/scheduler.py::Scheduler._regrant":
        "the timer thread's next re-grant: a hand-off's end (HANDOFF_S), or RECHECK_S, a "
        "re-read of priorities that rise with time (a reply's audio runs low) while a narrow "
        "job runs alone: the one poll left, until a priority says when it changes",
}
"""Timed waits by ``path::function``, each with why it is a deadline and not a poll."""
PER_TURN_THREADS = re.compile(r"^(turn-|prefill-|prime-|llm-stream|.*-eot$)")


def test_four_calls_run_one_thread_each_and_models_only_in_the_scheduler():
    rig = FourCalls("The library opens at ten, and closes at six.")
    stages = rig.stages
    stages.tts.threads.clear()
    base = {t.name for t in threading.enumerate()}
    seen, stop = [], threading.Event()

    def watch():
        while not stop.is_set():
            seen.append([t.name for t in threading.enumerate() if t.name not in base])
            time.sleep(0.05)

    watcher = threading.Thread(target=watch, name="watcher")
    watcher.start()
    results = rig.run()
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


def _in_functions(tree: ast.AST, scope: str = ""):
    """Every call of ``tree`` with the qualified name of the function it is in."""
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            yield from _in_functions(node, f"{scope}.{node.name}".lstrip("."))
            continue
        if isinstance(node, ast.Call):
            yield scope, node
        yield from _in_functions(node, scope)


def _timeout(call: ast.Call) -> ast.expr | None:
    """The timeout ``call`` waits with, if it is a wait given one (see TIMED_WAITS)."""
    func = call.func
    name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
    if name == "sleep":
        return call.args[0] if call.args else ast.Constant(0)
    if name not in ("wait", "wait_for", "result", "get"):
        return None
    given = [k.value for k in call.keywords if k.arg == "timeout"]
    if name == "wait_for" or (name == "wait" and _module_wait(func)):
        given += call.args[1:2]  # wait_for(pred, t), futures.wait(fs, t)
    elif name in ("wait", "result"):
        given += call.args[:1]  # event.wait(t), future.result(t)
    elif call.args and isinstance(call.args[0], ast.Constant) and call.args[0].value is True:
        given += call.args[1:2]  # queue.get(True, t); dict.get(key, default) is no wait
    timed = [t for t in given if not (isinstance(t, ast.Constant) and t.value is None)]
    return timed[0] if timed else None


def _module_wait(func: ast.expr) -> bool:
    """``concurrent.futures.wait``, ``asyncio.wait``, a bare ``wait``: what comes first waits."""
    if isinstance(func, ast.Name):
        return True
    owner = func.value
    return (isinstance(owner, ast.Name) and owner.id in ("asyncio", "futures")) or (
        isinstance(owner, ast.Attribute) and owner.attr == "futures")


@pytest.mark.parametrize("package", CORE)
def test_the_call_core_starts_no_thread_of_its_own(package):
    """Only the modules of OWN_THREADS start a thread; the rest hand work to the scheduler."""
    bad = []
    for path in sorted((ROOT / package).rglob("*.py")):
        for call in _calls(ast.parse(path.read_text(encoding="utf-8"))):
            if call.func.attr == "Thread" and path.relative_to(ROOT).as_posix() not in OWN_THREADS:
                bad.append(f"{path.relative_to(ROOT)}:{call.lineno} a thread of its own")
    assert not bad, bad


def _scanned() -> list[Path]:
    return sorted(p for where in NO_POLLING for p in sorted(ROOT.glob(where)))


def test_the_scan_covers_the_call_core_and_the_models():
    scanned = {p.relative_to(ROOT).as_posix() for p in _scanned()}
    for must in ("agent/call/session.py", "agent/turn/reply.py", "models/scheduler.py",
                 "models/workpool.py", "models/llm/llama_batch/engine.py",
                 "models/llm/llama_batch/generation.py", "models/llm/xllamacpp.py"):
        assert must in scanned, must


def test_the_call_core_and_the_models_neither_poll_nor_sleep():
    """A timed wait (one given a timeout that is not None) is a deadline, never a poll.

    The rule: any ``wait``, ``wait_for``, ``result`` or ``get`` given a timeout (``timeout=``,
    or the argument that is one) other than the literal None, and any ``sleep``, may appear
    only in a function TIMED_WAITS names, with why it is one deadline and not a loop that
    wakes to look at state again. A cancel is notified (:class:`models.priority.Cancel`
    wakes what waits for it), a grant or a token by the condition it waits on.
    """
    bad, allowed = [], set()
    for path in _scanned():
        rel = path.relative_to(ROOT).as_posix()
        for scope, call in _in_functions(ast.parse(path.read_text(encoding="utf-8"))):
            timeout = _timeout(call)
            if timeout is None:
                continue
            where = f"{rel}::{scope}"
            if where in TIMED_WAITS:
                allowed.add(where)
            else:
                bad.append(f"{rel}:{call.lineno} ({scope}) {ast.unparse(call)}")
    assert not bad, bad
    assert allowed == set(TIMED_WAITS), set(TIMED_WAITS) - allowed  # no stale entry


def test_the_polling_rule_sees_every_form_of_a_timed_wait():
    timed = ["e.wait(0.05)", "c.wait(None if c is None else POLL_S)", "e.wait(POLL_S)",
             "q.get(timeout=0.1)", "q.get(True, 0.1)", "time.sleep(0.01)", "sleep(1)",
             "asyncio.sleep(d)", "f.result(1)", "concurrent.futures.wait(fs, 1)",
             "asyncio.wait({t}, timeout=8)", "c.wait_for(p, 1)", "e.wait(t or 0)"]
    untimed = ["e.wait()", "e.wait(None)", "c.wait_for(p)", "d.get(k, 0)", "d.get(k)",
               "f.result()", "q.get()", "q.get(timeout=None)", "asyncio.wait({t})",
               "concurrent.futures.wait(fs)", "', '.join(xs)"]
    assert [c for c in timed if _timeout(ast.parse(c).body[0].value) is None] == []
    assert [c for c in untimed if _timeout(ast.parse(c).body[0].value) is not None] == []
