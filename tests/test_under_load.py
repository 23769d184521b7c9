"""A profile's cheaper ``under_load`` profile answers turns while the CPU is overloaded.

Real models (Whisper base for the profile, tiny.en for its under-load profile, SmolLM2 for
both), a real session through ``simulate``. Overloaded is either of two things: turns of other
calls still waiting for their first audio when the turn starts (the process's backlog, which
every call shares), or first-audio work that lately waited too long for the CPU (the measure
the session is handed; the server hands it the scheduler's). The call log names the model and
the profile used.
"""

from __future__ import annotations

import time
from dataclasses import replace

import numpy as np
import pytest

from agent.call.jobs import CallJobs
from agent.call.worker import TurnWorker
from agent.simulate import simulate
from agent.turn.backlog import Backlog
from agent.turn.load import LoadPolicy
from agent.turn.runner import TurnRunner
from db.records import EventRecord
from dialplan import Dialplan, parse_config
from dialplan.config import ConfigError
from testkit.samples import spoken

LLM = {"model": "smollm2-135m", "max_tokens": 16, "threads": 1}
CONFIG = {
    "llm": LLM,
    "profiles": {
        "main": {"asr": {"model": "base"}, "under_load": "busy",
                 "system_prompt": "You answer for the town library.",
                 "tts": {"speed": 1.1}, "limits": {"under_load_after_s": 1.0}},
        "busy": {"asr": {"model": "tiny.en"}, "system_prompt": "You are a pirate.",
                 "tts": {"speed": 0.9}},
    },
    "dialplan": {"100": "main"},
}


class _Call:
    """A call's worker stands for its call (the backlog keeps calls by weak reference)."""


@pytest.fixture(scope="module")
def config():
    return parse_config(CONFIG)


@pytest.mark.model
@pytest.mark.tool
@pytest.mark.parametrize("waited_s, ahead, speaking, model, event", [
    (0.2, 0, False, "base", False),      # idle
    (2.5, 0, False, "tiny.en", True),    # first-audio work has lately waited 2.5 s for the CPU
    (0.2, 1, False, "tiny.en", True),    # another call's turn still waits for its first audio
    (0.2, 0, True, "tiny.en", True),     # another caller is still asking (a burst of callers)
])
def test_the_cheaper_models_answer_only_while_the_agent_is_overloaded(
        stage_cache, config, waited_s, ahead, speaking, model, event):
    main = config.profiles["main"]
    busy = Dialplan.from_config(config).fallback(main)
    audio, rate = spoken("What time does the library open on Saturday?")
    other_call = _Call()
    load = LoadPolicy(stage_cache.models.scheduler)
    load.measured_wait = lambda window_s=30.0: waited_s
    tickets = [load.backlog.enter(other_call)[0] for _ in range(ahead)]
    load.backlog.speaking(other_call, speaking)
    try:
        call = simulate(audio, rate, main, stage_cache.stages(main), fast=True, greeting=False,
                        under_load=(busy, stage_cache.stages(busy)), load=load)
    finally:
        for t in tickets:
            load.backlog.leave(t)
        load.backlog.speaking(other_call, False)
    (turn,) = call.turns
    assert turn.asr_model == model and turn.reply_text and not turn.unanswered
    notes = [r.detail for r in call.records if isinstance(r, EventRecord)
             and r.kind == "under-load"]
    assert notes == (["turn 0: answered by profile main/busy"] if event else [])
    assert len(load.backlog) == 0  # the turn left the backlog once heard


@pytest.mark.unit
def test_what_the_under_load_model_turns_away_the_profiles_own_model_answers(config):
    """What the under-load 0.5B refuses (bench answers), the profile's own model answers.

    The caller hears one answer, and the call log says why the profile's own model gave it.
    """
    from fakes import FakeASR, FakeLLM, fake_stages, silence, tone

    main = config.profiles["main"]
    busy = Dialplan.from_config(config).fallback(main)
    own = fake_stages(asr=FakeASR(["when do you open?"]), llm=FakeLLM("We open at ten."))
    cheap = fake_stages(own.llm.scheduler, asr=FakeASR(["when do you open?"]),
                        llm=FakeLLM("We're sorry, but I can't assist with that."))
    load = LoadPolicy(own.llm.scheduler)
    load.measured_wait = lambda window_s=30.0: 2.5  # overloaded: the cheaper models answer
    caller = np.concatenate([tone(0.8), silence(1.5)]).astype(np.float32) / 32768
    call = simulate(caller, 8000, main, own, greeting=False, under_load=(busy, cheap), load=load)
    (turn,) = call.turns
    assert turn.reply_text == "We open at ten." and not turn.unanswered
    events = {r.kind: r.detail for r in call.records if isinstance(r, EventRecord)}
    assert events["under-load"] == "turn 0: answered by profile main/busy"
    assert events["unfounded"] == ("turn 0: not said: We're sorry, but I can't assist with "
                                   "that. (refuses: asked smollm2-135m)")


@pytest.mark.model
def test_a_turn_under_load_says_the_profiles_phrases_from_its_cache(stage_cache, config):
    """Rendered on first use, "repeat" waited for the CPU slot on a turn's critical path."""
    main = config.profiles["main"]
    busy = Dialplan.from_config(config).fallback(main)
    runner = TurnRunner(stage_cache.stages(main), main)
    speak = runner.prepare_phrases()
    jobs = CallJobs(runner.stages.llm.scheduler, post=lambda m: None)
    worker = TurnWorker(runner, [], playout=None, post=lambda m: None, jobs=jobs,
                        now=time.monotonic, load=LoadPolicy(jobs.scheduler),
                        under_load=(busy, stage_cache.stages(busy)))
    try:
        for text in (main.repeat, main.apology):
            assert worker.under_load.speak(text) is speak(text)
    finally:
        worker.close()


@pytest.mark.unit
def test_under_load_changes_the_models_not_the_agent_the_caller_hears(config):
    main, busy = config.profiles["main"], config.profiles["busy"]
    cheap = Dialplan.from_config(config).fallback(main)
    assert (cheap.asr, cheap.llm) == (busy.asr, busy.llm)
    assert cheap == replace(main, name="main/busy", asr=busy.asr, llm=busy.llm, under_load="")
    assert cheap.system_prompt == "You answer for the town library." and cheap.tts.speed == 1.1


@pytest.mark.unit
def test_a_turn_counts_only_other_calls_turns_ahead_of_it_until_it_is_heard():
    backlog, a, b = Backlog(), object(), object()
    t1, ahead1 = backlog.enter(a)
    t2, ahead2 = backlog.enter(a)       # the same call's own earlier turn is not ahead of it
    t3, ahead3 = backlog.enter(b)
    assert (ahead1, ahead2, ahead3) == (0, 0, 2)
    backlog.leave(t1)
    backlog.leave(t1)                   # heard, then done: leaving twice is harmless
    assert backlog.enter(b)[1] == 1 and len(backlog) == 3
    backlog.leave(t2)
    backlog.leave(t3)


@pytest.mark.unit
def test_other_calls_are_busy_while_their_turn_is_open_or_their_caller_speaks():
    backlog, a, b, c = Backlog(), _Call(), _Call(), _Call()
    backlog.speaking(a, True)
    assert backlog.busy_others(a) == 0 and backlog.busy_others(b) == 1
    ticket, ahead = backlog.enter(b)
    assert ahead == 0                   # a speaking caller has no turn ahead of b's yet
    backlog.speaking(b, True)           # b's open turn and speech count once
    assert backlog.busy_others(c) == 2 and backlog.busy_others(a) == 1
    backlog.speaking(a, False)
    backlog.leave(ticket)
    assert backlog.busy_others(c) == 1  # b still speaks
    backlog.part(b)                     # its call ended mid-word
    assert backlog.busy_others(c) == 0


@pytest.mark.unit
def test_the_under_load_profile_is_preloaded_and_must_exist():
    plan = Dialplan.from_config(parse_config(CONFIG))
    assert {p.name for p in plan.profiles()} == {"main", "main/busy"}
    bad = {**CONFIG, "profiles": {"main": {"under_load": "nope"}}}
    with pytest.raises(ConfigError, match=r"profiles\.main\.under_load: 'nope'"):
        parse_config(bad)
