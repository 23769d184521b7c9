"""``callagent bench summary``: post-call notes on scripted calls whose facts are known.

Each call of :mod:`bench.summary_calls` (12, and 4 held out) goes through the post-call
job's own code (:func:`agent.summary.job.make_notes`, at background priority as after a real
call) with the profile's LLM (the default one: ``config.toml``'s), asked for a summary and the
fields ``caller_name``, ``reason`` and ``callback_number``. Printed as markdown: per call what came
back and whether each field is right, then per field how many of the calls had it right, the
calls with every field right (the issue's acceptance: 8 of 10), the summaries' checks (two
sentences, the reason in them, the caller's name where they gave one) and the time per
summary. The baseline is the same run with the grammar off (free text, read leniently):
what the grammar is worth. A field is right when:

* ``caller_name``: every word of the caller's name is in it, and at most one more (a title),
  or it is null where the caller never gave one;
* ``reason``: one of the call's phrases is in it;
* ``callback_number``: its digits are the number's, or it is null where none was given.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import re
import statistics

from rich.console import Console

from agent.summary.job import Outcome, make_notes
from bench.header import markdown_header, markdown_table, progress_printer
from bench.summary_calls import CALLS, EXTRACT, HELD_OUT, ScriptedCall
from dialplan import Config
from dialplan.profile import Profile
from models.llm.base import Message
from models.priority import Priority, priority
from models.registry import ModelCache
from models.scheduler import Scheduler

USES_CONFIG = True
FIELDS = tuple(EXTRACT)
TITLES = frozenset({"mr", "mrs", "ms", "miss", "dr"})


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Register the ``bench summary`` options on ``p``."""
    p.add_argument("--profile", default="default", help="whose LLM takes the notes")
    p.add_argument("--model", default="", help="over the profile's llm.model")
    p.add_argument("--backend", default="", help="over the profile's llm.backend")
    p.add_argument("--calls", type=int, default=len(CALLS) + len(HELD_OUT),
                   help="the first N scripted calls (the held-out ones last)")
    p.add_argument("--no-baseline", action="store_true", help="skip the run without grammar")
    p.add_argument("--json", action="store_true", help="print the raw outcomes as JSON too")


@dataclasses.dataclass
class Checked:
    """One call's outcome and what is right in it."""

    call: ScriptedCall
    outcome: Outcome
    right: dict[str, bool]
    summary_checks: dict[str, bool | None]

    @property
    def all_right(self) -> bool:
        return self.outcome.state == "done" and all(self.right.values())


def words(text: str) -> list[str]:
    return [w for w in re.findall(r"[a-z]+", text.lower()) if w not in TITLES]


def name_right(expected: str | None, got: str | None) -> bool:
    if expected is None or got is None:
        return expected is None and got is None
    want, have = words(expected), words(got)
    return set(want) <= set(have) and len(have) <= len(want) + 1


def reason_right(phrases: tuple[str, ...], got: str | None) -> bool:
    return got is not None and any(p in got.lower() for p in phrases)


def number_right(expected: str | None, got: str | None) -> bool:
    digits = re.sub(r"\D", "", got or "")
    return digits == (expected or "")


def sentences(text: str) -> int:
    return len(re.findall(r"[.!?](?:\s|$)", text.strip() + " "))


def check(call: ScriptedCall, outcome: Outcome) -> Checked:
    fields = outcome.notes.fields if outcome.notes else {}
    right = {"caller_name": name_right(call.caller_name, fields.get("caller_name")),
             "reason": reason_right(call.reason, fields.get("reason")),
             "callback_number": number_right(call.callback_number,
                                             fields.get("callback_number"))}
    text = (outcome.notes.summary or "") if outcome.notes else ""
    low = text.lower()
    checks: dict[str, bool | None] = {
        "two sentences": sentences(text) == 2 if text else False,
        "reason in it": any(p in low for p in call.reason),
        "name in it": (words(call.caller_name)[-1] in words(text)) if call.caller_name
        else None,
    }
    return Checked(call, outcome, right, checks)


def run_calls(llm, calls: tuple[ScriptedCall, ...], grammar: bool, progress) -> list[Checked]:
    base = Profile(name="bench-summary", summary=True, extract=EXTRACT)
    out = []
    for i, call in enumerate(calls, 1):
        profile = dataclasses.replace(base, greeting=call.greeting)
        with priority(Priority.BACKGROUND):  # as the job runs after a real call
            outcome = make_notes(llm, profile, call.turns, grammar=grammar,
                                 alone=lambda: True)  # no call is up
        checked = check(call, outcome)
        out.append(checked)
        got = outcome.notes.fields if outcome.notes else outcome.detail[:60]
        progress(f"{'grammar' if grammar else 'free'} {i}/{len(calls)} {call.name}: "
                 f"{outcome.state} {outcome.seconds:.1f} s {outcome.tokens} tokens, "
                 f"right {sum(checked.right.values())}/3: {got}")
    return out


def _cell(value: str | None) -> str:
    return "null" if value is None else value


def call_table(results: list[Checked]) -> str:
    rows = []
    for r in results:
        f = r.outcome.notes.fields if r.outcome.notes else {}
        marks = ["✓" if r.right[k] else "✗" for k in FIELDS]
        rows.append([r.call.name, *[f"{m} {_cell(f.get(k))}" for m, k in zip(marks, FIELDS,
                                                                             strict=True)],
                     "✓" if r.summary_checks["two sentences"] else "✗",
                     f"{r.outcome.seconds:.1f}", r.outcome.tokens,
                     r.outcome.state if r.outcome.state == "done" else r.outcome.detail[:50]])
    return markdown_table(["call", *FIELDS, "2 sentences", "s", "tokens", "state"], rows,
                          right=[5, 6])


def totals(results: list[Checked]) -> dict:
    n = len(results)
    seconds = [r.outcome.seconds for r in results]
    tokens = [r.outcome.tokens for r in results]
    named = [r for r in results if r.call.caller_name]
    return {
        "calls": n, "valid": sum(r.outcome.state == "done" for r in results),
        **{k: sum(r.right[k] for r in results) for k in FIELDS},
        "all_right": sum(r.all_right for r in results),
        "two_sentences": sum(bool(r.summary_checks["two sentences"]) for r in results),
        "reason_in_summary": sum(bool(r.summary_checks["reason in it"]) for r in results),
        "name_in_summary": sum(bool(r.summary_checks["name in it"]) for r in named),
        "named_calls": len(named),
        "p50_s": statistics.median(seconds), "max_s": max(seconds),
        "p50_tokens": statistics.median(tokens),
        "s_per_token": sum(seconds) / max(1, sum(tokens)),
    }


def totals_table(runs: dict[str, dict]) -> str:
    def of(t: dict, key: str, whole: str = "calls") -> str:
        return f"{t[key]}/{t[whole]}"

    rows = [
        ["reply is the JSON asked for", *[of(t, "valid") for t in runs.values()]],
        *[[f"{k} right", *[of(t, k) for t in runs.values()]] for k in FIELDS],
        ["**every field right**", *[f"**{of(t, 'all_right')}**" for t in runs.values()]],
        ["summary in two sentences", *[of(t, "two_sentences") for t in runs.values()]],
        ["summary says the reason", *[of(t, "reason_in_summary") for t in runs.values()]],
        ["summary names the caller", *[of(t, "name_in_summary", "named_calls")
                                       for t in runs.values()]],
        ["time per summary p50 / max (s)", *[f"{t['p50_s']:.1f} / {t['max_s']:.1f}"
                                             for t in runs.values()]],
        ["tokens per summary p50", *[f"{t['p50_tokens']:.0f}" for t in runs.values()]],
    ]
    return markdown_table(["", *runs], rows, right=range(1, len(runs) + 1))


def run(args: argparse.Namespace, config: Config) -> int:
    console = Console()
    profile = config.profiles[args.profile]
    options = profile.llm
    if args.model:
        options = dataclasses.replace(options, model=args.model)
    if args.backend:
        options = dataclasses.replace(options, backend=args.backend)
    progress = progress_printer(console)
    progress(f"loading {options.backend} {options.model}")
    llm = ModelCache(Scheduler()).llm(options)
    warm = llm.complete([Message("user", "Say OK.")], 2)  # buffers committed before timing
    "".join(warm)
    calls = (CALLS + HELD_OUT)[:max(1, args.calls)]
    results = {"grammar": run_calls(llm, calls, True, progress)}
    if not args.no_baseline:
        results["no grammar (baseline)"] = run_calls(llm, calls, False, progress)
    runs = {name: totals(rs) for name, rs in results.items()}
    lines = [markdown_header("bench summary"), "",
             f"{options.backend} {llm.model_name}, {len(calls)} scripted calls, fields "
             f"{', '.join(FIELDS)}; greedy, background priority, nothing else running.", ""]
    for name, rs in results.items():
        lines += [f"**{name}**", "", call_table(rs), ""]
    lines += ["**Totals**", "", totals_table(runs), ""]
    g = runs["grammar"]
    held = [r for r in results["grammar"] if r.call in HELD_OUT]
    lines.append(f"Every field right in {g['all_right']} of {g['calls']} calls (acceptance: "
                 f"8 of 10); {g['p50_s']:.1f} s per summary (p50).")
    if held:
        lines.append(f"Of them the held-out calls (written after the first run's changes): "
                     f"every field right in {sum(r.all_right for r in held)} of {len(held)}.")
    if "no grammar (baseline)" in runs:
        b = runs["no grammar (baseline)"]
        lines.append(f"Without the grammar: {b['valid']}/{b['calls']} replies were the JSON "
                     f"asked for, every field right in {b['all_right']}; time ratio grammar / "
                     f"free {g['p50_s'] / b['p50_s']:.2f} (p50).")
    print("\n".join(lines))
    if args.json:
        print(json.dumps({name: [{"call": r.call.name, "state": r.outcome.state,
                                  "detail": r.outcome.detail, "text": r.outcome.text,
                                  "seconds": r.outcome.seconds, "tokens": r.outcome.tokens,
                                  "right": r.right} for r in rs]
                          for name, rs in results.items()}, indent=1))
    return 0
