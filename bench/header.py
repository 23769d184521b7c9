"""Markdown for benchmark results: a header line naming the day and the CPU, and tables.

A benchmark's figures depend on the machine it ran on more than on anything else, so every
results table a ``callagent bench`` command prints opens with one header line giving the date,
the CPU model (``model name`` in ``/proc/cpuinfo``) and the cores this process may use, and
the table itself is markdown: what BENCHMARKS.md holds, pasted as printed.

Imports nothing from the project; rich only to read a table another module built.
"""

from __future__ import annotations

import datetime
import os
import platform
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rich.table import Table


def cpu_model(cpuinfo: str | None = None) -> str:
    """The CPU's model name.

    Args:
        cpuinfo: text of ``/proc/cpuinfo``; read from the system when None.

    Returns:
        The first ``model name`` entry, spaces collapsed; where there is none (not Linux, some
        ARM kernels), ``platform.processor()`` or the machine type.
    """
    if cpuinfo is None:
        try:
            cpuinfo = Path("/proc/cpuinfo").read_text(errors="replace")
        except OSError:
            cpuinfo = ""
    for line in cpuinfo.splitlines():
        key, _, value = line.partition(":")
        if key.strip() == "model name" and value.strip():
            return " ".join(value.split())
    return platform.processor() or platform.machine() or "unknown CPU"


def core_count() -> int:
    """Cores this process may run on (its affinity mask: what a container was given)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not Linux
        return os.cpu_count() or 1


def markdown_header(title: str, *, day: datetime.date | None = None, cpu: str | None = None,
                    cores: int | None = None) -> str:
    """The line that opens a benchmark's results.

    Args:
        title: what ran, e.g. ``"bench call"``.
        day: the date of the run (today when None).
        cpu: the CPU model (:func:`cpu_model` when None).
        cores: the cores available (:func:`core_count` when None).

    Returns:
        A markdown heading, e.g. ``## bench call: YYYY-MM-DD, <CPU model name>, 2 cores``.
    """
    day = day or datetime.date.today()
    cpu = cpu or cpu_model()
    cores = cores or core_count()
    return f"## {title}: {day.isoformat()}, {cpu}, {cores} core{'s' if cores != 1 else ''}"


def _cell(value: object) -> str:
    text = getattr(value, "plain", None)  # a rich Text
    text = str(value) if text is None else text
    # A pipe would end the cell and a newline the row.
    return " ".join(text.split()).replace("|", "\\|")


def markdown_table(headers: Sequence[str], rows: Iterable[Sequence[object]],
                   right: Iterable[int] = ()) -> str:
    """A markdown (GitHub) table.

    Args:
        headers: column names.
        rows: one sequence of cell values per row, as long as ``headers``.
        right: indices of the columns aligned right (numbers).

    Returns:
        The table's lines, joined with newlines.
    """
    right = set(right)
    rule = ["---:" if i in right else "---" for i in range(len(headers))]
    lines = ["| " + " | ".join(_cell(h) for h in headers) + " |", "| " + " | ".join(rule) + " |"]
    lines += ["| " + " | ".join(_cell(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def rich_to_markdown(table: Table) -> str:
    """A rich table as markdown: its title, the table, its caption.

    Args:
        table: a ``rich.table.Table`` whose cells are plain strings or ``Text`` (markup in a
            string is printed as written).

    Returns:
        The title line (when the table has one), a blank line, the table, and the caption
        after another blank line (when it has one).
    """
    headers = [c.header for c in table.columns]
    right = [i for i, c in enumerate(table.columns) if c.justify == "right"]
    rows = zip(*(list(c.cells) for c in table.columns), strict=True)
    parts = [f"**{_cell(table.title)}**"] if table.title else []
    parts.append(markdown_table(headers, rows, right))
    if table.caption:
        parts.append(_cell(table.caption))
    return "\n\n".join(parts)


def progress_printer(console) -> Callable[[str], None]:
    """A ``progress(line)`` that prints each line to ``console`` after the seconds since now.

    The long benches (answers, tools) report every step, so a stuck model shows.
    """
    import time

    started = time.monotonic()

    def progress(line: str) -> None:
        console.print(f"[{time.monotonic() - started:6.0f} s] {line}", markup=False,
                      highlight=False)

    return progress
