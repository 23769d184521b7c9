"""Call slots: ``sip.max_calls`` shared by every process of this machine that uses one config.

``serve`` (its worker), ``campaign`` and ``dial`` each run a SIP stack of their own, in
processes of their own; the cap the operator set for the machine's models is one number for
all of them. A slot is a lock file ``slot-<i>.lock`` (``i`` below ``sip.max_calls``) in
``sip.slots_dir``, held for one call's life with ``flock(LOCK_EX | LOCK_NB)`` on a descriptor
of its own. The kernel drops the lock when the descriptor is closed, and so when its process
dies however it dies (SIGKILL, a segfault in pjsip): a dead process never keeps a slot, and no
stale-lock clean-up exists to get wrong.

Why ``flock`` and not ``fcntl``/``lockf`` record locks (what ``fasteners`` uses): a process
holds one record lock per file, so two calls of one process would both "take" the same slot;
an ``flock`` belongs to the open file description, so two opens of one file exclude each other
inside one process as across processes. ``filelock`` (flock too) is one re-entrant lock per
path, not a set to take any free one of. Descriptors are opened close-on-exec (Python's
default), so a program a worker starts (an MCP server, kamailio) never inherits a slot.

The file's text (``pid holder``) is only for an operator looking at who holds what; the lock is
the truth (a dead holder's text stays until the slot is taken again).

Imports no pjsua2.
"""

from __future__ import annotations

import fcntl
import os
import threading
from pathlib import Path

from dialplan import Config, ConfigError


class NoFreeSlot(RuntimeError):
    """Every call slot of this machine is held: the call is not placed."""


class Slot:
    """One held call slot; :meth:`release` gives it back (once; again does nothing)."""

    def __init__(self, index: int, fd: int):
        self.index = index
        self._fd: int | None = fd
        self._lock = threading.Lock()

    @property
    def held(self) -> bool:
        return self._fd is not None

    def release(self) -> None:
        """Give the slot back: the next :meth:`SlotSet.take` of any process may have it."""
        with self._lock:
            fd, self._fd = self._fd, None
        if fd is None:
            return
        try:
            os.ftruncate(fd, 0)  # the holder's note goes with the hold
        except OSError:
            pass
        os.close(fd)  # closing drops the flock


class SlotSet:
    """``size`` call slots in ``directory``, shared with every process that opens the same one.

    Args:
        directory: where the lock files are (created if missing).
        size: how many calls at once (``sip.max_calls``).

    Raises:
        ConfigError: the directory cannot be created or written (names ``sip.slots_dir``).
    """

    def __init__(self, directory: Path, size: int):
        self.directory = Path(directory)
        self.size = size
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise ConfigError(f"sip.slots_dir: cannot create {self.directory}: {e}") from None
        if not os.access(self.directory, os.W_OK | os.X_OK):
            raise ConfigError(f"sip.slots_dir: {self.directory} is not writable")

    def take(self, holder: str = "") -> Slot | None:
        """A free slot, held until released or this process ends; None if all are held.

        Never blocks: a caller that must wait polls (a campaign), one that must not refuses
        (486 for an incoming call, an error for ``dial``).
        """
        for i in range(self.size):
            path = self.directory / f"slot-{i}.lock"
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o666)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                continue
            except BaseException:
                os.close(fd)
                raise
            try:
                os.ftruncate(fd, 0)
                os.write(fd, f"{os.getpid()} {holder}\n".encode(errors="replace"))
            except OSError:
                pass  # the note is for people; the lock is held either way
            return Slot(i, fd)
        return None

    def describe(self) -> str:
        """``sip.max_calls = N (slots in DIR)``, for messages about a full set."""
        return f"sip.max_calls = {self.size} (slots in {self.directory})"


def slots_dir(config: Config, worker: str | None = None) -> Path:
    """The config's slot directory: ``sip.slots_dir``, or ``slots`` in ``db.spool_dir``.

    A cluster's worker (``worker`` set) gets a set of its own under it: kamailio spreads the
    calls over workers that each load their own models, each with ``sip.max_calls`` of its own.
    """
    base = Path(config.sip.slots_dir or Path(config.db.spool_dir) / "slots")
    return base / f"worker-{worker}" if worker else base


def slots_of(config: Config, worker: str | None = None) -> SlotSet:
    """The machine's call slots for ``config`` (see :func:`slots_dir`)."""
    return SlotSet(slots_dir(config, worker), config.sip.max_calls)
