"""Comments and docstrings say why and name the benchmark, not when or on what machine (issue 44).

A comment that cites a run by its date ("2026-11-26", "on Nov 26"), by the time of day ("this
morning") or by the CPU it ran on ("on the Xeon") goes stale the day it is written: the
figures it stood for are in BENCHMARKS.md, under the header line of the run that made them
(:mod:`bench.header`). Code says which benchmark shows a choice, e.g. "(bench call, 4 at
once)". Every runtime module (``agent/``, ``models/``, ``db/`` but its Alembic revisions,
``dialplan/``, ``bench/``) is read, never imported: comments come from :mod:`tokenize`,
docstrings (and attribute docstrings, any bare string statement) from :mod:`ast`. The failure
lists each offender as ``file:line: text``.
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
from collections.abc import Iterator
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[1]
RUNTIME = ("agent", "models", "db", "dialplan", "bench")
SKIPPED = (Path("db/migrations"),)
"""Alembic revisions carry their creation date by design."""

_MONTHS = ("January|February|March|April|May|June|July|August|September|October|November"
           "|December")
_MONTHS_SHORT = "Jan|Feb|Mar|Apr|Jun|Jul|Aug|Sep|Sept|Oct|Nov|Dec"
FORBIDDEN = {
    "an ISO date": re.compile(r"\b20\d\d-[01]\d-[0-3]\d\b"),
    "a date": re.compile(
        rf"\b(?:{_MONTHS}|(?:{_MONTHS_SHORT})\.?)\s+(?:[0-3]?\d(?:st|nd|rd|th)?|(?:19|20)\d\d)\b"
        rf"|\b[0-3]?\d(?:st|nd|rd|th)?\s+(?:{_MONTHS})\b"),
    "a time of day": re.compile(r"\bthis\s+(?:morning|afternoon|evening)\b", re.IGNORECASE),
    # "AMD" alone is answering-machine detection: the vendor is named with a CPU word.
    "a CPU name": re.compile(r"\b(?:Xeon|EPYC|Ryzen|Opteron|Intel|AMD (?:CPU|processor))\b",
                             re.IGNORECASE),
}


def runtime_files() -> list[Path]:
    files = []
    for top in RUNTIME:
        for path in sorted((ROOT / top).rglob("*.py")):
            rel = path.relative_to(ROOT)
            if not any(rel.is_relative_to(skip) for skip in SKIPPED):
                files.append(rel)
    return files


def prose(path: Path) -> Iterator[tuple[int, str]]:
    """(line, text) of every comment and every line of every docstring in ``path``."""
    source = (ROOT / path).read_text(encoding="utf-8")
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type == tokenize.COMMENT:
            yield tok.start[0], tok.string
    for node in ast.walk(ast.parse(source, filename=str(path))):
        if (isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)
                and isinstance(node.value.value, str)):
            for i, line in enumerate(node.value.value.splitlines()):
                yield node.lineno + i, line


def offenders(path: Path) -> list[str]:
    found = []
    for line, text in prose(path):
        for what, pattern in FORBIDDEN.items():
            if pattern.search(text):
                found.append(f"{path}:{line}: {what}: {text.strip()}")
    return found


def test_patterns_catch_what_they_should():
    caught = ["measured on 2026-11-26", "on Nov 26 it", "in March 2026", "on 26 November",
              "this morning's run", "This Afternoon", "on an AMD EPYC 7B13",
              "Intel Xeon", "a Ryzen laptop", "an AMD CPU"]
    passed = ["20 ms frames", "the 2024 edition", "callers may 3 times", "amd64 wheels",
              "intelligible", "at 10.30", "(bench call, 4 at once)", "morning opening hours",
              "answering-machine detection (AMD)", "``amd``: the longest", "Asterisk's AMD"]
    for text in caught:
        assert any(p.search(text) for p in FORBIDDEN.values()), text
    for text in passed:
        assert not any(p.search(text) for p in FORBIDDEN.values()), text


def test_runtime_prose_names_no_date_time_of_day_or_cpu():
    files = runtime_files()
    assert len(files) > 50, "the runtime modules were not found"
    found = [hit for path in files for hit in offenders(path)]
    for hit in found:
        print(hit)
    assert not found, "comments or docstrings cite a run by date, time or machine:\n" + "\n".join(
        found)
