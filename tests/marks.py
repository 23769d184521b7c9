"""What a test starts, said by its marks and checked while it runs (issue 44).

The marks (registered in ``pyproject.toml``) say what a test starts, so ``-m unit`` selects
tests that need nothing but Python:

* ``unit``: starts nothing: no subprocess, no listening socket, no real model weights;
* ``tool``: runs a command-line program (espeak-ng, sox, tshark, chromium);
* ``server``: starts a server: PostgreSQL, kamailio, an LLM server, or an in-process HTTP fake
  listening on a loopback port;
* ``sip``: places real SIP calls with sipp or pjsua2;
* ``model``: loads real bundled model weights;
* ``slow``: the default (large) models, or a long run (goes with ``model`` or ``sip``).

Every test carries ``unit`` or at least one of ``tool``, ``server``, ``sip`` and ``model``, and
``unit`` goes with none of those. While the suite runs, process starts (``fork``, ``exec``,
``posix_spawn``, ``system``), ``listen()`` on a socket and model loads through
:class:`~models.registry.ModelCache` are recorded against the test or fixture that made them: a
``unit`` test that made one, or that uses a fixture that made one, fails and names it. The
recording is a wrapper around each of those calls, cheap enough to stay on for every test.

``@pytest.mark.needs("sipp")`` names the programs a test needs; a missing one fails the test
(:mod:`tests.needs`). ``tests/conftest.py`` imports the hooks below, which is how pytest finds
them.
"""

from __future__ import annotations

import _posixsubprocess
import functools
import os
import socket
import subprocess
from collections.abc import Callable
from typing import Any

import pytest

from models.registry import ModelCache
from tests.needs import require

KINDS = ("unit", "tool", "server", "sip", "model")
"""The marks that say what a test starts (``slow`` says how long, not what)."""
OTHERS = "tool (a program), server (PostgreSQL, kamailio, an HTTP server), sip or model (weights)"

_running: list[object] = []
"""What runs now, innermost last: the test item, then each fixture being set up."""
_started: dict[object, list[str]] = {}
"""What each test item or fixture definition started."""
_restore: list[tuple[Any, str, Any]] = []
_installs = [0]
"""Sessions running now: a test of these hooks runs pytest inside pytest (``pytester``)."""


def _record(what: str) -> None:
    if _running:
        _started.setdefault(_running[-1], []).append(what)


def _program(args: Any) -> str:
    """``runs espeak-ng``, from an argv list or a shell command line."""
    if isinstance(args, (str, bytes)):
        args = os.fsdecode(args).split() or [""]
    first = args[0] if args else ""
    name = os.fsdecode(first) if isinstance(first, (str, bytes, os.PathLike)) else repr(first)
    return f"runs {os.path.basename(name)}"


def _wrap(owner: Any, name: str, what: Callable[..., str], after: bool = False) -> None:
    """Record ``what(*args)`` at each call of ``owner.name`` (``after``: once it returned)."""
    original = getattr(owner, name)

    @functools.wraps(original)
    def wrapper(*args, **kwargs):
        if not after:
            _record(what(*args, **kwargs))
        result = original(*args, **kwargs)
        if after:
            _record(what(*args, **kwargs))
        return result

    setattr(owner, name, wrapper)
    _restore.append((owner, name, original))


def install() -> None:
    """Wrap every way a test could start something (once; undone by the last uninstall)."""
    _installs[0] += 1
    if _installs[0] > 1:
        return
    # subprocess (asyncio's too) and multiprocessing start programs through fork_exec;
    # subprocess holds its own reference to it.
    for owner in (_posixsubprocess, subprocess):
        name = "fork_exec" if owner is _posixsubprocess else "_fork_exec"
        _wrap(owner, name, lambda args, *_, **__: _program(args))
    for name in ("fork", "forkpty"):
        _wrap(os, name, lambda *_, name=name: f"calls os.{name}()")
    for name in ("posix_spawn", "posix_spawnp"):
        _wrap(os, name, lambda path, argv, *_, **__: _program(argv or [path]))
    _wrap(os, "system", lambda command: _program(command))
    _wrap(socket.socket, "listen", lambda sock, *_: f"listens on {_address(sock)}")
    _wrap(ModelCache, "get", lambda cache, stage, backend, *_, **__: f"loads the {stage} model "
          f"{backend}", after=True)


def uninstall() -> None:
    _installs[0] -= 1
    while _restore and _installs[0] == 0:
        owner, name, original = _restore.pop()
        setattr(owner, name, original)


def _address(sock: socket.socket) -> str:
    try:
        return str(sock.getsockname())
    except OSError:
        return "a socket"


def kind_problem(marks: set[str]) -> str | None:
    """Why a test with these marks does not say what it starts (None: it does)."""
    kinds = marks & set(KINDS)
    if not kinds:
        return f"no mark says what it starts: mark it unit (nothing) or {OTHERS}"
    if "unit" in kinds and len(kinds) > 1:
        return f"marked unit and {', '.join(sorted(kinds - {'unit'}))}: a unit test starts nothing"
    return None


def unit_violation(started: list[str]) -> str:
    return (f"a unit test starts nothing, but this one {'; '.join(dict.fromkeys(started))}: "
            f"mark it {OTHERS}")


# ---- the hooks (imported by tests/conftest.py) ---------------------------------------------

_PROBLEM = pytest.StashKey[str]()


def pytest_configure(config: pytest.Config) -> None:
    install()


def pytest_unconfigure(config: pytest.Config) -> None:
    uninstall()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        problem = kind_problem({m.name for m in item.iter_markers()})
        if problem is not None:
            item.stash[_PROBLEM] = problem


@pytest.hookimpl(wrapper=True)
def pytest_fixture_setup(fixturedef, request):
    _started.pop(fixturedef, None)  # set up again (a function-scoped fixture): a new value
    _running.append(fixturedef)
    try:
        return (yield)
    finally:
        _running.pop()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item: pytest.Item):
    if _PROBLEM in item.stash:
        pytest.fail(f"{item.nodeid}: {item.stash[_PROBLEM]}", pytrace=False)
    for mark in item.iter_markers("needs"):  # a missing program fails the test (tests.needs)
        require(*mark.args)
    _running.append(item)
    try:
        result = yield
    finally:
        _running.pop()
    if item.get_closest_marker("unit") is not None:
        _fail_if_started(item, _fixture_starts(item) + _started.pop(item, []))
    return result


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item):
    _running.append(item)
    try:
        result = yield
    finally:
        _running.pop()
    started = _started.pop(item, [])  # a unit test's setup was checked; others' goes too
    if item.get_closest_marker("unit") is not None:
        _fail_if_started(item, started)
    return result


def _fixture_starts(item: pytest.Item) -> list[str]:
    """What the fixtures ``item`` uses started, whenever they were set up."""
    defs = getattr(item, "_fixtureinfo", None)
    found = []
    for name in getattr(item, "fixturenames", ()):
        for fixturedef in (defs.name2fixturedefs.get(name, ())[-1:] if defs else ()):
            found += [f"(fixture {name}) {what}" for what in _started.get(fixturedef, ())]
    return found


def _fail_if_started(item: pytest.Item, started: list[str]) -> None:
    if started:
        pytest.fail(f"{item.nodeid}: {unit_violation(started)}", pytrace=False)
