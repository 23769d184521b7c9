"""``simulate`` is a call: the same audio gives the same turns in simulate and on a SIP call.

Each case builds one 8 kHz μ-law caller line, plays it with sipp (RTP) into a real
``callagent serve`` and through :func:`agent.simulate.simulate` into a real session in this
process, with the same profile and models (tiny.en + SmolLM2 + Kokoro), then compares the
turns each wrote to its call log. Also: ``simulate --format json`` prints exactly the rows the
call log holds.
"""

from __future__ import annotations

import json
import sqlite3

import numpy as np
import pytest

from agent.cli import main as cli
from agent.simulate import simulate
from agent.turn.runner import TurnRunner
from bench.scoring import wer
from db.records import EventRecord
from dialplan import parse_config
from models.audio import PHONE_RATE, pcm16_to_float, through_phone_line, ulaw_encode
from testkit.agentproc import free_port
from testkit.samples import spoken
from testkit.wire import scenario, sipp
from tests.sipp.harness import start_agent
from tests.waiting import wait_until

pytestmark = [
    pytest.mark.model,
    pytest.mark.sip,
    pytest.mark.tool,
    pytest.mark.needs("sipp", "espeak-ng"),
]

SYSTEM = ("You are the phone assistant of a public library. The library opens 10 am to 4 pm on "
          "Saturday. Answer in one short spoken sentence.")
GREETING = "Hello, this is the library assistant. How can I help you today?"
FAST = {"greeting": GREETING, "asr": {"model": "tiny.en"},
        "llm": {"model": "smollm2-135m", "max_tokens": 30, "threads": 1}}
PROFILES = f"""
[profiles.fast]
greeting = "{GREETING}"
asr = {{ model = "tiny.en" }}
llm = {{ model = "smollm2-135m", max_tokens = 30, threads = 1 }}
"""
QUESTION = "What time does the library open on Saturday?"
BOOKING = ("I would like to book a study room for", "two people on Saturday morning.")


@pytest.fixture(scope="module")
def profile():
    return parse_config({"system_prompt": SYSTEM, "profiles": {"fast": FAST},
                         "dialplan": {"101": "fast"}}).profiles["fast"]


@pytest.fixture(scope="module")
def stages(stage_cache, profile):
    return stage_cache.stages(profile)


@pytest.fixture(scope="module")
def greeting_s(stages, profile) -> float:
    return len(TurnRunner(stages, profile).speak(GREETING)) / PHONE_RATE


@pytest.fixture(scope="module")
def agent(tmp_path_factory):
    proc = start_agent(tmp_path_factory.mktemp("agent"), PROFILES, '"101" = "fast"',
                       max_calls=1)
    yield proc
    assert proc.stop() == 0, proc.log_text()[-2000:]


def line(*parts: str | float) -> np.ndarray:
    """Caller line audio (int16, 8 kHz, μ-law companded): text is spoken, numbers are silence."""
    out = []
    for part in parts:
        if isinstance(part, str):
            out.append(through_phone_line(*spoken(part)))
        else:
            out.append(np.zeros(int(part * PHONE_RATE), np.int16))
    return np.concatenate(out)


def over_sip(agent, pcm: np.ndarray, tmp_path) -> tuple[list[str], list[str]]:
    """Play ``pcm`` over RTP to the agent; its turns' transcripts and event kinds, from the DB."""
    raw = tmp_path / "caller.ulaw"
    raw.write_bytes(ulaw_encode(pcm).tobytes())
    before = len(agent.query("SELECT id FROM calls"))
    hold_ms = int(len(pcm) / PHONE_RATE * 1000) + 6000  # the reply plays out before the BYE
    xml = scenario("uac_stream", tmp_path / "s.xml", audio=raw, hold_ms=hold_ms)
    res = sipp(xml, "101", agent.port, free_port(), free_port(), timeout_s=hold_ms / 1000 + 30)
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-1000:]
    assert wait_until(lambda: len(agent.query(
        "SELECT id FROM calls WHERE ended_at IS NOT NULL")) > before, timeout=15)
    (call_id,) = agent.query("SELECT id FROM calls ORDER BY started_at DESC LIMIT 1")[0]
    turns = [t for (t,) in agent.query(
        "SELECT transcript FROM turns WHERE call_id = ? ORDER BY [index]", call_id)]
    kinds = [k for (k,) in agent.query("SELECT kind FROM events WHERE call_id = ?", call_id)]
    return turns, kinds


def simulated(pcm: np.ndarray, profile, stages) -> tuple[list[str], list[str]]:
    call = simulate(pcm16_to_float(pcm), PHONE_RATE, profile, stages, fast=True)
    kinds = [r.kind for r in call.records if isinstance(r, EventRecord)]
    return [t.transcript for t in call.turns], kinds


def same_turns(sip: list[str], sim: list[str], reference: str) -> None:
    assert len(sip) == len(sim) == 1, (sip, sim)
    # At most one word apart: where the greeting's barge-in cuts the caller's first word
    # differs by a frame or two between the two clocks ("What time..." / "Well, time...", AMD
    # EPYC, the code before this change too).
    assert wer(sip[0], sim[0]) * len(sip[0].split()) <= 1.0, (sip, sim)
    assert wer(reference, sim[0]) <= 0.3, sim


def test_speech_over_the_greeting_is_answered_in_simulate_as_on_a_call(
        agent, profile, stages, greeting_s, tmp_path):
    # The caller starts 0.5 s before the greeting ends (RTP starts when the call is answered).
    pcm = line(greeting_s - 0.5, QUESTION, 2.0)
    sip_turns, sip_events = over_sip(agent, pcm, tmp_path)
    sim_turns, sim_events = simulated(pcm, profile, stages)
    same_turns(sip_turns, sim_turns, QUESTION)
    assert "speech-ignored" not in sip_events + sim_events


def test_mid_sentence_pause_is_one_turn_in_simulate_as_on_a_call(
        agent, profile, stages, greeting_s, tmp_path):
    pcm = line(greeting_s + 0.5, BOOKING[0], 0.7, BOOKING[1], 2.0)
    sip_turns, _ = over_sip(agent, pcm, tmp_path)
    sim_turns, _ = simulated(pcm, profile, stages)
    same_turns(sip_turns, sim_turns, " ".join(BOOKING))


def test_simulate_json_is_the_call_log(tmp_path, capsys):
    wav = tmp_path / "q.wav"
    import soundfile as sf

    sf.write(wav, pcm16_to_float(line(0.3, QUESTION, 1.0)), PHONE_RATE)
    config = tmp_path / "config.toml"
    config.write_text(f'system_prompt = "{SYSTEM}"\n{PROFILES}\n[dialplan]\n"101" = "fast"\n')
    db = tmp_path / "log.db"
    capsys.readouterr()
    rc = cli.main(["simulate", str(wav), "--profile", "fast", "--fast", "--no-greeting",
                   "--format", "json", "--config", str(config), "--db", f"sqlite:///{db}"])
    assert rc == 0
    printed = [json.loads(x) for x in capsys.readouterr().out.splitlines() if x.strip()]
    assert len(printed) == 1 and printed[0]["transcript"]
    con = sqlite3.connect(db)
    con.row_factory = sqlite3.Row
    rows = [dict(r) for r in con.execute("SELECT * FROM turns ORDER BY [index]")]
    assert len(rows) == len(printed)
    for shown, row in zip(printed, rows, strict=True):
        common = (set(shown) & set(row)) - {"at"}
        assert len(common) >= 15, sorted(common)
        for key in sorted(common):
            if isinstance(row[key], float):
                assert shown[key] == pytest.approx(row[key], abs=1e-6), key
            else:
                assert shown[key] == row[key], key


def test_caller_talking_over_a_reply_is_answered_after_it(
        agent, profile, stages, greeting_s, tmp_path):
    # The second question starts while the first answer is playing (SmolLM2's replies run
    # several seconds) and is the caller's, not echo: it must get its own answer.
    second = "Is the library open on Sunday?"
    pcm = line(greeting_s + 0.5, QUESTION, 4.0, second, 8.0)
    for turns in (over_sip(agent, pcm, tmp_path)[0], simulated(pcm, profile, stages)[0]):
        assert len(turns) == 2, turns
        # tiny.en mishears this espeak voice now and then ("It's vibratory open on Sunday",
        # "is the library open on turn" in a CI run): what matters here is that the second
        # question is a turn of its own, so its key word or all but one of its words will do.
        assert wer(QUESTION, turns[0]) <= 0.3, turns
        assert "sunday" in turns[1].lower() or wer(second, turns[1]) <= 0.2, turns
