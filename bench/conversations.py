r"""The calls ``bench answers`` makes: per persona, TOML files of conversations, read and checked.

A persona has two files beside its knowledge file (``dialplan/personas/``):
``<persona>.calls.toml``, the *tuned* split engineers read while they change prompts and
checks, and ``<persona>.heldout.toml``, the *held-out* split whose texts they do not read, so
that what helped on the first is seen to help on calls it was not fitted to. Both have the
same form::

    profile = "dental"                  # the config.toml profile that answers these calls
    [[calls]]
    name = "saturday-hours"
    [[calls.turns]]
    say = "What time do you open on Saturday?"
    kind = "fact"                       # fact | unknown | action
    answer = '\bten\b'                  # fact only: regex searched in normalize(reply)
    [[calls.turns]]
    say = "And when do you close that day?"
    kind = "fact"
    answer = '\bfour\b'
    follow_up = true                    # needs the call's earlier turns

An ``action`` turn names what the call must do: ``transfer:<directory entry>``, ``end_call``
or ``take_message``. A file that does not follow this is refused with its path and the key at
fault (``calls[2].turns[0].answer``), before any model loads.
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass
from pathlib import Path

FACT = "fact"
UNKNOWN = "unknown"
ACTION = "action"
KINDS = (FACT, UNKNOWN, ACTION)

TUNED = "tuned"
HELDOUT = "heldout"
FRESH = "fresh"
SPLITS = {TUNED: "calls", HELDOUT: "heldout", FRESH: "fresh"}
"""A split and the middle of its file's name (``<persona>.calls.toml``, ``.heldout.toml``,
``.fresh.toml``). ``fresh`` is a second held-out split, written once the first had been read
for a decision: a held-out split stays unseen only until its failures are looked at."""
HIDDEN = (HELDOUT, FRESH)
"""The splits whose questions and replies are not printed while tuning."""

ACTIONS = ("end_call", "take_message")
"""The actions a turn may expect besides ``transfer:<entry>``."""

_TURN_KEYS = {"say", "kind", "answer", "action", "follow_up"}


class ConversationsError(ValueError):
    """A question file is missing or malformed; the message names the file and the key."""


@dataclass(frozen=True)
class Turn:
    """One thing a caller says in a call, and what a right reply does."""

    say: str
    kind: str
    answer: str = ""
    """Fact turns: a regular expression searched in the normalised reply."""
    action: str = ""
    """Action turns: ``transfer:<entry>``, ``end_call`` or ``take_message``."""
    follow_up: bool = False
    """Asks about what an earlier turn of the call said ("And on Sunday?")."""

    @property
    def expected(self) -> str:
        """What the turn expects, in a word: the answer's pattern, the action, or ``unknown``."""
        return self.answer if self.kind == FACT else self.action or self.kind


@dataclass(frozen=True)
class Call:
    """A caller's turns, asked in order on one call."""

    name: str
    turns: tuple[Turn, ...]


@dataclass(frozen=True)
class Conversations:
    """One question file: a persona's calls of one split."""

    persona: str
    split: str
    profile: str
    """The ``config.toml`` profile that answers them."""
    calls: tuple[Call, ...]
    path: Path

    def transfer_targets(self) -> dict[str, str]:
        """Directory entries the calls expect transfers to, each with the key that names it."""
        out = {}
        for i, call in enumerate(self.calls):
            for j, t in enumerate(call.turns):
                if t.action.startswith("transfer:"):
                    out.setdefault(t.action.split(":", 1)[1], f"calls[{i}].turns[{j}].action")
        return out


def file_for(folder: Path, persona: str, split: str) -> Path:
    """Where ``persona``'s ``split`` file lies in ``folder``."""
    return Path(folder) / f"{persona}.{SPLITS[split]}.toml"


def load(path: Path, split: str | None = None) -> Conversations:
    """The calls of one question file.

    The persona is the file name's first part (``dental.calls.toml``: ``dental``); the split,
    unless given, its second.

    Raises:
        ConversationsError: missing, not TOML, or a key missing, of the wrong type, unknown,
            or with a bad value (a regex that does not compile, an unknown kind or action),
            named as ``<path>: calls[i].turns[j].<key>: why``.
    """
    path = Path(path)
    persona, _, middle = path.name.removesuffix(".toml").partition(".")
    if split is None:
        split = next((s for s, m in SPLITS.items() if m == middle), "")
        if not split:
            raise ConversationsError(
                f"{path}: not a question file's name (<persona>.calls.toml or "
                f"<persona>.heldout.toml)")
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as e:
        raise ConversationsError(f"{path}: cannot read it ({e.strerror or e})") from None
    except tomllib.TOMLDecodeError as e:
        raise ConversationsError(f"{path}: not valid TOML ({e})") from None

    def bad(key: str, why: str) -> ConversationsError:
        return ConversationsError(f"{path}: {key}: {why}")

    unknown = sorted(set(data) - {"profile", "calls"})
    if unknown:
        raise bad(unknown[0], "unknown key (a file holds profile and [[calls]])")
    profile = data.get("profile")
    if not isinstance(profile, str) or not profile.strip():
        raise bad("profile", "missing: the config.toml profile that answers these calls")
    calls = data.get("calls")
    if not isinstance(calls, list) or not calls:
        raise bad("calls", "missing: at least one [[calls]] table")
    out, names = [], set()
    for i, c in enumerate(calls):
        out.append(_call(c, f"calls[{i}]", bad))
        if out[-1].name in names:
            raise bad(f"calls[{i}].name", f"'{out[-1].name}' is another call's name too")
        names.add(out[-1].name)
    return Conversations(persona, split, profile.strip(), tuple(out), path)


def _call(c: object, key: str, bad) -> Call:
    if not isinstance(c, dict):
        raise bad(key, "not a table")
    unknown = sorted(set(c) - {"name", "turns"})
    if unknown:
        raise bad(f"{key}.{unknown[0]}", "unknown key (a call has name and [[calls.turns]])")
    name = c.get("name")
    if not isinstance(name, str) or not name.strip():
        raise bad(f"{key}.name", "missing")
    turns = c.get("turns")
    if not isinstance(turns, list) or not turns:
        raise bad(f"{key}.turns", "missing: at least one [[calls.turns]] table")
    return Call(name.strip(), tuple(_turn(t, f"{key}.turns[{j}]", j, bad)
                                    for j, t in enumerate(turns)))


def _turn(t: object, key: str, index: int, bad) -> Turn:
    if not isinstance(t, dict):
        raise bad(key, "not a table")
    unknown = sorted(set(t) - _TURN_KEYS)
    if unknown:
        raise bad(f"{key}.{unknown[0]}",
                  f"unknown key (a turn has {', '.join(sorted(_TURN_KEYS))})")
    say, kind = t.get("say"), t.get("kind")
    if not isinstance(say, str) or not say.strip():
        raise bad(f"{key}.say", "missing: what the caller says")
    if kind not in KINDS:
        raise bad(f"{key}.kind", f"{kind!r}: one of {', '.join(KINDS)}")
    answer, action, follow = t.get("answer", ""), t.get("action", ""), t.get("follow_up", False)
    if not isinstance(follow, bool):
        raise bad(f"{key}.follow_up", "true or false")
    if follow and index == 0:
        raise bad(f"{key}.follow_up", "a call's first turn has no earlier turn to follow")
    if kind == FACT:
        if not isinstance(answer, str) or not answer:
            raise bad(f"{key}.answer", "missing: a fact turn's regex on the normalised reply")
        try:
            re.compile(answer)
        except re.error as e:
            raise bad(f"{key}.answer", f"not a regular expression ({e})") from None
    elif "answer" in t:
        raise bad(f"{key}.answer", f"only a fact turn has one (this one is {kind})")
    if kind == ACTION:
        if not isinstance(action, str) or not (
                action in ACTIONS or re.fullmatch(r"transfer:\S+", action)):
            raise bad(f"{key}.action",
                      f"{action!r}: transfer:<directory entry>, {' or '.join(ACTIONS)}")
    elif "action" in t:
        raise bad(f"{key}.action", f"only an action turn has one (this one is {kind})")
    return Turn(say.strip(), kind, answer, action, follow)
