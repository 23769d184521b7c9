"""llama.cpp with every call's reply in one batch: one context, one sequence per call.

The llama-cpp backend gives each call a context of its own, and a decode step runs one
sequence: with 4 calls talking, their steps run one after another, each paying for a full pass
over the weights. Here one context holds ``llm.contexts`` sequences, each with a KV cache of
its own (it keeps its call's conversation, so a call's next turn finds its history cached; the
system prompt is evaluated once and copied into the others), and each step decodes every
sequence that is waiting for a token in one ``llama_decode``: a step of 4 sequences yields
more tokens a second than steps of one, and 4 prompts prefill together sooner than one after
another (bench llm).

Unlike the xllamacpp engine, each batched step is a job of the process scheduler, at the
priority of the most urgent reply in it, so ASR and TTS still go first when a caller waits for
them. The steps run on one engine thread, which pushes each call's tokens to its loop as it
samples them (a one-off request's reader waits for its own: :mod:`.oneoffs`).
Who rides along in a step: :mod:`models.llm.riders`. One reply on its sequence:
:mod:`models.llm.llama_batch.generation`, which reaches into this engine's private state
(``_cond``, ``_lc``, ``_finish``): the two stay inside this package.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator

from dialplan.options import LLMOptions
from models import catalog
from models.errors import ModelMissingError
from models.llm import tile
from models.llm.base import LLM, Message, NoPieces, Piece, shared_prefix
from models.llm.grammar import GrammarPick
from models.llm.llama_batch.generation import Generation, Seq, worth
from models.llm.llama_batch.oneoffs import OneOffs
from models.llm.llama_vocab import ChatVocab
from models.llm.riders import TILE, members
from models.priority import Cancellable, Priority, current_cancel, watching
from models.scheduler import Scheduler

BACKGROUND_CHUNK = 2
"""Prompt tokens a background step evaluates, all sequences' together: a step is not
preempted, and a caller whose speech ends as one starts waits for it before their turn's ASR.
Steps of 2 cost no more a token than steps of 4 and are much shorter to wait for; steps of 8
longer still (bench call, 1 call). One token a step would cost a whole decode step each."""
N_BATCH = 512
"""Tokens per ``llama_decode`` (a longer prompt is prefilled over several steps)."""
COPY_MIN_TOKENS = 64
"""A prompt is started from another sequence's cache only when that saves this many tokens:
below it, reading them costs about what the copy of a whole cache does."""
NARROW_FEED = 1
"""A step runs on one core beside another caller's job only while each of its replies feeds
this many tokens (decoding, not reading a prompt), or beside a less urgent job (it would wait
for that one's end, the core idle). On one core a decode step is a little slower than on
two but a prompt much slower, so reading prompts side by side got no more work done in all
than one after another, and a turn's prompt is on its way to first audio (bench call, 4 at
once, Qwen 0.5B)."""


class BatchedLlamaLLM(OneOffs, LLM):
    """A GGUF chat model whose calls decode together, one scheduler job per batched step."""

    scheduled = False  # the engine takes one scheduler job per batched step itself
    can_prefill = True
    constrains = True
    continues = True
    weighs = True
    reads_in_short_steps = True

    def __init__(self, options: LLMOptions, scheduler: Scheduler | None = None):
        self.scheduler = scheduler  # before the engine thread starts: its steps are its jobs
        try:
            import llama_cpp as lc
        except ImportError as e:
            raise ModelMissingError(
                "llama-cpp-python missing: pip install llama-cpp-python==0.3.36") from e
        self.options = options
        self.model_name = options.model
        path = catalog.resolve(options.model, "llm")
        self._lc = lc
        from llama_cpp._logger import set_verbose

        set_verbose(False)  # llama.cpp's load and graph logs, as Llama(verbose=False)
        lc.llama_backend_init()
        self._model = lc.llama_model_load_from_file(str(path).encode(),
                                                    lc.llama_model_default_params())
        if not self._model:
            raise ModelMissingError(f"llm.model {path}: not a loadable .gguf file")
        slots = max(1, options.contexts)
        cp = lc.llama_context_default_params()
        cp.n_ctx = options.n_ctx * slots
        cp.n_batch = cp.n_ubatch = N_BATCH
        cp.n_seq_max = slots
        cp.n_threads = cp.n_threads_batch = options.threads
        # A cache per sequence: in one shared cache a reply's attention spans the other
        # calls' cells too, and greedy replies came out different alone and batched.
        cp.kv_unified = False
        self._ctx = lc.llama_init_from_model(self._model, cp)
        if not self._ctx:
            raise RuntimeError(f"llama.cpp: no context of {cp.n_ctx} tokens for {path}")
        self._mem = lc.llama_get_memory(self._ctx)
        self.vocab = ChatVocab(lc, self._model, path)
        self._batch = lc.llama_batch_init(N_BATCH, 0, slots)
        self._seqs = [Seq(i) for i in range(slots)]
        self._cond = threading.Condition()
        self._active: list[Generation] = []
        self._ctx_lock = threading.Lock()  # held by a step, and by prime's cache copies
        self._primed: set[str] = set()
        self._tile_free: bool | None = None  # measured at the first prime (_measure_tile)
        self._n_threads = options.threads
        threading.Thread(target=self._engine, daemon=True, name="llm-batch").start()

    def count_tokens(self, text: str) -> int:
        return len(self.vocab.tokenize(text))

    def prompt_tokens(self, messages: list[Message]) -> list[int]:
        return self.vocab.prompt(messages)

    # -- requests

    def prime(self, system_prompt: str, spread: bool = True) -> None:
        """Evaluate the system prompt so first turns find it cached.

        The first time, one sequence evaluates it and every other empty one gets a copy of its
        cache; later, one sequence (a call's own) is primed. Another profile's prefix is not
        overwritten: a later prompt copies the sequence holding most of it (:meth:`_copy_prefix`).
        """
        with self._cond:
            first = spread and system_prompt not in self._primed
            self._primed.add(system_prompt)
        # At the caller's priority: the runner primes above background at start (a long
        # prefix read a couple of tokens a step took minutes), beside no call.
        gen = self._start(self.fit([Message("system", system_prompt), Message("user", "Hello")]))
        for _ in gen:
            break
        gen.close()
        if not first:
            return
        lc = self._lc
        with self._ctx_lock, self._cond:  # no step is decoding: each cache is what it holds
            for seq in self._seqs:
                # Only empty ones: another profile's primed prefix is kept (a process serves
                # several personas from one model).
                if not seq.busy and seq is not gen.seq and not seq.tokens:
                    # A copy between two sequences' caches is of the whole cache.
                    lc.llama_memory_seq_rm(self._mem, seq.id, -1, -1)
                    lc.llama_memory_seq_cp(self._mem, gen.seq.id, seq.id, -1, -1)
                    seq.tokens = list(gen.seq.tokens)
        self._measure_tile()

    def _measure_tile(self) -> None:
        """Whether riders fill steps to a whole tile on this model (:mod:`models.llm.tile`)."""
        seqs = self._seqs[:TILE]
        if self._tile_free is not None or len(seqs) < TILE:
            return  # measured once per engine; fewer sequences never make a tile
        with self.scheduler.job("llm", priority=Priority.BACKGROUND), self._ctx_lock, self._cond:
            if not any(s.busy or not s.tokens for s in seqs):
                self._threads(self.options.threads)
                self._tile_free = tile.measure(self._lc, self._ctx, self._mem, self._batch,
                                               seqs, self.model_name)

    def _stream_impl(self, messages: list[Message]) -> Iterator[Piece]:
        gen = self._start(self.fit(messages), cancel=current_cancel())
        return NoPieces() if gen is None else gen  # cancelled while no sequence was free

    def _start(self, messages: list[Message], prompt: list[int] | None = None,
               wait: bool = True, prefill: bool = False,
               cancel: Cancellable | None = None, max_tokens: int | None = None,
               grammar: GrammarPick | None = None,
               alone: Callable[[], bool] | None = None) -> Generation | None:
        prompt = self.prompt_tokens(messages) if prompt is None else prompt
        with watching(cancel, self._wake), self._cond:
            while True:
                if cancel is not None and cancel.is_set():
                    return None
                # The free sequence sharing the most with this prompt (a call's own history),
                # among equals the one holding the least (a primed one before another
                # call's); one whose reply is ending is waited for if it is the best.
                ready = [s for s in self._seqs if not s.busy or (s.gen and s.gen.done)]
                if ready:
                    seq = max(ready, key=lambda s: (worth(s, prompt, self._seqs), -len(s.tokens)))
                    if not seq.busy:
                        break
                elif not wait:  # every sequence is in a live reply
                    return None
                self._cond.wait()  # a sequence freed (``_finish``), or the cancel was set
            seq.busy = True
            gen = Generation(self, seq, prompt, prefill, cancel, max_tokens, grammar, alone)
            seq.gen = gen
            self._active.append(gen)
            self._cond.notify_all()
        return gen

    def _wake(self) -> None:
        """A cancel's wake-up (its setter's thread): ``_cond``, an RLock, held to notify.

        A pushed reply it cancelled ends here (its end is posted to its reader).
        """
        with self._cond:
            self._settle()
            self._cond.notify_all()

    def _finish(self, gen: Generation) -> None:
        """Called with ``_cond`` held: the reply ended; its sequence is free again.

        Not while a step is decoding it: the engine frees it after the step (its sequence's
        tokens, and so what the next request finds cached, are known only then).
        """
        gen.done = True
        gen.ended()
        if gen in self._active and not gen.stepping:
            self._active.remove(gen)
            gen.seq.busy, gen.seq.gen = False, None
            gen.free()
        self._cond.notify_all()

    def _settle(self) -> None:
        """Called with ``_cond`` held: a pushed reply that failed or was cancelled ends now.

        Nobody reads it to find out: its reader waits for its end.
        """
        for g in list(self._active):
            if g.put is not None and not g.done and (g.error is not None or g.cancelled):
                self._finish(g)

    # -- the engine

    def _engine(self) -> None:
        while True:
            with self._cond:
                while not any(g.wanting and g.feed for g in self._active):
                    self._cond.wait()
            try:
                narrow, patient = self._narrow()
                with self.scheduler.job("llm", priority=self._top_rank, narrow=narrow,
                                        patient=patient), self._ctx_lock:
                    self._threads(self.scheduler.cores() or self.options.threads)
                    self._step(prompts_narrow=patient)
            except Exception as e:  # the replies waiting for it fail; the engine goes on
                with self._cond:
                    for g in self._active:
                        if g.wanting:
                            g.error = e
                    self._settle()
                    self._cond.notify_all()

    def _narrow(self) -> tuple[bool, bool]:
        """Whether the next step may run narrow, and whether it would rather not (patient).

        Urgent steps may; one that reads a prompt would rather have both cores.
        """
        if self.options.threads <= 1:
            return False, False
        with self._cond:
            feeds = [len(g.feed) for g in self._active
                     if g.wanting and g.feed and g.rank()[0] < Priority.BACKGROUND]
        return bool(feeds), bool(feeds) and max(feeds) > NARROW_FEED

    def _threads(self, n: int) -> None:
        """Decode on ``n`` threads: one when the scheduler runs this step beside another job."""
        if n != self._n_threads:
            self._lc.llama_set_n_threads(self._ctx, n, n)
            self._n_threads = n

    def _top_rank(self) -> tuple[int, float]:
        with self._cond:
            ranks = [g.rank() for g in self._active if g.wanting]
        return min(ranks) if ranks else (int(Priority.BACKGROUND), 0.0)

    def _members(self) -> list[Generation]:
        return members(sorted(((g.rank(), g) for g in self._active if g.wanting and g.feed),
                              key=lambda rg: rg[0]), self._tile_free is not False)

    def _copy_prefix(self, g: Generation) -> None:
        """Start ``g`` from another sequence's cache where that one holds more of its prompt.

        Called in a step, before it decodes (``_ctx_lock`` and ``_cond`` held). A profile's
        prefix (persona, facts, tools) is long; a second caller of the same profile, or one
        whose sequence another profile's call took, would read all of it again. A copy of a
        whole sequence's cache is a memory copy; what it holds past the shared prefix is
        dropped after.
        """
        limit = len(g.prompt) - (0 if g.prefill_only else 1)
        best = max((s for s in self._seqs if s is not g.seq),
                   key=lambda s: shared_prefix(s.tokens, g.prompt), default=None)
        n = 0 if best is None else min(shared_prefix(best.tokens, g.prompt), limit)
        if n - g.pos < COPY_MIN_TOKENS:
            return
        lc = self._lc
        lc.llama_memory_seq_rm(self._mem, g.seq.id, -1, -1)
        lc.llama_memory_seq_cp(self._mem, best.id, g.seq.id, -1, -1)
        g.seq.tokens = list(best.tokens)
        g.pos = g.cached = n
        g.feed = list(g.prompt[n:])

    def _step(self, prompts_narrow: bool = False) -> None:
        """One ``llama_decode`` of the most urgent replies' next tokens (and riders).

        On one core a prompt that came while the step waited goes to the next step, unless
        the step was asked for with its prompt (``prompts_narrow``): it got the core because
        a less urgent job holds the other.
        """
        lc = self._lc
        with self._cond:
            members = self._members()
            if self.scheduler.cores() == 1 and not prompts_narrow:
                members = [g for g in members if len(g.feed) <= NARROW_FEED] or members
            for g in members:
                g.stepping = True
                if g.fresh:  # drop what the sequence holds past the shared prefix
                    self._copy_prefix(g)
                    lc.llama_memory_seq_rm(self._mem, g.seq.id, g.pos, -1)
                    del g.seq.tokens[g.pos:]
                    g.fresh = False
        batch, n, outputs = self._batch, 0, []
        # Background prefill in short steps, all sequences' together: a step is not
        # preempted, and a caller's first-audio work may queue behind it. Not while no
        # caller could (a reply's ``alone``: no call is up).
        background, room, takes = BACKGROUND_CHUNK, N_BATCH, []
        for g in members:  # most urgent first: it gets the room
            idle = g.rank()[0] >= Priority.BACKGROUND and not (g.alone and g.alone())
            take = g.feed[:min(background if idle else N_BATCH, room)]
            if not take:
                continue
            if idle:
                background -= len(take)
            room -= len(take)
            takes.append((g, take))
        # In ascending sequence order: with a cache per sequence llama.cpp cuts a batch into
        # micro-batches of consecutive ascending sequence ids, each a pass over all weights.
        # In rank order a step of 4 sequences took several passes, each costing a sorted
        # step's time.
        takes.sort(key=lambda gt: gt[0].seq.id)
        for g, take in takes:
            for i, token in enumerate(take):
                batch.token[n], batch.pos[n], batch.n_seq_id[n] = token, g.pos + i, 1
                batch.seq_id[n][0] = g.seq.id
                last = i == len(g.feed) - 1 and not g.prefill_only
                batch.logits[n] = last
                if last:
                    outputs.append((g, n))
                n += 1
            g.taken = len(take)
        batch.n_tokens = n
        ids = [g.seq.id for g, _ in takes]
        runs = sum(1 for i, s in enumerate(ids) if i == 0 or s != ids[i - 1] + 1)
        self.scheduler.note(f"tokens={n} sequences={len(members)} runs={runs}")
        try:
            rc = lc.llama_decode(self._ctx, batch) if n else 0
            if rc != 0:
                raise RuntimeError(f"llama_decode returned {rc}")
        except BaseException:
            with self._cond:
                for g in members:  # what the failed step fed is not in the cache
                    lc.llama_memory_seq_rm(self._mem, g.seq.id, g.pos, -1)
                    g.taken, g.stepping = 0, False
                    if g.done:
                        self._finish(g)
            raise
        with self._cond:
            for g in members:
                g.seq.tokens += g.feed[:g.taken]
                g.pos += g.taken
                del g.feed[:g.taken]
                g.taken, g.stepping = 0, False
                if g.prefill_only and not g.feed:
                    g.done = True
            for g, index in outputs:
                if not g.done:
                    try:
                        g.sampled(g.pick(self._ctx, index))
                    except Exception as e:  # this reply fails, not the others
                        g.error = e
            for g in members:
                if g.done:
                    self._finish(g)
            self._settle()
            self._cond.notify_all()
