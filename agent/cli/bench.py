"""``callagent bench NAME``: benchmarks that print numbers and ratios (one module each).

Only the bench named on the command line is imported: a bench brings its own dependencies
(jiwer, G.722, sipp harnesses) that no other command needs, and every start of ``serve`` or
``call`` would pay for importing all of them.
"""

from __future__ import annotations

import argparse
import importlib

from agent.cli import options as cliopts

BENCHES = {
    "pipeline": ("bench.pipeline", "speech loop on 5 fixed utterances, p50/p95 per stage"),
    "asr": ("bench.asr", "ASR backends: load time, latency, RTF, optimization speedups"),
    "wer": ("bench.wer", "ASR word error rate on 8 kHz phone audio per model and voice"),
    "llm": ("bench.llm", "GGUF models or quantizations: prompt and decode speed, agreement "
                               "with the first (KL divergence, same top token)"),
    "tts": ("bench.tts", "TTS voices: time to first audio, RTF, round-trip WER on the line"),
    "tools": ("bench.tools", "tool-call accuracy on spoken requests through the line: "
                                   "right tool and target, false claims, added latency"),
    "lookups": ("bench.lookups", "look-up tools on typed questions to 6 businesses: the model "
                                 "alone against the router choosing from the words"),
    "answers": ("bench.answers", "right answers to spoken questions in many voices: facts, "
                                       "\"I don't know\" instead of invented ones, WER, latency"),
    "prefix": ("bench.prefix", "a turn's first token and decode speed as the facts held in "
                               "the cached prefix grow"),
    "call": ("bench.call", "voice-to-voice on the wire with sipp, 1 and 4 calls"),
    "flood": ("bench.flood", "voice-to-voice of allowed callers while one source floods "
                                   "INVITEs, beside the quiet figure"),
    "amd": ("bench.amd", "answering-machine detection on spoken greetings through the "
                               "line: machines found, people hung up on, decision time"),
    "summary": ("bench.summary", "post-call notes on 16 scripted calls: each field "
                                       "right, summary checks, time per summary, no-grammar "
                                       "baseline"),
    "soak": ("bench.soak", "N unruly sipp calls against a supervised serve: crashes, "
                                 "open records, RSS"),
}


TAKES_ARGV = True
"""``add_parser`` is given the command line (:func:`agent.cli.main.build_parser`)."""


def add_parser(sub: argparse._SubParsersAction, argv: list[str] | None = None) -> None:
    p = sub.add_parser("bench", help="benchmarks (numbers, not pass/fail)")
    bsub = p.add_subparsers(dest="bench", required=True)
    wanted = _named(argv)
    for name, (module, help_text) in BENCHES.items():
        bp = bsub.add_parser(name, help=help_text)
        if wanted is not None and name != wanted:
            continue  # not run: its options are not needed to parse this command line
        mod = _load(name, module)
        mod.add_arguments(bp)
        if getattr(mod, "USES_CONFIG", False):
            cliopts.add_common(bp, db=False)
        bp.set_defaults(func=_entry(mod))


BENCH_EXTRA = ("jiwer", "G722")
"""What ``pip install callagent[bench]`` adds: only the benches import it."""


def _load(name: str, module: str):
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as e:
        if e.name in BENCH_EXTRA:
            raise SystemExit(f"callagent bench {name}: needs {e.name}, of the bench extra: "
                             f"pip install 'callagent[bench]' (make test installs it)") from e
        raise


def _named(argv: list[str] | None) -> str | None:
    """The bench ``argv`` runs ("" for none: ``bench --help``); None: unknown, import all."""
    if argv is None:
        return None
    words = [a for a in argv if not a.startswith("-")]
    if "bench" not in words:
        return ""
    after = words[words.index("bench") + 1:]
    return after[0] if after else ""


def _entry(mod):
    """A bench's ``run``, given the loaded config when it declares ``USES_CONFIG``."""

    def run(args: argparse.Namespace) -> int:
        if getattr(mod, "USES_CONFIG", False):
            return mod.run(args, cliopts.load(args))
        return mod.run(args)

    return run
