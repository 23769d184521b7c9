"""Webhook delivery: the outbox's events POSTed to their receivers, signed, retried for hours.

What a receiver gets: a POST of the JSON event (:mod:`db.outbox`: ``id``, ``type``, ``time``,
``call_id``, ``data``) with these headers::

    Content-Type: application/json
    X-Callagent-Event-Id: <the event's id: the same on every retry, so a receiver dedupes>
    X-Callagent-Timestamp: <unix seconds when this try was sent>
    X-Callagent-Signature: sha256=<hex HMAC-SHA256(secret, "<timestamp>.<body>")>

The signature covers the timestamp, so a receiver that recomputes it over the raw body bytes
(compared in constant time) and refuses a timestamp more than a few minutes old refuses
replays too; :func:`verify` is that check. A 2xx answer delivers the event. A timeout, no
connection, a 5xx, 408 or 429 is retried after :func:`backoff_s` (``backoff_s`` doubling up to
``backoff_max_s``) until the event is ``max_age_s`` old, then given up (``failed``); any other
answer (a 4xx: the receiver refuses it, e.g. a bad signature) fails it at once.

Where it runs: in the process that supervises the agent (``serve``'s supervisor, ``cluster``),
started only when ``[[webhooks]]`` has entries, never in the process that runs calls: a
receiver that is down, slow or failing costs a call nothing, and the call-log writer queues
each event with its record (:mod:`db.outbox`), so none is lost while this waits. One thread
per receiver, so a slow one never holds up another's events; it sends its events oldest first
and, after a retryable failure, waits out the backoff before trying anything else. It reads
the outbox every ``poll_s`` (the writer runs in another process). Delivery is at least once: a
try whose outcome could not be recorded (the process died, the database went away) is made
again once its lease ends. Imports db and dialplan, and :mod:`agent.log` only.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from urllib.parse import urlsplit

import httpx
from sqlalchemy.exc import SQLAlchemyError

from agent import log
from db.migrate import make_engine
from db.outbox import Due, claim, due, settle
from dialplan.webhooks import WebhookOptions

SIGNATURE = "X-Callagent-Signature"
TIMESTAMP = "X-Callagent-Timestamp"
EVENT_ID = "X-Callagent-Event-Id"
RETRYABLE = frozenset({408, 425, 429})
"""4xx answers worth another try (time-outs and rate limits); other 4xx fail the event."""
BATCH = 50
"""Rows read per round."""
LEASE_S = 60.0
"""A try holds its row this long past its timeout: a worker that died mid-try frees it then."""


def signature(secret: str, timestamp: int, body: bytes) -> str:
    """``sha256=<hex>``: the HMAC-SHA256 of ``"<timestamp>.<body>"`` keyed with ``secret``."""
    mac = hmac.new(secret.encode(), f"{timestamp}.".encode() + body, hashlib.sha256)
    return "sha256=" + mac.hexdigest()


def signed_headers(secret: str, event_id: str, body: bytes, timestamp: int) -> dict[str, str]:
    """The headers of one try (:data:`SIGNATURE`, :data:`TIMESTAMP`, :data:`EVENT_ID`)."""
    return {"Content-Type": "application/json", EVENT_ID: event_id, TIMESTAMP: str(timestamp),
            SIGNATURE: signature(secret, timestamp, body)}


def verify(secret: str, body: bytes, headers: Mapping[str, str], tolerance_s: float = 300.0,
           now: float | None = None) -> bool:
    """A receiver's check: the signature matches and the timestamp is recent.

    Args:
        secret: The webhook's secret.
        body: The request body, the raw bytes as received.
        headers: The request headers (any mapping; names are matched case-insensitively).
        tolerance_s: Oldest (or furthest ahead) timestamp accepted, seconds: older is a replay.
        now: Unix time to check against (default: now).

    Returns:
        True if the request was signed with ``secret`` within ``tolerance_s``.
    """
    lower = {k.lower(): v for k, v in headers.items()}
    try:
        stamp = int(lower.get(TIMESTAMP.lower(), ""))
    except ValueError:
        return False
    if abs((time.time() if now is None else now) - stamp) > tolerance_s:
        return False
    return hmac.compare_digest(lower.get(SIGNATURE.lower(), ""), signature(secret, stamp, body))


def backoff_s(attempts: int, base_s: float, max_s: float) -> float:
    """Wait after the ``attempts``-th failed try: ``base_s``, doubling each time, to ``max_s``."""
    return min(max_s, base_s * 2.0 ** max(0, attempts - 1))


def verdict(http_status: int | None) -> str:
    """``delivered`` (2xx), ``retry`` (no answer, 3xx, 5xx, 408/425/429) or ``refused``."""
    if http_status is not None and 200 <= http_status < 300:
        return "delivered"
    if http_status is not None and 400 <= http_status < 500 and http_status not in RETRYABLE:
        return "refused"
    return "retry"


def safe_url(url: str) -> str:
    """A URL fit for a log line: no user info and no query (either may hold a token)."""
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.hostname or ''}{f':{parts.port}' if parts.port else ''}" \
           f"{parts.path}"


class WebhookDelivery:
    """Delivers the outbox's events, one thread per receiver, until :meth:`close`.

    Example:
        delivery = WebhookDelivery(config.webhooks, webhook_secrets(config.webhooks),
                                   config.db.url)
        delivery.start()
        ...
        delivery.close()
    """

    def __init__(self, hooks: Sequence[WebhookOptions], secrets: Mapping[str, str], db_url: str,
                 *, poll_s: float = 1.0, on_event: Callable[..., None] = log.event,
                 transport: httpx.BaseTransport | None = None):
        """Set up (start nothing yet).

        Args:
            hooks: The receivers.
            secrets: Each receiver's secret by URL (:func:`dialplan.config.webhook_secrets`).
            db_url: The call log holding the outbox.
            poll_s: How often the outbox is read for new events.
            on_event: The structured logger.
            transport: httpx transport (tests); default: a real connection per receiver.
        """
        self.hooks = tuple(hooks)
        self.secrets = dict(secrets)
        self.db_url = db_url
        self.poll_s = poll_s
        self.stats = {"delivered": 0, "retried": 0, "failed": 0}
        self._event = on_event
        self._transport = transport
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        # After a retryable failure: when its receiver is tried next (unix time), per URL.
        self._blocked = dict.fromkeys((h.url for h in self.hooks), 0.0)

    def start(self) -> WebhookDelivery:
        """Start one delivery thread per receiver."""
        for i, hook in enumerate(self.hooks):
            t = threading.Thread(target=self._run, args=(hook,), name=f"webhook-{i}",
                                 daemon=True)
            t.start()
            self._threads.append(t)
        self._event("webhooks-started", urls=",".join(safe_url(h.url) for h in self.hooks))
        return self

    def close(self, timeout: float = 5.0) -> None:
        """Stop the threads; a try in flight ends within its ``timeout_s``, or is made again."""
        self._stop.set()
        for t in self._threads:
            t.join(timeout)

    def _run(self, hook: WebhookOptions) -> None:
        engine = make_engine(self.db_url)
        client = httpx.Client(timeout=hook.timeout_s, transport=self._transport,
                              headers={"User-Agent": "callagent-webhooks"})
        reached: bool | None = None  # the outbox answered at the last read (None: not read yet)
        try:
            while not self._stop.is_set():
                wait = self.poll_s
                try:
                    ready = time.time() >= self._blocked[hook.url]
                    if ready and self._round(engine, client, hook):
                        wait = 0.0  # a full batch went: more may be due already
                    if reached is False:
                        self._event("webhook-outbox-back", url=safe_url(hook.url))
                    reached = True
                except SQLAlchemyError as e:
                    # The database is down (or not migrated yet at first start): the writer
                    # spools, and the events reach the outbox with their records.
                    if reached is not False:
                        self._event("webhook-outbox-unavailable", url=safe_url(hook.url),
                                    error=(str(e).splitlines() or [repr(e)])[0][:200],
                                    level=logging.WARNING if reached else logging.INFO)
                    reached = False
                except Exception as e:  # noqa: BLE001 - the thread must outlive a bad row
                    self._event("webhook-error", url=safe_url(hook.url), error=repr(e)[:200],
                                level=logging.ERROR)
                backoff_left = self._blocked[hook.url] - time.time()
                self._stop.wait(min(wait, backoff_left) if backoff_left > 0 else wait)
        finally:
            client.close()
            engine.dispose()

    def _round(self, engine, client: httpx.Client, hook: WebhookOptions) -> bool:
        """Try the receiver's due rows in order, up to a retryable failure; True: a full batch."""
        rows = due(engine, hook.url, _now(), BATCH)
        for row in rows:
            if self._stop.is_set():
                return False
            next_try = self._try(engine, client, hook, row)
            if next_try is not None:
                self._blocked[hook.url] = next_try
                return False
        return len(rows) >= BATCH

    def _try(self, engine, client: httpx.Client, hook: WebhookOptions, row: Due) -> float | None:
        """One try of one row; returns when the receiver may be tried again after a failure."""
        now = _now()
        if not claim(engine, row, now + timedelta(seconds=hook.timeout_s + LEASE_S)):
            return None  # another delivery worker on this database took it
        body = row.body.encode()
        stamp = int(time.time())
        http_status, error = None, ""
        try:
            answer = client.post(hook.url, content=body,
                                 headers=signed_headers(self.secrets[hook.url], row.event_id,
                                                        body, stamp))
            http_status = answer.status_code
            error = "" if 200 <= http_status < 300 else f"http-{http_status}"
        except httpx.TimeoutException:
            error = "timeout"
        except httpx.HTTPError as e:
            error = f"{type(e).__name__}: {e}"[:200]
        done = _now()
        outcome = verdict(http_status)
        fields = {"url": safe_url(hook.url), "event_id": row.event_id,
                  "attempt": row.attempts + 1, "status": http_status or error}
        if outcome == "retry" and (done - row.created_at).total_seconds() < hook.max_age_s:
            delay = backoff_s(row.attempts + 1, hook.backoff_s, hook.backoff_max_s)
            settle(engine, row, "pending", http_status, error, done,
                   next_at=done + timedelta(seconds=delay))
            self.stats["retried"] += 1
            self._event("webhook-retry", retry_in_s=round(delay, 2), **fields)
            return time.time() + delay
        status = "delivered" if outcome == "delivered" else "failed"
        settle(engine, row, status, http_status, error, done)
        self.stats[status] += 1
        # Delivered is the usual case: at DEBUG, or each turn would log twice.
        self._event(f"webhook-{status}", level=logging.DEBUG if status == "delivered"
                    else logging.WARNING, **fields)
        return None


def start_delivery(hooks: Sequence[WebhookOptions], secrets: Mapping[str, str],
                   db_url: str) -> WebhookDelivery | None:
    """A started :class:`WebhookDelivery`, or None when no webhook is configured."""
    return WebhookDelivery(hooks, secrets, db_url).start() if hooks else None


def _now() -> datetime:
    return datetime.now(UTC)
