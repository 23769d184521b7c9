"""Answering-machine detection's rule and detector on made-up evidence (agent.call.amd)."""

from __future__ import annotations

from concurrent.futures import Future
from types import SimpleNamespace

import numpy as np
import pytest

from agent.call.amd import Detector, Heard, Screening, decide, machine_words
from models.audio import float_to_pcm16
from tests.fakes import FakeVAD

pytestmark = pytest.mark.unit
RATE = 8000


@pytest.mark.parametrize("text,phrase", [
    ("Hi, this is Ann. I can't take your call right now.", "can't take your call"),
    ("Sorry, I cannot take your call", "can't take your call"),
    ("Please leave a message after the tone.", "leave a message"),
    ("The person you are calling is not available", "not available"),
    ("You have reached the voice mail box of", "voice mail"),
    ("Record your message at the beep", "at the beep"),
])
def test_voicemail_phrases_are_found_in_any_spelling(text, phrase):
    assert machine_words(text) == phrase


@pytest.mark.parametrize("text", ["Hello?", "Hi, this is Ann.", "Yeah, who's calling?",
                                  "Good morning, Bayside Plumbing, Mike speaking.",
                                  "You've reached the front desk, Sam speaking."])
def test_what_people_say_is_no_machine_phrase(text):
    assert machine_words(text) is None


def test_weak_phrases_count_only_in_a_long_greeting():
    assert machine_words("You've reached Ann and Tom", long_greeting=False) is None
    assert machine_words("You've reached Ann and Tom", long_greeting=True) == "you've reached"


@pytest.mark.parametrize("text", [
    "Thank you for calling Bayside Plumbing, this is Mike, how can I help you?",
    "You've reached the front desk, Sam speaking, who's calling?",
])
def test_a_persons_phrase_outweighs_the_weak_ones_even_in_a_long_greeting(text):
    assert machine_words(text, long_greeting=True) is None
    assert machine_words(text + " Please leave a message.", long_greeting=True) is not None


def test_weak_phrases_need_a_long_transcript_not_only_long_speech():
    # 5 s of speech, but the words in only cover the first 2 s: a business's greeting may
    # still say who is speaking.
    h = Heard(at_s=5.4, speech_s=5.0, silence_s=0.0, words="Thank you for calling Bayside",
              words_s=2.0)
    assert decide(h) is None
    d = decide(Heard(**{**h.__dict__, "words": "Thank you for calling Bayside Plumbing, our "
                                               "office is closed until Monday", "words_s": 4.6}))
    assert d is not None and d.result == "machine" and "thank you for calling" in d.why


def test_words_short_of_the_last_syllable_still_cover_the_greeting():
    # The VAD's last chunk came in after the transcript was asked for: too little to ask again.
    d = decide(Heard(at_s=3.5, speech_s=2.4, silence_s=0.9, words="Dr. Lee's office, this is Sam",
                     words_s=2.2))
    assert d is not None and d.result == "human"
    assert decide(Heard(at_s=3.5, speech_s=2.4, silence_s=0.9, words="Dr. Lee's office",
                        words_s=1.9)) is None


def test_a_long_greeting_that_ends_without_machine_words_is_unsure_at_its_end():
    h = Heard(at_s=6.0, speech_s=5.0, silence_s=1.0, words="Hi, this is Jake, I'm out on a job",
              words_s=5.0, max_s=10.0)
    assert decide(h) is None  # a pause inside a long greeting: it may go on
    d = decide(Heard(**{**h.__dict__, "at_s": 6.5, "silence_s": 1.5}))
    assert d is not None and d.result == "unsure" and "ended" in d.why


def test_a_short_hello_then_silence_is_a_person_before_its_words():
    d = decide(Heard(at_s=1.9, speech_s=0.5, silence_s=0.8))
    assert d is not None and d.result == "human" and "short greeting" in d.why
    assert decide(Heard(at_s=1.7, speech_s=0.5, silence_s=0.6)) is None  # not yet


def test_a_longer_greeting_is_a_person_only_once_its_words_are_all_heard():
    h = Heard(at_s=3.5, speech_s=2.4, silence_s=0.9)
    assert decide(h) is None
    assert decide(Heard(**{**h.__dict__, "words": "Bayside plumbing, Mike", "words_s": 1.2})
                  ) is None  # words of only half of it
    d = decide(Heard(**{**h.__dict__, "words": "Good morning, Bayside plumbing, Mike speaking",
                        "words_s": 2.4}))
    assert d is not None and d.result == "human" and d.at_s == 3.5


def test_machine_words_or_a_beep_decide_a_machine_at_once():
    d = decide(Heard(at_s=2.0, speech_s=1.6, silence_s=0.0, words="please leave a message",
                     words_s=1.6))
    assert d is not None and d.result == "machine" and "'leave a message'" in d.why
    d = decide(Heard(at_s=1.0, speech_s=0.0, silence_s=1.0, tone_hz=1000.0))
    assert d is not None and d.result == "machine" and d.why == "beep 1000 Hz"


def test_a_long_greeting_without_machine_words_is_unsure_at_the_bound_never_a_machine():
    assert decide(Heard(at_s=3.9, speech_s=3.5, silence_s=0.0, words="la la la", words_s=3,
                        max_s=4.0)) is None
    d = decide(Heard(at_s=4.0, speech_s=3.6, silence_s=0.1, words="la la la", words_s=3,
                     max_s=4.0))
    assert d is not None and d.result == "unsure" and d.at_s == 4.0
    d = decide(Heard(at_s=2.0, speech_s=0.0, silence_s=2.0))
    assert d is not None and d.result == "unsure" and "no speech" in d.why


def noise(s: float, seed: int = 0) -> np.ndarray:
    """Speech to FakeVAD (loud, not tonal)."""
    return 0.2 * np.random.default_rng(seed).standard_normal(int(s * RATE))


def sine(hz: float, s: float) -> np.ndarray:
    return 0.3 * np.sin(2 * np.pi * hz * np.arange(int(s * RATE)) / RATE)


def gap(s: float) -> np.ndarray:
    return np.zeros(int(s * RATE))


def frames(*parts: np.ndarray):
    pcm = float_to_pcm16(np.concatenate(parts).astype(np.float32))
    for i in range(0, len(pcm) - 159, 160):
        yield pcm[i:i + 160].tobytes()


def run(det: Detector, *parts, words: str = "") -> list[tuple[float, str | None]]:
    """Feed the audio; a transcript comes back at once; (time, message cue) per frame."""
    out = []
    for f in frames(*parts):
        det.feed(f)
        if (ask := det.wants_words()) is not None:
            det.heard_words(words, ask[1])
        out.append((det.t, det.message_cue()))
    return out


def test_the_detector_finds_a_person_saying_hello():
    det = Detector(FakeVAD(), RATE, max_s=4.0)
    run(det, gap(0.4), noise(0.5), gap(3.0), words="Hello?")
    assert det.decision is not None and det.decision.result == "human"
    assert det.decision.at_s == pytest.approx(0.4 + 0.5 + 0.8, abs=0.1)
    assert det.speech_s == pytest.approx(0.5, abs=0.07)


def test_the_detector_finds_a_machine_by_its_words_and_speaks_after_the_beep():
    det = Detector(FakeVAD(), RATE, max_s=4.0)
    cues = run(det, gap(0.3), noise(5.0), gap(0.3), sine(1000, 0.4), gap(2.0),
               words="Hi, I can't take your call right now")
    assert det.decision is not None and det.decision.result == "machine"
    assert det.decision.at_s < 2.0  # the first words, at 1.2 s of speech
    first = next(t for t, cue in cues if cue is not None)
    assert dict(cues)[first] == "beep"
    assert first == pytest.approx(0.3 + 5.0 + 0.3 + 0.4, abs=0.05)  # as the tone ends
    assert det.speech_s == pytest.approx(5.0, abs=0.1)  # the tone is not speech


def test_a_machine_without_a_beep_gets_its_message_after_the_greeting_and_silence():
    det = Detector(FakeVAD(), RATE, max_s=4.0)
    cues = run(det, gap(0.3), noise(3.0), gap(3.0), words="please leave a message")
    first = next((t, cue) for t, cue in cues if cue is not None)
    assert first[1] == "silence" and first[0] == pytest.approx(3.3 + 1.5, abs=0.07)


def test_a_long_wordless_greeting_is_unsure_at_the_bound():
    det = Detector(FakeVAD(), RATE, max_s=3.0)
    cues = run(det, gap(0.2), noise(5.0), words="something else entirely")
    assert det.decision is not None and det.decision.result == "unsure"
    assert det.decision.at_s == pytest.approx(3.0, abs=0.021)
    assert all(cue is None for _, cue in cues)


def test_screening_submits_words_and_records_one_event_and_one_verdict():
    submitted, events = [], []

    def submit(fn, audio, *, stage, priority, then):
        submitted.append((stage, len(audio)))
        f: Future = Future()
        f.set_result(fn(audio))
        then(f)
        return f

    screening = Screening("c1", FakeVAD(), lambda a: SimpleNamespace(text="leave a message"),
                          RATE, 4.0, submit, lambda kind, detail: events.append((kind, detail)))
    verdicts = [v for f in frames(gap(0.3), noise(3.0), sine(1000, 0.3), gap(1.0))
                if (v := screening.feed(f)) is not None]
    assert verdicts == ["voicemail"]
    assert submitted and all(stage == "asr" for stage, _ in submitted)
    assert [k for k, _ in events] == ["amd", "voicemail"]
    assert events[0][1].startswith("machine at ") and "leave a message" in events[0][1]
    assert events[1][1].startswith("message after beep at 3.6")


def test_screening_of_a_person_says_human_once():
    events = []
    screening = Screening("c2", FakeVAD(), lambda a: SimpleNamespace(text="hello"), RATE, 4.0,
                          lambda *a, **k: Future(), lambda k, d: events.append(k))
    verdicts = [v for f in frames(gap(0.3), noise(0.6), gap(1.5))
                if (v := screening.feed(f)) is not None]
    assert verdicts[0] == "human" and events == ["amd"]


@pytest.mark.parametrize(("over", "key"), [
    ({"amd": "yes"}, "profiles.p.amd"),
    ({"amd_max_s": 0.5}, "profiles.p.amd_max_s = 0.5"),
    ({"amd_max_s": "4s"}, "profiles.p.amd_max_s"),
    ({"voicemail_message": 3}, "profiles.p.voicemail_message"),
])
def test_bad_amd_options_name_the_key(over, key):
    from dialplan.config import ConfigError, parse_config

    with pytest.raises(ConfigError) as e:
        parse_config({"profiles": {"p": over}})
    assert key in str(e.value)


def test_amd_is_off_by_default_and_its_options_parse():
    from dialplan.config import parse_config

    profiles = parse_config({"profiles": {"p": {}, "q": {"amd": True, "amd_max_s": 6,
                                                       "voicemail_message": "Call us."}}}).profiles
    assert profiles["p"].amd is False and profiles["p"].amd_max_s == 10.0
    assert "call us back" in profiles["p"].voicemail_message.lower()
    assert (profiles["q"].amd, profiles["q"].amd_max_s, profiles["q"].voicemail_message) == (
        True, 6.0, "Call us.")
