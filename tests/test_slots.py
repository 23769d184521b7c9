"""The machine's call slots (:mod:`agent.sip.slots`): real lock files, real processes.

N slots: N takes succeed and the next is refused, within one process as across processes; a
slot given back is taken again; a process killed with SIGKILL holding slots frees them (the
kernel drops its locks); a program started while a slot is held does not inherit it.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from agent.sip.slots import SlotSet, slots_dir, slots_of
from dialplan import ConfigError, parse_config

HOLDER = """
import sys, time
from agent.sip.slots import SlotSet
slots = SlotSet(sys.argv[1], int(sys.argv[2]))
held = [slots.take("child") for _ in range(int(sys.argv[3]))]
print(sum(s is not None for s in held), flush=True)
time.sleep(60)
"""


def holder(directory, size: int, n: int) -> subprocess.Popen:
    """A child process that takes ``n`` slots and keeps them until it is killed."""
    return subprocess.Popen([sys.executable, "-c", HOLDER, str(directory), str(size), str(n)],
                            stdout=subprocess.PIPE, text=True,
                            cwd=os.path.dirname(os.path.dirname(__file__)))


@pytest.mark.unit
def test_n_slots_the_next_refused_and_a_released_one_taken_again(tmp_path):
    slots = SlotSet(tmp_path / "slots", 3)
    held = [slots.take(f"call-{i}") for i in range(3)]
    assert [s.index for s in held] == [0, 1, 2]
    assert slots.take("call-3") is None
    # Another set on the same directory (another process's view) sees them held too.
    assert SlotSet(tmp_path / "slots", 3).take() is None
    assert (tmp_path / "slots" / "slot-1.lock").read_text() == f"{os.getpid()} call-1\n"
    held[1].release()
    held[1].release()  # twice: nothing more
    assert not held[1].held
    assert (tmp_path / "slots" / "slot-1.lock").read_text() == ""
    again = slots.take("call-4")
    assert again is not None and again.index == 1
    assert slots.take() is None
    for s in (held[0], held[2], again):
        s.release()
    assert [s.index for s in (slots.take(), slots.take(), slots.take())] == [0, 1, 2]


@pytest.mark.tool  # a child Python process
def test_a_killed_processs_slots_are_free_at_once(tmp_path):
    directory = tmp_path / "slots"
    child = holder(directory, 3, 2)
    try:
        assert child.stdout.readline().strip() == "2"
        slots = SlotSet(directory, 3)
        mine = slots.take("parent")
        assert mine is not None and mine.index == 2  # the child holds 0 and 1
        assert slots.take() is None
        t0 = time.monotonic()
        child.send_signal(signal.SIGKILL)
        child.wait(10)
        freed = [slots.take("after"), slots.take("after")]
        print(f"slots free {time.monotonic() - t0:.3f} s after the SIGKILL (wait included)")
        assert sorted(s.index for s in freed) == [0, 1]  # no clean-up ran: the kernel's doing
        assert slots.take() is None
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()


INHERIT = """
import os, subprocess, sys, time
from agent.sip.slots import SlotSet
slots = SlotSet(sys.argv[1], 1)
slot = slots.take("parent")
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], close_fds=False)
try:
    slot.release()
    taken = slots.take("next")
    lock = os.path.realpath(os.path.join(sys.argv[1], "slot-0.lock"))
    holders = sorted({pid for pid in os.listdir("/proc") if pid.isdigit()
                      for fd in _fds(pid) if _target(pid, fd) == lock})
    print(taken is not None, child.pid, os.getpid(), holders, flush=True)
finally:
    child.kill()
    child.wait()
"""
INHERIT_HELPERS = """
import os
def _fds(pid):
    try:
        return os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return []
def _target(pid, fd):
    try:
        return os.readlink(f"/proc/{pid}/fd/{fd}")
    except OSError:
        return None
"""


@pytest.mark.tool
def test_a_program_started_while_a_slot_is_held_does_not_inherit_it(tmp_path):
    # In an interpreter of its own: pytest's process has other tests' threads, and one of
    # them starting a program at that moment would hold the slot for the length of its exec.
    res = subprocess.run([sys.executable, "-c", INHERIT_HELPERS + INHERIT, str(tmp_path / "s")],
                         capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr[-2000:]
    taken, child, me, holders = res.stdout.split(maxsplit=3)
    # the child, still running, holds nothing: the lock file is open in the parent alone
    assert taken == "True", (res.stdout, child, me)
    assert f"'{child}'" not in holders, res.stdout


@pytest.mark.unit
def test_where_the_slots_are(tmp_path):
    config = parse_config({"db": {"spool_dir": str(tmp_path / "spool")},
                           "sip": {"max_calls": 2}})
    assert slots_dir(config) == tmp_path / "spool" / "slots"
    assert slots_dir(config, "w2") == tmp_path / "spool" / "slots" / "worker-w2"
    own = parse_config({"sip": {"slots_dir": str(tmp_path / "run"), "max_calls": 2}})
    slots = slots_of(own)
    assert (slots.directory, slots.size) == (tmp_path / "run", 2)
    blocked = tmp_path / "file"
    blocked.write_text("")
    with pytest.raises(ConfigError, match="sip.slots_dir: cannot create"):
        SlotSet(blocked / "slots", 2)
    with pytest.raises(ConfigError, match=r"sip.max_calls = 0: must be at least 1"):
        parse_config({"sip": {"max_calls": 0}})
