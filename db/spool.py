"""The spool: a JSON-lines file where call-log records wait while the database is unreachable.

Owns the files in ``spool_dir`` and nothing else (no SQLAlchemy). Records are appended to
``current.jsonl``; :meth:`Spool.take` renames it to ``batch-<ns>.jsonl`` so appends made while a
batch is being replayed go to a fresh file. Batches are replayed oldest first and deleted only
once they are in the database, so a crash at any point loses nothing. A crash between the
commit and the delete replays that batch again: calls and turns are upserted, so only its events
can appear twice. Lines that cannot be parsed (a torn write from a
crash) go to ``rejected.jsonl`` for a person to look at. A line spooled by an older agent lacks
the record fields added since; they take the record's defaults (a turn without ``unanswered``
replays as answered), so an upgrade while the database is down loses nothing.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Iterable
from pathlib import Path

from db.records import Record, from_json_dict, to_json_dict

CURRENT = "current.jsonl"
REJECTED = "rejected.jsonl"


class Spool:
    """Append-only record files in one directory; safe to use from several threads."""

    def __init__(self, directory: str | os.PathLike[str]):
        """Open (and create if needed) the spool directory.

        Args:
            directory: Where the spool files live.
        """
        self.dir = Path(directory)
        self._lock = threading.Lock()

    @property
    def current(self) -> Path:
        """The file new records are appended to."""
        return self.dir / CURRENT

    def append(self, records: Iterable[Record]) -> int:
        """Append records, one JSON object per line.

        Args:
            records: Records in the order they must be replayed.

        Returns:
            How many records were written.

        Raises:
            OSError: The spool directory cannot be written (then nothing else can save them).
        """
        lines = [json.dumps(to_json_dict(r), separators=(",", ":")) + "\n" for r in records]
        if not lines:
            return 0
        with self._lock:
            self.dir.mkdir(parents=True, exist_ok=True)
            # One write() per batch: a crash tears at most the last line, which take() rejects.
            with open(self.current, "a", encoding="utf-8") as f:
                f.write("".join(lines))
        return len(lines)

    def batches(self) -> list[Path]:
        """Spooled batch files waiting for replay, oldest first (``current`` last)."""
        if not self.dir.is_dir():
            return []
        names = sorted(p for p in self.dir.glob("batch-*.jsonl"))
        if self.current.exists():
            names.append(self.current)
        return names

    def pending(self) -> bool:
        """Whether any record waits in the spool.

        Safe beside the writer's replay, which removes a batch between its listing and its
        ``stat`` here (CI: ``writer.healthy`` raised FileNotFoundError from a test's thread).
        """
        return any(_size(p) > 0 for p in self.batches())

    def take(self) -> list[Path]:
        """Seal ``current`` into a batch file and list every batch, oldest first.

        Returns:
            Batch files to replay with :meth:`read` and remove with :meth:`done`.
        """
        with self._lock:
            if self.current.exists():
                # Nanoseconds in the name keep batches ordered and names unique.
                self.current.rename(self.dir / f"batch-{time.time_ns():020d}.jsonl")
            return [p for p in self.batches() if p.name != CURRENT]

    def read(self, batch: Path) -> list[Record]:
        """Parse one batch; unparseable lines are moved to ``rejected.jsonl``.

        Args:
            batch: A file returned by :meth:`take`.

        Returns:
            The records in the order they were spooled.
        """
        records: list[Record] = []
        bad: list[str] = []
        with open(batch, encoding="utf-8", errors="replace") as f:
            for line in f:
                if not line.strip():
                    continue
                try:
                    records.append(from_json_dict(json.loads(line)))
                except (ValueError, KeyError, TypeError):
                    bad.append(line if line.endswith("\n") else line + "\n")
        if bad:
            self.reject_lines(bad)
        return records

    def reject(self, record: Record, reason: str) -> None:
        """Keep a record the database refused for a reason other than being unreachable.

        Args:
            record: The refused record.
            reason: The error, stored next to it.
        """
        line = json.dumps({**to_json_dict(record), "error": reason}, separators=(",", ":"))
        self.reject_lines([line + "\n"])

    def reject_lines(self, lines: list[str]) -> None:
        with self._lock:
            self.dir.mkdir(parents=True, exist_ok=True)
            with open(self.dir / REJECTED, "a", encoding="utf-8") as f:
                f.write("".join(lines))

    def done(self, batch: Path) -> None:
        """Remove a batch whose records are now in the database.

        Args:
            batch: A file returned by :meth:`take`.
        """
        batch.unlink(missing_ok=True)


def _size(path: Path) -> int:
    """Bytes in ``path``; 0 once it is gone (replayed and removed meanwhile)."""
    try:
        return path.stat().st_size
    except FileNotFoundError:
        return 0
