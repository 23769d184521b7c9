"""The background call-log writer: the real :class:`db.records.CallLog`.

Owns the queue between the call sessions and the database, the writer thread, and the policy
for when the database is down: records go to the :mod:`db.spool` and are replayed, oldest
first, once the database answers again. ``put()`` never blocks and never raises: a call must
not stall or fail because its log cannot be written.

Writes are idempotent and commutative per call (:mod:`db.rows`), so a spooled record replayed
after newer ones, or replayed twice, ends in the same rows. With ``webhooks``, each record's
webhook events are queued in the transaction that writes it (:mod:`db.outbox`), so they are
spooled and replayed with it and never cost a call's loop anything.
"""

from __future__ import annotations

import atexit
import logging
import queue
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from sqlalchemy import Engine
from sqlalchemy.exc import DBAPIError, InterfaceError, OperationalError
from sqlalchemy.orm import Session

from db.migrate import make_engine, mask_url, upgrade
from db.outbox import enqueue
from db.placement import close_lost_calls_of, this_host
from db.records import Record
from db.rows import apply
from db.spool import Spool
from dialplan.options import DBOptions
from dialplan.webhooks import WebhookOptions

_WAKE = object()  # queued by close() so the thread stops waiting at once; never written


class FaultInjected(OperationalError):
    """Raised by a test's fault hook to act like an unreachable database."""

    def __init__(self, msg: str = "fault injected"):
        super().__init__(msg, None, Exception(msg))


@dataclass
class WriterStats:
    """Counters of what the writer did with the records it was given."""

    written: int = 0
    """Records written straight to the database."""
    spooled: int = 0
    """Records that went to the spool (database down, or queue full)."""
    replayed: int = 0
    """Spooled records later written to the database."""
    rejected: int = 0
    """Records the database refused for a reason other than being down (kept in rejected.jsonl)."""
    dropped: int = 0
    """Records lost because even the spool could not be written."""
    lost_closed: int = 0
    """Calls closed as ``lost`` at start."""


class CallLogWriter:
    """Writes call-log records to the database from a background thread.

    Example:
        writer = CallLogWriter(config.db)
        writer.put(CallStarted(call_id, started_at=datetime.now(UTC), ...))
        writer.put(turn_record)
        writer.close(timeout=5)
    """

    def __init__(
        self,
        options: DBOptions,
        *,
        retry_s: float = 2.0,
        batch_max: int = 200,
        fault: Callable[[], None] | None = None,
        worker: str | None = None,
        host: str | None = None,
        on_event: Callable[..., None] | None = None,
        webhooks: Sequence[WebhookOptions] = (),
    ):
        """Start the writer thread; it migrates the database and replays the spool first.

        Args:
            options: Database URL, spool directory and queue bound.
            retry_s: Seconds between attempts to reach a database that is down.
            batch_max: Most records written in one transaction.
            fault: Fault-injection hook for tests, called before every database transaction;
                raise (e.g. :class:`FaultInjected`) to act as if the database were down.
            worker: The cluster worker id of this process (None outside a cluster): at start
                the writer closes as ``lost`` only calls this worker left open, never those of
                the other processes sharing the database.
            host: This process's host name (default: :func:`db.placement.this_host`).
            on_event: ``on_event(name, call_id="-", level=INFO, **fields)`` reports what the
                writer does (ready, database down, spool replayed); the application passes its
                structured logger (default: one plain line on the ``callagent`` logger).
            webhooks: Receivers whose events are queued in the outbox with each record (none:
                no events queued).
        """
        self.options = options
        self.spool = Spool(options.spool_dir)
        self.stats = WriterStats()
        self.fault = fault
        self.retry_s = retry_s
        self.batch_max = batch_max
        self.worker = worker
        self.host = host or this_host()
        self.webhooks = tuple(webhooks)
        self._event = on_event or _plain_event
        self._queue: queue.Queue[Record] = queue.Queue(maxsize=max(1, options.queue_size))
        self._stop = threading.Event()
        self._closed = False
        self._engine: Engine | None = None
        self._ready = False  # migrated and lost calls closed
        self._failing = False  # the last database attempt failed
        self._next_try = 0.0
        self._thread = threading.Thread(target=self._run, name="calllog-writer", daemon=True)
        self._thread.start()
        # A daemon thread dies silently at exit: flush (or spool) what is queued first.
        atexit.register(self.close)

    # -- caller side ---------------------------------------------------------------------------

    def put(self, record: Record) -> None:
        """Queue a record for writing; never blocks and never raises.

        Args:
            record: A ``CallStarted``, ``CallEnded``, ``TurnRecord`` or ``EventRecord``.
        """
        try:
            if not self._closed:
                self._queue.put_nowait(record)
                return
        except queue.Full:
            pass
        except Exception:  # noqa: BLE001 - put() must not raise into a call
            pass
        # Queue full (writer stuck on a slow database) or writer closed: straight to the spool.
        self._to_spool([record])

    @property
    def healthy(self) -> bool:
        """Whether the database is migrated, answering, and nothing waits in the spool."""
        return self._ready and not self._failing and not self.spool.pending()

    def flush(self, timeout: float = 5.0) -> bool:
        """Wait until every queued record is written or spooled.

        Args:
            timeout: Most seconds to wait.

        Returns:
            True if the queue drained in time.
        """
        deadline = time.monotonic() + timeout
        while self._queue.unfinished_tasks:
            if time.monotonic() >= deadline or not self._thread.is_alive():
                return False
            time.sleep(0.01)
        return True

    def close(self, timeout: float = 5.0) -> bool:
        """Stop accepting records, write what is queued, and stop the thread.

        Records still queued when ``timeout`` runs out (the database hangs) are spooled here, so
        they are replayed by the next writer.

        Args:
            timeout: Most seconds to wait for the writer thread.

        Returns:
            True if everything queued was written or spooled by the writer thread in time.
        """
        atexit.unregister(self.close)
        self._closed = True
        self._stop.set()
        try:
            self._queue.put_nowait(_WAKE)  # type: ignore[arg-type]
        except queue.Full:
            pass  # the thread is busy, not waiting: it sees the stop flag next round
        self._thread.join(timeout)
        if self._thread.is_alive():
            self._to_spool(self._drain(wait=0.0, limit=None))
            return False
        if self._engine is not None:
            self._engine.dispose()
        return True

    def __enter__(self) -> CallLogWriter:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- writer thread ------------------------------------------------------------------------

    def _run(self) -> None:
        while True:
            stopping = self._stop.is_set()
            wait = 0.0 if stopping else min(0.25, self.retry_s)
            batch = self._drain(wait=wait, limit=self.batch_max)
            try:
                if not self._ready or self.spool.pending():
                    # Retry a failing database only every retry_s; a healthy one (spool filled
                    # by put() on a full queue) is drained at once.
                    if not self._failing or time.monotonic() >= self._next_try:
                        self._recover()
                if batch:
                    if self._ready and not self._failing and not self.spool.pending():
                        self._write_or_spool(batch)
                    else:
                        self._to_spool(batch)
            except Exception as e:  # noqa: BLE001 - the thread must survive anything
                self._event("calllog_writer_error", level=logging.ERROR, error=repr(e))
                self._to_spool(batch)
            finally:
                for _ in batch:
                    self._queue.task_done()
            if stopping and self._queue.empty():
                return

    def _drain(self, wait: float, limit: int | None) -> list[Record]:
        batch: list[Record] = []
        try:
            item = self._queue.get(timeout=wait) if wait > 0 else self._queue.get_nowait()
            while True:
                if item is _WAKE:
                    self._queue.task_done()
                else:
                    batch.append(item)
                if limit is not None and len(batch) >= limit:
                    break
                item = self._queue.get_nowait()
        except queue.Empty:
            pass
        return batch

    def _recover(self) -> None:
        """Migrate (once), close lost calls (once), then replay the spool oldest first."""
        self._next_try = time.monotonic() + self.retry_s
        try:
            if self._engine is None:
                self._engine = make_engine(self.options.url)
            if not self._ready:
                self._check_fault()
                upgrade(self._engine)
                self.stats.lost_closed += close_lost_calls_of(self._engine, self.worker,
                                                              self.host)
                self._ready = True
                self._event("calllog_ready", url=mask_url(self._engine),
                      lost_calls=self.stats.lost_closed)
            for batch in self.spool.take():
                records = self.spool.read(batch)
                self._write_checked(records)
                # Counted before the file goes: ``healthy`` (no spool left) implies the count.
                self.stats.replayed += len(records)
                self.spool.done(batch)
                self._event("calllog_spool_replayed", records=len(records), file=batch.name)
        except Exception as e:  # noqa: BLE001 - any failure means: try again later
            if not self._failing:
                self._event("calllog_unavailable", level=logging.WARNING, error=_short(e),
                      retry_s=self.retry_s)
            self._failing = True
            return
        if self._failing:
            self._event("calllog_recovered")
        self._failing = False

    def _write_or_spool(self, batch: list[Record]) -> None:
        try:
            self._write_checked(batch)
            self.stats.written += len(batch)
        except Exception as e:  # noqa: BLE001
            self._to_spool(batch)
            self._failing = True
            self._next_try = time.monotonic() + self.retry_s
            self._event("calllog_unavailable", level=logging.WARNING, error=_short(e),
                  retry_s=self.retry_s)

    def _write_checked(self, records: list[Record]) -> None:
        """Write records in one transaction; on a data error, one by one, rejecting the bad.

        Raises:
            Exception: The database is unreachable; nothing of this batch was committed.
        """
        try:
            self._write(records)
        except Exception as e:
            if _unavailable(e):
                raise
            # A bad record must not hold the whole spool hostage: isolate it.
            for record in records:
                try:
                    self._write([record])
                except Exception as one:
                    if _unavailable(one):
                        raise
                    self.spool.reject(record, _short(one))
                    self.stats.rejected += 1
                    self._event("calllog_record_rejected", getattr(record, "call_id", "-"),
                          level=logging.ERROR, record=type(record).__name__, error=_short(one))

    def _write(self, records: list[Record]) -> None:
        self._check_fault()
        assert self._engine is not None
        with Session(self._engine, autoflush=True) as s, s.begin():
            for record in records:
                apply(s, record)
                if self.webhooks:
                    enqueue(s, record, self.webhooks)

    def _check_fault(self) -> None:
        if self.fault is not None:
            self.fault()

    def _to_spool(self, records: list[Record]) -> None:
        if not records:
            return
        try:
            self.stats.spooled += self.spool.append(records)
        except Exception as e:  # noqa: BLE001 - last resort: say so loudly
            self.stats.dropped += len(records)
            self._event("calllog_records_dropped", level=logging.ERROR, records=len(records),
                  error=_short(e))


def _unavailable(e: BaseException) -> bool:
    """Whether an error means "database unreachable/busy" (retry later) rather than bad data."""
    if isinstance(e, (OperationalError, InterfaceError, OSError)):
        return True
    return isinstance(e, DBAPIError) and bool(e.connection_invalidated)


def _short(e: BaseException) -> str:
    return (str(e).splitlines() or [repr(e)])[0][:300]


def _plain_event(name: str, call_id: str = "-", level: int = logging.INFO, **fields) -> None:
    """The writer's reports when no structured logger was handed in: one plain line."""
    detail = " ".join(f"{k}={v}" for k, v in fields.items())
    logging.getLogger("callagent").log(level, "event=%s call=%s %s", name, call_id, detail)
