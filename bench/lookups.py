"""``callagent bench lookups``: is the right look-up tool called, and with the right arguments?

Typed questions to businesses whose tools only look things up (:mod:`bench.lookup_cases`),
each asked as a call's first turn with the profile's LLM and the agent's own tools block
(:class:`agent.turn.tools.Toolbox`). Two ways are measured on the same questions:

* **model alone** (the baseline, what the agent did before :mod:`agent.turn.routing`): the
  LLM's reply is read by the agent's :class:`~agent.turn.tools.ToolCallScanner`; a call to
  a tool is the model's choice, anything else is "none";
* **routed**: :class:`~agent.turn.routing.LookupRouter` asks the model's odds of each
  look-up's name (:func:`agent.turn.routing.route`), and where it chooses a tool the LLM
  writes its arguments (:func:`agent.turn.reply_tools.fill_arguments`);
  where it chooses none, the model alone's reply stands (as in a call).

A turn is right when the tool is the expected one (or none where none is needed) and, for a
tool, one argument holds the expected word; "chosen" counts the look-ups whose tool was right
whatever its arguments. Printed per split (tuned: the questions the
router's threshold was chosen on; held-out: five businesses written before the first run, read
as counts once; held-out 2: five more, written before the change that followed) with
the time to the call (the arguments written, or the model's call complete) and the time the
routing step adds to every turn.
"""

from __future__ import annotations

import argparse
import dataclasses
import time

from rich.console import Console

from agent.turn.reply_tools import fill_arguments
from agent.turn.routing import LookupRouter, route
from agent.turn.tools import Toolbox, ToolCallScanner
from bench.header import markdown_header, markdown_table, progress_printer
from bench.lookup_cases import FOLLOW_UPS, HELD_OUT, HELD_OUT_2, TUNED, Ask, Business
from dialplan import Config
from dialplan.profile import HttpTool, Profile
from models.llm.base import Message
from models.priority import Cancel
from models.registry import ModelCache
from models.scheduler import Scheduler

USES_CONFIG = True


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Register the ``bench lookups`` options on ``p``."""
    p.add_argument("--profile", default="default", help="whose LLM answers")
    p.add_argument("--model", default="", help="over the profile's llm.model")
    p.add_argument("--split", choices=("all", "tuned", "held-out", "held-out-2"),
                   default="all")
    p.add_argument("--follow-ups-only", action="store_true", help="only the follow-up turns")
    p.add_argument("--no-context", action="store_true",
                   help="route follow-ups on their own words (what the previous turn is worth)")


def toolbox(b: Business) -> Toolbox:
    http = {t.name: HttpTool(t.description, "http://127.0.0.1:9/unused", t.parameters,
                             read_only=True) for t in b.tools}
    return Toolbox(Profile(name=b.name, system_prompt=b.persona, tools=tuple(http),
                           http_tools=http))


def alone(llm, messages: list[Message]) -> tuple[str | None, dict, float]:
    """The model's own choice: (tool or None, its arguments, seconds to the call or end)."""
    started = time.monotonic()
    scanner, stream = ToolCallScanner(), llm.stream(messages)
    call = None
    try:
        for piece in stream:
            _, call = scanner.push(piece)
            if call is not None:
                break
        if call is None:
            _, call = scanner.flush()
    finally:
        stream.close()
    took = time.monotonic() - started
    return (call.name, call.arguments, took) if call is not None else (None, {}, took)


def right(ask: Ask, tool: str | None, args: dict) -> bool:
    if tool != ask.tool:
        return False
    return not ask.argument or any(ask.argument in str(v).lower() for v in args.values())


def run_split(llm, businesses: tuple[Business, ...], progress, show: bool,
              follow_ups: dict[str, tuple[Ask, ...]] | None = None,
              context: bool = True) -> dict:
    """Both ways on every question, counted.

    ``show``: name the tools chosen in the progress lines (never for the held-out split, whose
    failures are not to be read while tuning). ``follow_ups``: instead of the businesses'
    own questions, these, by business name, each after its call's previous turn.
    """
    out = {"turns": 0, "alone": 0, "routed": 0, "tool_turns": 0, "routed_tool": 0,
           "alone_tool": 0, "none_turns": 0, "routed_none": 0, "alone_none": 0,
           "alone_s": [], "routed_s": [], "route_s": [], "routed_chosen": 0}
    for b in businesses:
        box = toolbox(b)
        router = LookupRouter(b.persona, box.lookups())
        system = box.system_prompt(b.persona)
        asks = b.asks if follow_ups is None else follow_ups.get(b.name, ())
        for ask in asks:
            earlier = ([Message("user", ask.before[0]), Message("assistant", ask.before[1])]
                       if ask.before else [])
            messages = [Message("system", system), *earlier, Message("user", ask.words)]
            tool, args, took = alone(llm, messages)
            started = time.monotonic()
            chosen = route(llm, router, ask.words, Cancel(),
                           before=ask.before[0] if ask.before and context else "")
            out["route_s"].append(time.monotonic() - started)
            if chosen is None:
                r_tool, r_args, r_took = tool, args, took
            else:
                filled = fill_arguments(llm, messages, chosen, box.parameters(chosen), Cancel())
                r_tool, r_args = (chosen, filled) if filled is not None else (tool, args)
                r_took = time.monotonic() - started
            ok_alone, ok_routed = right(ask, tool, args), right(ask, r_tool, r_args)
            out["turns"] += 1
            out["alone"] += ok_alone
            out["routed"] += ok_routed
            kind = "tool" if ask.tool else "none"
            out[f"{kind}_turns"] += 1
            out[f"alone_{kind}"] += ok_alone
            out[f"routed_{kind}"] += ok_routed
            if ask.tool:
                out["routed_chosen"] += r_tool == ask.tool
            if ask.tool:
                out["alone_s"].append(took)
                out["routed_s"].append(r_took)
            seen = (f" ({tool} / {r_tool}, {ask.words})" if show else "")
            progress(f"{b.name}: alone {'ok' if ok_alone else 'WRONG'}, routed "
                     f"{'ok' if ok_routed else 'WRONG'}{seen}")
    return out


def _p50(xs: list[float]) -> str:
    xs = sorted(xs)
    return f"{xs[len(xs) // 2]:.2f}" if xs else "-"


def _row(split: str, r: dict) -> list:
    return [
        split, r["turns"],
        f"{r['alone']}/{r['turns']}", f"{r['routed']}/{r['turns']}",
        f"{r['alone_tool']}/{r['tool_turns']}",
        f"{r['routed_tool']}/{r['tool_turns']} ({r['routed_chosen']} chosen)",
        f"{r['alone_none']}/{r['none_turns']}", f"{r['routed_none']}/{r['none_turns']}",
        f"{_p50(r['alone_s'])} / {_p50(r['routed_s'])}", _p50(r["route_s"])]


def run(args: argparse.Namespace, config: Config) -> int:
    options = config.profiles[args.profile].llm
    if args.model:
        options = dataclasses.replace(options, model=args.model)
    progress = progress_printer(Console(stderr=True))
    progress(f"loading {options.backend} {options.model}")
    llm = ModelCache(Scheduler()).llm(options)
    "".join(llm.complete([Message("user", "Say OK.")], 2))  # buffers committed before timing
    rows = []
    for split, businesses in (("tuned", TUNED), ("held-out", HELD_OUT),
                              ("held-out-2", HELD_OUT_2)):
        if args.split not in ("all", split):
            continue
        if not args.follow_ups_only:
            r = run_split(llm, businesses, progress, show=split == "tuned")
            rows.append(_row(split, r))
        if split in FOLLOW_UPS:
            r = run_split(llm, businesses, progress, show=split == "tuned",
                          follow_ups=FOLLOW_UPS[split], context=not args.no_context)
            rows.append(_row(f"{split}, follow-ups", r))
    print(markdown_header(f"bench lookups ({llm.model_name})"))
    print()
    print(markdown_table(
        ["split", "turns", "right: model alone", "right: routed", "look-ups: alone",
         "look-ups: routed", "no tool: alone", "no tool: routed",
         "to the call p50 s: alone / routed", "routing p50 s (every turn)"], rows,
        right=range(1, 10)))
    return 0
