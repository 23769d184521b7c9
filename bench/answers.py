"""``callagent bench answers``: does a caller get the right answers, over a whole call?

Every shipped persona (dialplan/personas/) has calls in two question files beside its
knowledge file, a *tuned* split and a *held-out* one (:mod:`bench.conversations`). Each
call is made by voices of several groups through the phone line and answered turn by turn by
the persona's profile and its under-load profile (:mod:`bench.answers_run`); every reply
is judged by the bench's own rules (:mod:`bench.judge`). Tables:
:mod:`bench.answers_report`. Held-out questions and replies are printed only with
``--show-heldout``: engineers tuning on the tuned split must not read the held-out failures.
"""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import asdict, replace
from pathlib import Path

from rich.console import Console

from agent.turn.runner import StageCache
from bench.answers_run import DEFAULT_GROUPS, GROUPS, Persona, measure
from bench.conversations import (
    FRESH,
    HELDOUT,
    SPLITS,
    TUNED,
    Conversations,
    ConversationsError,
    file_for,
    load,
)
from bench.header import progress_printer
from dialplan import Config
from dialplan.plan import under_load
from dialplan.profile import Profile
from models import catalog

USES_CONFIG = True

QUICK = 6
"""``--quick``: the first calls of each file."""


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--persona", default="",
                   help="personas, comma-separated (their question files name their profiles; "
                        "default: every persona with a tuned question file)")
    p.add_argument("--profile", metavar="NAME",
                   help="instead of --persona: the persona whose question files name NAME")
    p.add_argument("--split", choices=(TUNED, HELDOUT, FRESH, "both", "all"), default="all",
                   help="the tuned calls, a held-out split (heldout, fresh), tuned and heldout "
                        "(both), or all three")
    p.add_argument("--questions", metavar="DIR", type=Path,
                   help="the folder of <persona>.calls.toml and .heldout.toml (default: the "
                        "folders of the profiles' knowledge files)")
    p.add_argument("--quick", action="store_true", help=f"the first {QUICK} calls of each file")
    p.add_argument("--no-under-load", action="store_true",
                   help="only the profiles' own models, not their under-load profiles' too")
    p.add_argument("--groups", default=",".join(DEFAULT_GROUPS),
                   help=f"voice groups, comma-separated (of: {', '.join(GROUPS)})")
    p.add_argument("--show-heldout", action="store_true",
                   help="print the held-out calls' questions and replies too (not while tuning)")
    p.add_argument("--json", metavar="PATH", help="write every turn here too (held-out included)")


def folders(config: Config) -> list[Path]:
    """Where question files are looked for: the folders of the profiles' knowledge files."""
    # As the config reads them: beside the config file, or from here for a config in memory.
    base = Path() if config.source.startswith("<") else Path(config.source).parent
    out = []
    for p in config.profiles.values():
        if p.knowledge:
            k = Path(p.knowledge).expanduser()
            out.append((k if k.is_absolute() else base / k).parent)
    return list(dict.fromkeys(out))


def find(persona: str, split: str, where: list[Path]) -> Path:
    """``persona``'s ``split`` file in the first folder of ``where`` that holds it.

    Raises:
        ConversationsError: in none of them (the paths tried named).
    """
    tried = [file_for(f, persona, split) for f in where]
    for path in tried:
        if path.exists():
            return path
    looked = ", ".join(map(str, tried)) or "nowhere: no profile has a knowledge file"
    raise ConversationsError(f"persona {persona}: no {split} question file (looked for {looked})")


def shipped(where: list[Path]) -> list[str]:
    """Every persona with a tuned question file in ``where``, in name order."""
    names = (path.name.split(".")[0] for folder in where
             for path in sorted(folder.glob(f"*.{SPLITS[TUNED]}.toml")))
    return list(dict.fromkeys(names))


def by_profile(name: str, where: list[Path]) -> str:
    """The persona whose question files name profile ``name``."""
    for folder in where:
        for path in sorted(folder.glob(f"*.{SPLITS[TUNED]}.toml")):
            if load(path).profile == name:
                return path.name.split(".")[0]
    raise ConversationsError(f"--profile: no question file in {', '.join(map(str, where))} "
                             f"names profile {name}")


def check(c: Conversations, profile: Profile) -> None:
    """Whether ``profile`` can be asked ``c``'s calls: its facts, tools and directory entries.

    Raises:
        ConversationsError: naming the file and the key the profile cannot serve.
    """
    if not profile.facts:
        raise ConversationsError(f"{c.path}: profile: {profile.name} has no knowledge file")
    for i, call in enumerate(c.calls):
        for j, t in enumerate(call.turns):
            tool = t.action.split(":")[0]
            if t.action and tool not in profile.tools:
                raise ConversationsError(
                    f"{c.path}: calls[{i}].turns[{j}].action: profile {profile.name} has no "
                    f"tool {tool} (it has {', '.join(profile.tools) or 'none'})")
    for target, key in c.transfer_targets().items():
        if target not in profile.directory:
            raise ConversationsError(
                f"{c.path}: {key}: {target} is not in profile {profile.name}'s directory "
                f"({', '.join(profile.directory) or 'empty'})")


def personas_for(config: Config, names: list[str], splits: list[str],
                 where: list[Path] | None = None, under: bool = True,
                 quick: bool = False) -> list[Persona]:
    """Each persona's profiles and calls, checked before any model loads.

    Raises:
        ConversationsError: a missing or bad question file, or one its profile cannot serve.
    """
    where = where if where is not None else folders(config)
    out = []
    for name in names:
        calls = {s: load(find(name, s, where), s) for s in splits}
        profiles = {c.profile for c in calls.values()}
        if len(profiles) > 1:
            raise ConversationsError(f"persona {name}: its files name different profiles "
                                     f"({', '.join(sorted(profiles))})")
        pname = profiles.pop()
        if pname not in config.profiles:
            path = next(iter(calls.values())).path
            raise ConversationsError(f"{path}: profile: unknown '{pname}' (profiles: "
                                     f"{', '.join(config.profiles)})")
        profile = config.profiles[pname]
        for c in calls.values():
            check(c, profile)
        if quick:
            calls = {s: replace(c, calls=c.calls[:QUICK]) for s, c in calls.items()}
        rungs = [profile]
        if under and profile.under_load:
            rungs.append(under_load(profile, config.profiles[profile.under_load]))
        out.append(Persona(name, rungs, calls))
    return out


def run(args: argparse.Namespace, config: Config) -> int:
    from bench.answers_report import report

    err = Console(stderr=True)
    groups = [g.strip() for g in args.groups.split(",") if g.strip()]
    splits = {"both": [TUNED, HELDOUT], "all": [TUNED, HELDOUT, FRESH]}.get(args.split,
                                                                          [args.split])
    try:
        unknown = [g for g in groups if g not in GROUPS]
        if unknown or not groups:
            raise ValueError(f"--groups: unknown {', '.join(unknown) or '(none given)'} "
                             f"(known: {', '.join(GROUPS)})")
        where = [args.questions] if args.questions else folders(config)
        names = ([by_profile(args.profile, where)] if args.profile
                 else [n.strip() for n in args.persona.split(",") if n.strip()]
                 or shipped(where))
        personas = personas_for(config, names, splits, where, not args.no_under_load,
                                args.quick)
    except ValueError as e:
        err.print(f"callagent bench answers: {e}", markup=False, highlight=False)
        return 2
    started = time.monotonic()
    progress = progress_printer(err)
    cache, clips = StageCache(), catalog.cache_dir() / "bench-answers"
    runs = []
    for p in personas:
        runs += measure(p, groups, cache, clips, progress, args.show_heldout)
    print(report(runs, personas, groups, args.show_heldout))
    print(f"\n{time.monotonic() - started:.0f} s in all.")
    if args.json:
        with open(args.json, "w") as f:
            json.dump([asdict(r) for r in runs], f, indent=1)
    return 0
