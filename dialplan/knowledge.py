"""A profile's knowledge file: the facts its agent may state, read once at start.

The persona's system prompt stays short (it is primed once and reused by every turn); the
facts a caller may ask about (opening hours, closed days, prices, who does what) live in a
file the profile names, ``knowledge = "library.md"``, and a turn gets only the few that match
its words (:mod:`agent.turn.knowledge`). Two formats:

- Markdown: every list item or paragraph is one fact; the headings above it are its topic
  ("Printing > Prices: black and white, 10 cents a page").
- TOML: ``[[facts]]`` tables with ``answer`` (the fact) and optionally ``question`` (words a
  caller would use, matched but not shown to the model).
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Fact:
    """One thing the agent may say, and the words that find it."""

    text: str
    """What goes into the prompt."""
    topic: str = ""
    """The headings above it (Markdown) or its question (TOML): matched, and shown as a
    prefix for Markdown."""

    @property
    def shown(self) -> str:
        return f"{self.topic}: {self.text}" if self.topic and not self.question else self.text

    @property
    def question(self) -> bool:
        return self.topic.endswith("?")


class KnowledgeError(ValueError):
    """The file is missing or has no facts; the message names the file and why."""


def load_facts(path: Path) -> tuple[Fact, ...]:
    """The facts of a ``.md`` or ``.toml`` knowledge file.

    Raises:
        KnowledgeError: missing, unreadable, of another kind, or without a single fact.
    """
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as e:
        raise KnowledgeError(f"{path}: cannot read it ({e.strerror or e})") from None
    if path.suffix == ".toml":
        facts = _toml_facts(text, path)
    elif path.suffix in (".md", ".markdown", ".txt"):
        facts = _markdown_facts(text)
    else:
        raise KnowledgeError(f"{path}: a knowledge file is .md or .toml")
    if not facts:
        raise KnowledgeError(f"{path}: no facts in it")
    return facts


def _markdown_facts(text: str) -> tuple[Fact, ...]:
    facts: list[Fact] = []
    headings: list[str] = []
    para: list[str] = []

    def flush() -> None:
        if para:
            facts.append(Fact(" ".join(para), " > ".join(headings)))
            para.clear()

    for raw in text.splitlines():
        line = raw.strip()
        heading = re.match(r"(#+)\s+(.*)", line)
        if heading:
            flush()
            level = len(heading.group(1))
            headings[:] = headings[:level - 1] + [heading.group(2).strip()]
        elif re.match(r"[-*+]\s+|\d+[.)]\s+", line):
            flush()
            para.append(re.sub(r"^([-*+]|\d+[.)])\s+", "", line))
        elif not line:
            flush()
        else:
            para.append(line)
    flush()
    return tuple(facts)


def _toml_facts(text: str, path: Path) -> tuple[Fact, ...]:
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise KnowledgeError(f"{path}: not valid TOML: {e}") from None
    entries = data.get("facts", [])
    if not isinstance(entries, list):
        raise KnowledgeError(f"{path}: facts must be an array of tables ([[facts]])")
    out = []
    for i, entry in enumerate(entries):
        if not isinstance(entry, dict) or not isinstance(entry.get("answer"), str):
            raise KnowledgeError(f"{path}: facts[{i}] needs an answer (a string)")
        question = entry.get("question", "")
        if not isinstance(question, str):
            raise KnowledgeError(f"{path}: facts[{i}].question must be a string")
        question = question.strip()
        out.append(Fact(entry["answer"].strip(),
                        question if not question or question.endswith("?") else question + "?"))
    return tuple(out)
