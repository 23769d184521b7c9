"""``callagent bench llm``: GGUF models (or quantizations of one) compared on speed and agreement.

The first model is the reference. For each of the spoken library questions, with the profile's
persona cached, every model evaluates the question's turn (the time to its first token) and
then the reference's greedy reply one token at a time (decode steps); the others are fed the
reference's tokens, so they are judged on the same text. At each reply position the next-token
distributions are compared with the reference's: KL divergence and whether the top token is
the same (llama.cpp's own measure of what a quantization costs). Models take turns question by
question, so a noisy machine slows them alike. No pass/fail.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
from rich.console import Console
from rich.progress import Progress
from rich.table import Table

from bench.header import markdown_header, rich_to_markdown
from bench.wer.questions import QUESTIONS
from db.stats import percentile
from dialplan import Config
from models import catalog
from models.llm.base import Message, shared_prefix

USES_CONFIG = True
DEFAULT_MODELS = ("qwen2.5-1.5b-instruct", "qwen2.5-1.5b-instruct-iq4_nl")
MAX_REPLY_TOKENS = 40


@dataclass
class ModelResult:
    """One model's figures over all questions."""

    model: str
    load_s: float
    prompt_ms_per_token: list[float] = field(default_factory=list)
    first_token_ms: list[float] = field(default_factory=list)
    step_ms: list[float] = field(default_factory=list)
    kld: list[float] = field(default_factory=list)
    same_top: list[bool] = field(default_factory=list)
    same_reply: int = 0
    """Questions where its own greedy choice was the reference's token at every position."""


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Register the ``bench llm`` options on ``p``."""
    p.add_argument("--models", nargs="+", default=list(DEFAULT_MODELS),
                   help="bundled names or .gguf paths; the first is the reference")
    p.add_argument("--profile", default="default", help="whose system prompt is the persona")
    p.add_argument("--questions", type=int, default=len(QUESTIONS))
    p.add_argument("--threads", type=int, default=0, help="0: the profile's llm.threads")
    p.add_argument("--json", action="store_true", help="print the raw figures as JSON too")


class _Runner:
    """One model in a context of its own, its persona evaluated once."""

    def __init__(self, name: str, threads: int, system_prompt: str):
        import llama_cpp as lc
        from llama_cpp import Llama

        from models.llm.llama_vocab import ChatVocab

        self.lc = lc
        started = time.monotonic()
        self.llm = Llama(str(catalog.resolve(name, "llm")), n_ctx=2048, n_threads=threads,
                         n_threads_batch=threads, verbose=False)
        self.load_s = time.monotonic() - started
        self.n_vocab = self.llm.n_vocab()
        self.vocab = ChatVocab(lc, self.llm.model, name)
        self.system = Message("system", system_prompt)
        # Every question's prompt starts with the persona and the user turn's opening tokens.
        hi = self.vocab.prompt([self.system, Message("user", "Hi")])
        self.persona = shared_prefix(hi, self.vocab.prompt([self.system, Message("user", "No")]))
        self.llm.eval(hi[:self.persona])

    def logits(self) -> np.ndarray:
        row = self.lc.llama_get_logits_ith(self.llm.ctx, -1)
        x = np.ctypeslib.as_array(row, shape=(self.n_vocab,)).astype(np.float64)
        x -= x.max()
        return x - np.log(np.exp(x).sum())

    def turn(self, question: str) -> tuple[float, int, np.ndarray]:
        """Evaluate the question's turn after the persona: (seconds, tokens, log-probs)."""
        prompt = self.vocab.prompt([self.system, Message("user", question)])
        self.llm.n_tokens = self.persona
        new = prompt[self.llm.n_tokens:]
        started = time.perf_counter()
        self.llm.eval(new)
        return time.perf_counter() - started, len(new), self.logits()

    def step(self, token: int) -> tuple[float, np.ndarray]:
        started = time.perf_counter()
        self.llm.eval([token])
        return time.perf_counter() - started, self.logits()

    def is_end(self, token: int) -> bool:
        return self.vocab.is_end(token)


def run(args: argparse.Namespace, config: Config) -> int:
    profile = config.profiles[args.profile]
    threads = args.threads or profile.llm.threads
    console = Console(stderr=True)
    runners = []
    for name in args.models:
        console.print(f"loading {name}")
        runners.append(_Runner(name, threads, profile.system_prompt))
    for name, r in zip(args.models[1:], runners[1:], strict=True):
        if r.n_vocab != runners[0].n_vocab:
            console.print(f"[red]{name} has {r.n_vocab} tokens, {args.models[0]} "
                          f"{runners[0].n_vocab}[/]: only models of one tokenizer compare")
            return 2
    results = [ModelResult(name, r.load_s) for name, r in zip(args.models, runners, strict=True)]
    questions = QUESTIONS[:args.questions]
    with Progress(console=console) as bar:
        task = bar.add_task("questions", total=len(questions))
        for q in questions:
            _question(q, runners, results)
            bar.advance(task)
    if args.json:
        print(json.dumps([asdict(r) for r in results]))
    print(markdown_header("bench llm") + "\n")
    print(rich_to_markdown(_table(results, profile.name, threads, len(questions))))
    return 0


def _turn(runner: _Runner, res: ModelResult, question: str) -> np.ndarray:
    """The question's turn, timed into ``res``; the first reply token's log-probs."""
    seconds, n, logp = runner.turn(question)
    res.first_token_ms.append(seconds * 1000)
    res.prompt_ms_per_token.append(seconds * 1000 / n)
    return logp


def _question(question: str, runners: list[_Runner], results: list[ModelResult]) -> None:
    ref, others, res = runners[0], runners[1:], results[0]
    ref_logps, reply = [_turn(ref, res, question)], []
    while len(reply) < MAX_REPLY_TOKENS:
        token = int(np.argmax(ref_logps[-1]))
        if ref.is_end(token):
            break
        reply.append(token)
        seconds, logp = ref.step(token)
        res.step_ms.append(seconds * 1000)
        ref_logps.append(logp)
    res.same_reply += 1
    for runner, res in zip(others, results[1:], strict=True):
        logps = [_turn(runner, res, question)]
        for token in reply:
            seconds, logp = runner.step(token)
            res.step_ms.append(seconds * 1000)
            logps.append(logp)
        pairs = list(zip(ref_logps, logps, strict=True))
        same = [int(np.argmax(a)) == int(np.argmax(b)) for a, b in pairs]
        res.same_top += same
        res.same_reply += all(same)
        res.kld += [float(np.sum(np.exp(a) * (a - b))) for a, b in pairs]


def _table(results: list[ModelResult], profile: str, threads: int, questions: int) -> Table:
    table = Table(title=f"bench llm: {questions} questions, persona of profile {profile}, "
                        f"{threads} threads; agreement with {Path(results[0].model).name}")
    for col in ("model", "load s", "prompt ms/tok", "1st token p50/p95", "step ms",
                "KLD mean/p99", "same top", "same reply"):
        table.add_column(col)
    for r in results:
        ref = r is results[0]
        table.add_row(
            Path(r.model).name, f"{r.load_s:.1f}",
            f"{statistics.median(r.prompt_ms_per_token):.1f}",
            f"{percentile(r.first_token_ms, 50):.0f} / {percentile(r.first_token_ms, 95):.0f} ms",
            f"{statistics.median(r.step_ms):.1f}" if r.step_ms else "-",
            "-" if ref else f"{np.mean(r.kld):.4f} / {np.percentile(r.kld, 99):.3f}",
            "-" if ref else f"{100 * np.mean(r.same_top):.1f} %",
            f"{r.same_reply}/{questions}",
        )
    return table
