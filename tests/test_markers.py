"""Marks say what a test starts (:mod:`tests.marks`); a unit test that starts anything fails.

Runs pytest inside this process (``pytester``) on made-up tests. A model load through a
made-up backend stands for everything a unit test must not start: it is recorded like a
process start or a listening socket, and it starts nothing.
"""

from __future__ import annotations

import pytest

from tests.marks import KINDS, _program, kind_problem

pytest_plugins = ["pytester"]
pytestmark = pytest.mark.unit

CONFTEST = """
from tests.marks import (
    pytest_collection_modifyitems,
    pytest_configure,
    pytest_fixture_setup,
    pytest_runtest_call,
    pytest_runtest_setup,
    pytest_unconfigure,
)
"""
TESTS = """
import socket
import subprocess

import pytest

from models.registry import BACKENDS, ModelCache


@pytest.fixture
def fake_backend(monkeypatch):
    monkeypatch.setitem(BACKENDS, ("asr", "fake"), "collections:OrderedDict")


@pytest.fixture(scope="module")
def loaded():
    BACKENDS[("asr", "fake")] = "collections:OrderedDict"
    try:
        return ModelCache().get("asr", "fake")
    finally:
        del BACKENDS[("asr", "fake")]


@pytest.mark.model
def test_a_model_test_may_load(fake_backend, loaded):
    ModelCache().get("asr", "fake")


@pytest.mark.unit
def test_unit_loads(fake_backend):
    ModelCache().get("asr", "fake")


@pytest.mark.unit
def test_unit_uses_a_fixture_another_test_set_up(loaded):
    pass


@pytest.mark.unit
def test_unit_starts_a_program_and_swallows_the_error():
    try:
        subprocess._fork_exec(["espeak-ng"])  # too few arguments: it fails before a fork
    except TypeError:
        pass


@pytest.mark.unit
def test_unit_listens():
    sock = socket.socket()
    sock.close()
    with pytest.raises(OSError):  # closed: nothing listens
        sock.listen()


@pytest.mark.unit
def test_unit_fails_to_load():
    with pytest.raises(ValueError):
        ModelCache().get("asr", "no-such-backend")


def test_says_nothing():
    pass


@pytest.mark.unit
@pytest.mark.server
def test_unit_and_server():
    pass


@pytest.mark.tool
@pytest.mark.needs("sipp", "no-such-program")
def test_needs_a_missing_program():
    pass
"""


def test_a_unit_test_that_starts_something_fails(pytester):
    pytester.makeini("[pytest]\nmarkers =\n    unit\n    tool\n    model\n    server\n    needs\n")
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_made_up=TESTS)
    result = pytester.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(passed=2, failed=3, errors=4)  # errors: failed at setup
    result.stdout.fnmatch_lines_random([
        "*test_unit_loads: a unit test starts nothing, but this one loads the asr model fake*",
        "*test_unit_uses_a_fixture_another_test_set_up: *(fixture loaded) loads the asr model*",
        "*test_unit_starts_a_program_and_swallows_the_error: *this one runs espeak-ng: mark it*",
        "*test_unit_listens: *this one listens on a socket: mark it*",
        "*test_says_nothing: no mark says what it starts*",
        "*test_unit_and_server: marked unit and server*",
        "*no-such-program not installed: `make setup` installs it (apt-get install no-such-*",
    ])


def test_kinds_are_registered_in_pyproject(pytestconfig):
    registered = {line.split(":")[0] for line in pytestconfig.getini("markers")}
    assert set(KINDS) | {"slow"} <= registered


def test_kind_problem():
    assert kind_problem({"unit"}) is None
    assert kind_problem({"model", "sip", "slow", "parametrize"}) is None
    assert "no mark" in kind_problem({"slow"})
    assert "unit and model" in kind_problem({"unit", "model"})


def test_program_names():
    assert _program(["/usr/bin/espeak-ng", "-w", "x.wav"]) == "runs espeak-ng"
    assert _program([b"/usr/sbin/kamailio"]) == "runs kamailio"
    assert _program("sox in.wav out.wav") == "runs sox"
