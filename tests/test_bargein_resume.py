"""A barge-in with no words resumes the reply from the sentence it cut (agent.call.bargein).

The playout's pause and resume on frames; the no-words rule on transcripts; and the call
session on fakes in real time (test_session's line and stages): its reply's sentences are
tones of their own pitch, so the line's audio says which sentence was heard when.
"""

from __future__ import annotations

import time

import numpy as np
import pytest
from fakes import FakeASR, FakeLLM, FakeTTS, fake_stages, tone

from agent.call.bargein import no_words
from agent.call.playout import Playout
from db.records import EventRecord, TurnRecord
from dialplan.options import BACKCHANNELS
from models.asr.base import Transcript
from tests.test_session import close, make
from tests.waiting import wait_until

pytestmark = pytest.mark.unit

# ---- the playout ---------------------------------------------------------------------------


def frames_of(value: int, n: int) -> np.ndarray:
    return np.full(n * 160, value, np.int16)


def played(p: Playout, n: int) -> list[int]:
    """The first sample of each of the next ``n`` frames (a clause's value, or 0: silence)."""
    return [int(np.frombuffer(p.next_frame(), np.int16)[0]) for _ in range(n)]


def reply(p: Playout) -> None:
    p.start_reply()
    p.push(frames_of(1, 10), "The first sentence.")
    p.push(frames_of(2, 5), "The second,")
    p.push(frames_of(3, 5), "cut in its second clause.")
    p.push(frames_of(4, 5), "The third.")
    p.end_reply()


def test_a_paused_reply_goes_on_from_the_start_of_the_sentence_it_cut():
    p = Playout(8000)
    reply(p)
    assert played(p, 17) == [1] * 10 + [2] * 5 + [3] * 2  # into the second sentence's clause 2
    paused = p.pause()
    assert paused is not None and paused.sentence == "The second, cut in its second clause."
    assert paused.replay_s == pytest.approx(0.14) and paused.queued_s == pytest.approx(0.16)
    assert played(p, 3) == [0, 0, 0] and p.busy and p.paused  # silent at once, still held
    assert p.pause() is None  # paused already
    assert p.resume() and not p.paused
    assert played(p, 16) == [2] * 5 + [3] * 5 + [4] * 5 + [0]
    assert not p.busy


def test_audio_the_reply_makes_while_paused_is_kept_behind_it():
    p = Playout(8000)
    p.start_reply()
    p.push(frames_of(1, 4), "One.")
    played(p, 2)
    assert p.pause() is not None
    p.push(frames_of(2, 3), "Two.")  # the reply's next clause, synthesised meanwhile
    p.end_reply()
    assert played(p, 2) == [0, 0]
    assert not p.interject(frames_of(9, 2))  # no "one moment" into a paused reply
    p.resume()
    assert played(p, 8) == [1] * 4 + [2] * 3 + [0]


def test_a_second_pause_goes_back_to_the_same_sentence_start():
    p = Playout(8000)
    reply(p)
    played(p, 12)  # in "The second,"
    p.pause()
    p.resume()
    played(p, 7)  # "The second," again, then into "cut in its..."
    paused = p.pause()
    assert paused is not None and paused.sentence.startswith("The second,")
    p.resume()
    assert played(p, 10) == [2] * 5 + [3] * 5


def test_clearing_a_paused_reply_drops_it_and_a_phrase_resumes_from_its_start():
    p = Playout(8000)
    reply(p)
    played(p, 5)
    p.pause()
    assert p.clear() == 20 and not p.busy and not p.paused and not p.resume()
    p.start_reply()
    p.push(frames_of(7, 6))  # a fixed phrase: no clauses, said again whole
    p.end_reply()
    played(p, 3)
    paused = p.pause()
    assert paused is not None and paused.sentence == ""
    p.resume()
    assert played(p, 7) == [7] * 6 + [0]


def test_nothing_to_pause_when_no_reply_plays():
    p = Playout(8000)
    assert p.pause() is None
    p.start_reply()
    p.push(frames_of(1, 2), "Hi.")
    p.end_reply()
    played(p, 4)
    assert p.pause() is None


# ---- no words ------------------------------------------------------------------------------


@pytest.mark.parametrize(("text", "logprob", "why"), [
    ("", None, "no words"), ("[cough]", -0.3, "no words"), ("(coughs)", -0.3, "no words"),
    ("...", -0.2, "no words"), ("Uh-huh.", -0.4, "fillers"), ("Mm-hmm", -0.5, "fillers"),
    ("Hmmm...", -0.3, "fillers"), ("Yeah, I see.", -0.3, "fillers"), ("Um, uh", -0.6, "fillers"),
    ("Tada!", -1.52, "low-confidence avg_logprob=-1.52"),
])
def test_a_barge_in_without_words(text, logprob, why):
    assert no_words(Transcript(text, None, avg_logprob=logprob), BACKCHANNELS, -1.0) == why


def test_unsure_talk_stands_the_barge_in_but_an_unsure_word_or_a_loop_does_not():
    # Six words said over a long reply, heard unsure: talk, which the turn asks to hear again.
    assert no_words(Transcript("Is it a payment on the", None, avg_logprob=-1.37),
                    BACKCHANNELS, -1.0) == ""
    assert no_words(Transcript("Oh, tada!", None, avg_logprob=-1.6), BACKCHANNELS,
                    -1.0) == "low-confidence avg_logprob=-1.60"
    assert no_words(Transcript("no no no no no", None, avg_logprob=-0.2), BACKCHANNELS,
                    -1.0) == "decoding-loop"
    assert no_words(Transcript("no no no no no", None, avg_logprob=-1.5), BACKCHANNELS,
                    -1.0) == "low-confidence avg_logprob=-1.50"  # unsure and a loop: no talk
    assert no_words(Transcript("Um, uh, hmm.", None, avg_logprob=-1.5), BACKCHANNELS,
                    -1.0) == "fillers"


@pytest.mark.parametrize("text", ["Wait.", "Wait, wait.", "Stop!", "No, that's wrong.",
                                  "Okay, but what about Sunday?", "Hold on."])
def test_words_stand_the_barge_in(text):
    assert no_words(Transcript(text, None, avg_logprob=-0.4), BACKCHANNELS, -1.0) == ""


def test_the_fillers_are_the_profiles():
    tr = Transcript("Ja, genau.", None, avg_logprob=-0.3)
    assert no_words(tr, BACKCHANNELS, -1.0) == ""
    assert no_words(tr, ("ja", "genau", "mhm"), -1.0) == "fillers"


# ---- the call --------------------------------------------------------------------------------

SENTENCES = {"alpha": 300, "bravo": 500, "charlie": 700}
REPLY = ("Alpha alpha alpha alpha alpha. Bravo bravo bravo bravo bravo bravo bravo. "
         "Charlie charlie charlie.")


class PitchTTS(FakeTTS):
    """FakeTTS whose tone's pitch says which sentence (by its first word) it speaks."""

    def _synthesize_impl(self, text: str) -> np.ndarray:
        self._work()
        self.texts.append(text)
        hz = next((v for k, v in SENTENCES.items() if k in text.lower()), 900)
        n = int(len(text) * self.s_per_char * self.sample_rate)
        return (0.5 * np.sin(2 * np.pi * hz * np.arange(n) / self.sample_rate)).astype(
            np.float32)


def heard(line, since: float) -> list[tuple[str, float]]:
    """The sentences the agent's line carried after ``since``: (first word, seconds), in runs.

    Runs under 0.1 s are left out (a frame across two sentences; the resampler's tail of one
    at the start of the next).
    """
    names = []
    for at, frame in list(line.out):
        if at < since:
            continue
        x = frame.astype(np.float32)
        if np.sqrt(np.mean(x * x)) < 500:
            names.append("-")
            continue
        hz = np.argmax(np.abs(np.fft.rfft(x, 800))) * 10  # 10 Hz bins at 8 kHz
        names.append(min(SENTENCES, key=lambda k: abs(SENTENCES[k] - hz)))
    runs: list[list] = []
    for _ in range(2):  # runs, then runs again once the short ones are out
        runs = []
        for name in names:
            if runs and runs[-1][0] == name:
                runs[-1][1] += 1
            else:
                runs.append([name, 1])
        names = [n for n, k in runs if k >= 5 for _ in range(k)]
    return [(n, round(k * 0.02, 2)) for n, k in runs]


def replying(check: str, **audio):
    """A call whose reply is playing; ``check``: what the ASR hears in the caller's sound."""
    stages = fake_stages(asr=FakeASR(["when are you open?", check]), llm=FakeLLM(REPLY),
                         tts=PitchTTS())
    session, line, calllog, _ = make(stages, **audio)
    assert wait_until(lambda: session.state == "listening")
    line.say(tone(0.8))
    assert wait_until(lambda: session.state == "speaking")
    return session, line, calllog, time.monotonic()


def barge_in_during_the_second_sentence(check: str):
    session, line, calllog, start = replying(check)
    time.sleep(1.5 + 0.8)  # the first sentence (30 chars at 0.05 s), then into the second
    line.say(tone(0.4, level=0.6, hz=180))  # a cough's length: over barge_in_min_s
    return session, line, calllog, start


def test_a_cough_over_the_reply_resumes_it_from_the_sentence_it_cut():
    session, line, calllog, start = barge_in_during_the_second_sentence("")
    assert wait_until(lambda: any(e.kind == "resumed" for e in calllog.of(EventRecord)))
    assert wait_until(lambda: session.state == "listening", timeout=15)
    runs = [r for r in heard(line, start) if r[0] != "-"]
    names = [n for n, _ in runs]
    assert names == ["alpha", "bravo", "bravo", "charlie"], runs
    bravo = len("Bravo bravo bravo bravo bravo bravo bravo.") * 0.05
    assert runs[1][1] < bravo - 0.3  # cut...
    assert runs[2][1] == pytest.approx(bravo, abs=0.1)  # ...then said again whole
    (event,) = [e for e in calllog.of(EventRecord) if e.kind == "resumed"]
    assert "(no words)" in event.detail and "'Bravo bravo" in event.detail, event.detail
    assert session.barge_ins == 0
    assert not [e for e in calllog.of(EventRecord) if e.kind == "barge-in"]
    assert wait_until(lambda: calllog.of(TurnRecord))
    (turn,) = calllog.of(TurnRecord)
    assert turn.reply_text == REPLY and not turn.barge_in
    close(session, line)


def test_uh_huh_over_the_reply_resumes_it_too():
    session, line, calllog, start = barge_in_during_the_second_sentence("Uh-huh.")
    assert wait_until(lambda: any(e.kind == "resumed" for e in calllog.of(EventRecord)))
    assert wait_until(lambda: session.state == "listening", timeout=15)
    names = [n for n, _ in heard(line, start) if n != "-"]
    assert names == ["alpha", "bravo", "bravo", "charlie"]
    close(session, line)


def test_a_word_over_the_reply_still_interrupts_it():
    session, line, calllog, start = barge_in_during_the_second_sentence("Wait.")
    assert wait_until(lambda: any(e.kind == "barge-in" for e in calllog.of(EventRecord)))
    assert session.barge_ins == 1
    assert not [e for e in calllog.of(EventRecord) if e.kind == "resumed"]
    assert wait_until(lambda: len(calllog.of(TurnRecord)) >= 2, timeout=15)
    first, second = calllog.of(TurnRecord)[:2]
    assert first.barge_in is True and second.transcript == "Wait."
    runs = heard(line, start)
    cut = next(i for i, (n, _) in enumerate(runs) if n == "bravo")
    assert runs[cut + 1][0] == "-"  # the reply stopped in its second sentence: no "charlie"
    assert "charlie" not in [n for n, _ in runs[cut:cut + 2]]
    close(session, line)


def test_a_long_sound_over_the_reply_stands_without_waiting_for_its_words():
    # Talk (or a noise) that goes on past SOUND_MAX_S is no cough: the reply is dropped even
    # though the ASR, here, would have heard nothing in it.
    session, line, calllog, _ = replying("")
    time.sleep(1.0)
    line.say(tone(3.0, level=0.6, hz=180))
    assert wait_until(lambda: any(e.kind == "barge-in" for e in calllog.of(EventRecord)))
    assert session.barge_ins == 1
    assert not [e for e in calllog.of(EventRecord) if e.kind == "resumed"]
    close(session, line)


def test_a_paused_replys_work_waits_behind_the_check_of_the_callers_sound():
    from agent.turn.result import TurnResult
    from agent.turn.timeline import TurnTimeline
    from agent.turn.urgency import Urgency
    from models.priority import Priority

    t = TurnTimeline(speech_end_at=10.0, first_frame_out_at=11.0, tts_first_audio_at=10.9)
    paused = [False]
    u = Urgency(t, TurnResult(audio_out_s=2.0), lambda: True, lambda: 12.5, lambda: paused[0])
    assert u.tts()[0] == Priority.FIRST_AUDIO  # 0.5 s of audio left: urgent
    paused[0] = True
    assert u.tts()[0] == Priority.PLAYOUT  # paused: the caller's sound is heard first


def test_the_fillers_and_the_switch_are_profile_options():
    from dialplan import parse_config
    from dialplan.config import ConfigError

    profiles = parse_config({"profiles": {
        "p": {}, "q": {"audio": {"barge_in_fillers": ["ja", "mhm"], "barge_in_resume": False}}}
    }).profiles
    assert profiles["p"].audio.barge_in_resume and profiles["p"].audio.barge_in_fillers == (
        BACKCHANNELS)
    assert profiles["q"].audio.barge_in_fillers == ("ja", "mhm")
    assert not profiles["q"].audio.barge_in_resume
    with pytest.raises(ConfigError) as e:
        parse_config({"profiles": {"p": {"audio": {"barge_in_fillers": "uh"}}}})
    assert "barge_in_fillers" in str(e.value)


def test_with_resume_off_a_cough_drops_the_reply_as_before():
    session, line, calllog, _ = replying("", barge_in_resume=False)
    time.sleep(1.0)
    line.say(tone(0.4, level=0.6, hz=180))
    assert wait_until(lambda: any(e.kind == "barge-in" for e in calllog.of(EventRecord)))
    assert session.barge_ins == 1 and not session.playout.paused
    assert not [e for e in calllog.of(EventRecord) if e.kind == "resumed"]
    close(session, line)
