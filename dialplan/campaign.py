"""Call campaigns' options and lists: the ``[campaigns]`` table and the CSV of numbers to call.

:class:`CampaignOptions` is ``[campaigns]`` (validated like every other table, errors naming the
key); :func:`read_rows` reads a campaign's CSV into :class:`CampaignRow` values, each with its
SIP URI, its time zone and its variables, and :func:`fill` puts a row's variables into a
profile's text (``{name}``). Everything here is checked before the first call is placed: a bad
row fails the whole campaign at start, naming the row and the column.
Pure: reads the CSV file and nothing else; imports nothing from :mod:`agent`, :mod:`models`
or :mod:`db`.
"""

from __future__ import annotations

import csv
import re
from dataclasses import dataclass, field
from datetime import time
from pathlib import Path
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

NUMBER_COLUMN = "number"
TZ_COLUMN = "tz"
_PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")
_PHONE = re.compile(r"^\+?[0-9][0-9 ().-]*$")
_WINDOW = re.compile(r"^(\d{1,2}):(\d{2})-(\d{1,2}):(\d{2})$")


class CampaignError(ValueError):
    """A campaign's CSV or options are wrong; the message names the row and column or key."""


@dataclass(frozen=True)
class CampaignOptions:
    """``[campaigns]``: how a campaign paces its calls (each is also a ``campaign`` flag)."""

    concurrency: int = 1
    """Calls in progress at once (at most ``sip.max_calls``, and the call log's open calls
    count against that cap: see ``agent.campaign.runner``)."""
    calls_per_minute: float = 0.0
    """New calls started in any 60 s, at most (0 = no limit)."""
    window: str = ""
    """When calls may start, ``"HH:MM-HH:MM"`` in the callee's time zone (``"09:00-18:00"``;
    ``"22:00-06:00"`` spans midnight). Empty = any time. A call in progress at the window's end
    goes on."""
    timezone: str = "UTC"
    """The callee's time zone when the CSV has no ``tz`` column or leaves it empty (an IANA
    name, ``"Europe/Berlin"``)."""
    retries: int = 0
    """More attempts after a ``no-answer`` or ``busy`` outcome (2 = up to 3 calls in all)."""
    retry_delay_s: float = 600.0
    """Seconds from the end of one attempt to the next of the same row."""
    ring_timeout_s: float = 30.0
    """A call not answered this long after dialling is cancelled: outcome ``no-answer``."""
    domain: str = ""
    """Where a bare number goes: ``+1 555 0100`` becomes ``sip:+15550100@DOMAIN``. Empty: every
    row's number must be a SIP URI."""

    def __post_init__(self) -> None:
        if self.concurrency < 1:
            raise ValueError(f"concurrency = {self.concurrency}: must be 1 or more")
        for name in ("calls_per_minute", "retries", "retry_delay_s"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} = {getattr(self, name)}: must be 0 or more")
        if self.ring_timeout_s <= 0:
            raise ValueError(f"ring_timeout_s = {self.ring_timeout_s}: must be more than 0")
        if self.window:
            try:
                parse_window(self.window)
            except CampaignError as e:
                raise ValueError(f"window = {self.window!r}: {e}") from None
        try:
            zone(self.timezone)
        except CampaignError as e:
            raise ValueError(f"timezone = {self.timezone!r}: {e}") from None


@dataclass(frozen=True)
class CampaignRow:
    """One line of a campaign's CSV, checked."""

    index: int
    """The CSV line it came from (the header is line 1), as messages and ``status`` name it."""
    number: str
    """The ``number`` column as written."""
    uri: str
    """Where the call goes."""
    tz: str
    """The callee's time zone (the row's ``tz``, else ``[campaigns].timezone``)."""
    variables: dict[str, str] = field(default_factory=dict)
    """Every other column by name (``{name}`` in a profile's greeting)."""


def parse_window(text: str) -> tuple[time, time]:
    """``"09:00-18:00"`` -> (09:00, 18:00).

    Raises:
        CampaignError: not ``HH:MM-HH:MM``, an hour or minute out of range, or an empty window.
    """
    m = _WINDOW.match(text.strip())
    if m is None:
        raise CampaignError("expected HH:MM-HH:MM, e.g. 09:00-18:00")
    h1, m1, h2, m2 = map(int, m.groups())
    if h1 > 23 or h2 > 23 or m1 > 59 or m2 > 59:
        raise CampaignError("hours are 00-23, minutes 00-59")
    if (h1, m1) == (h2, m2):
        raise CampaignError("start and end are the same (leave window empty for any time)")
    return time(h1, m1), time(h2, m2)


def zone(name: str) -> ZoneInfo:
    """The IANA time zone ``name``.

    Raises:
        CampaignError: no such zone.
    """
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise CampaignError(f"unknown time zone {name!r} (an IANA name: Europe/Berlin)") from None


def sip_uri(number: str, domain: str) -> str:
    """The SIP URI a campaign row's (or ``dial``'s) number is called at.

    A ``sip:``/``sips:`` URI is kept as written; a telephone number (digits, an optional leading
    ``+``, spaces, dots, dashes and brackets) becomes ``sip:DIGITS@domain``.

    Raises:
        CampaignError: neither a SIP URI nor a number, or a number with no domain to send it to.
    """
    text = number.strip()
    if text.startswith(("sip:", "sips:")):
        if "@" not in text[4:] and "." not in text:
            raise CampaignError(f"{text!r} is not a SIP URI (sip:user@host[:port])")
        return text
    if not _PHONE.match(text):
        raise CampaignError(f"{text!r} is neither a SIP URI (sip:user@host) nor a phone number")
    if not domain:
        raise CampaignError(f"{text!r} is a phone number and [campaigns].domain (--domain) is "
                            "empty: nowhere to send it")
    digits = ("+" if text.startswith("+") else "") + re.sub(r"\D", "", text)
    return f"sip:{digits}@{domain}"


def placeholders(text: str) -> list[str]:
    """The ``{name}`` variables ``text`` uses, in order of first use."""
    return list(dict.fromkeys(_PLACEHOLDER.findall(text)))


def fill(text: str, row: CampaignRow, where: str = "text") -> str:
    """``text`` with each ``{name}`` replaced by the row's ``name`` column.

    Only ``{word}`` is a variable; other braces are left as they are, so a profile's text
    needs no escaping.

    Raises:
        CampaignError: a variable the row has no column for, or leaves empty.
    """
    def sub(m: re.Match) -> str:
        name = m.group(1)
        value = row.variables.get(name)
        if value is None:
            raise CampaignError(f"row {row.index}: no column '{name}' (the {where} uses {{{name}}}"
                                f"; columns: {', '.join(row.variables) or 'none'})")
        if not value.strip():
            raise CampaignError(f"row {row.index}: column '{name}' is empty (the {where} uses "
                                f"{{{name}}})")
        return value.strip()

    return _PLACEHOLDER.sub(sub, text)


def read_rows(path: str | Path, options: CampaignOptions) -> list[CampaignRow]:
    """Read a campaign's CSV: a header line with a ``number`` column, then one row per call.

    An optional ``tz`` column sets each row's time zone; any other column is a variable.

    Raises:
        CampaignError: the file is unreadable or empty, has no ``number`` column, or a row has
            a bad number, an unknown time zone, too many fields, or repeats an earlier number.
    """
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8-sig")  # a spreadsheet's BOM is not part of a name
    except OSError as e:
        raise CampaignError(f"{p}: {e.strerror or e}") from None
    reader = csv.DictReader(text.splitlines())
    header = [h.strip() for h in (reader.fieldnames or [])]
    if not header:
        raise CampaignError(f"{p}: empty (expected a header line with a 'number' column)")
    if NUMBER_COLUMN not in header:
        raise CampaignError(f"{p}: no '{NUMBER_COLUMN}' column (columns: {', '.join(header)})")
    reader.fieldnames = header
    rows: list[CampaignRow] = []
    seen: dict[str, int] = {}
    for raw in reader:
        index = reader.line_num
        if None in raw:
            raise CampaignError(f"{p}: row {index}: more fields than the header's {len(header)}")
        values = {k: (v or "").strip() for k, v in raw.items()}
        if not any(values.values()):
            continue  # a blank line at the end of a spreadsheet's export
        number = values.pop(NUMBER_COLUMN)
        try:
            uri = sip_uri(number, options.domain)
            tz = values.pop(TZ_COLUMN, "") or options.timezone
            zone(tz)
        except CampaignError as e:
            column = TZ_COLUMN if "time zone" in str(e) else NUMBER_COLUMN
            raise CampaignError(f"{p}: row {index}, column '{column}': {e}") from None
        if uri in seen:  # one campaign never calls one person twice
            raise CampaignError(f"{p}: row {index}: {uri} is also row {seen[uri]}")
        seen[uri] = index
        rows.append(CampaignRow(index, number, uri, tz, values))
    if not rows:
        raise CampaignError(f"{p}: no rows under the header")
    return rows
