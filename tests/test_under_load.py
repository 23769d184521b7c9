"""A profile's cheaper ``under_load`` profile answers turns while the CPU is overloaded.

Real models (Whisper base for the profile, tiny.en for its under-load profile, SmolLM2 for
both), a real session through ``simulate``; the measured load is what the session is handed
(the server hands it the scheduler's). The call log names the model and the profile used.
"""

from __future__ import annotations

import pytest

from agent.bench.samples import spoken
from agent.simulate import simulate
from db.records import EventRecord
from dialplan import Dialplan, parse_config
from dialplan.config import ConfigError

pytestmark = pytest.mark.model

LLM = {"model": "smollm2-135m", "max_tokens": 16, "threads": 1}
CONFIG = {
    "llm": LLM,
    "profiles": {
        "main": {"asr": {"model": "base"}, "under_load": "busy",
                 "limits": {"under_load_after_s": 1.0}},
        "busy": {"asr": {"model": "tiny.en"}},
    },
    "dialplan": {"100": "main"},
}


@pytest.fixture(scope="module")
def config():
    return parse_config(CONFIG)


@pytest.mark.parametrize("waited_s, model, event", [(0.2, "base", False), (2.5, "tiny.en", True)])
def test_the_cheaper_profile_answers_only_while_first_audio_work_waits_too_long(
        stage_cache, config, waited_s, model, event):
    main, busy = config.profiles["main"], config.profiles["busy"]
    assert Dialplan.from_config(config).fallback(main) == busy
    audio, rate = spoken("What time does the library open on Saturday?")
    call = simulate(audio, rate, main, stage_cache.stages(main), fast=True, greeting=False,
                    under_load=(busy, stage_cache.stages(busy)), waiting=lambda: waited_s)
    (turn,) = call.turns
    assert turn.asr_model == model and turn.reply_text and not turn.unanswered
    notes = [r.detail for r in call.records if isinstance(r, EventRecord)
             and r.kind == "under-load"]
    assert notes == (["turn 0: answered by profile busy"] if event else [])


def test_the_under_load_profile_is_preloaded_and_must_exist():
    plan = Dialplan.from_config(parse_config(CONFIG))
    assert {p.name for p in plan.profiles()} == {"main", "busy"}
    bad = {**CONFIG, "profiles": {"main": {"under_load": "nope"}}}
    with pytest.raises(ConfigError, match=r"profiles\.main\.under_load: 'nope'"):
        parse_config(bad)
