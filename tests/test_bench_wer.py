"""``bench wer``: line conditions do what they say, the statistics behave, a quick run works."""

from __future__ import annotations

import argparse
import json

import numpy as np
import pytest

from bench.wer import add_arguments, bench, run, settings_from, synthesizer
from bench.wer import line as ln
from bench.wer.engine import Run, Variant
from bench.wer.questions import QUESTIONS, errors, normalize
from bench.wer.stats import bootstrap_ci, bootstrap_diff_ci, corpus_wer
from bench.wer.voices import (
    KOKORO_VOICES,
    Synthesizer,
    broad_plan,
    espeak_accents,
    espeak_variants,
    kokoro_voice,
    parse_voices,
)
from dialplan import parse_config
from models.audio import PHONE_RATE, frame_samples
from models.registry import ModelCache

FRAME = frame_samples(PHONE_RATE)


def tone(freq: float, rate: int, seconds: float, amp: float = 0.3) -> np.ndarray:
    t = np.arange(int(rate * seconds)) / rate
    return (amp * np.sin(2 * np.pi * freq * t)).astype(np.float32)


def peak_hz(x: np.ndarray, rate: int) -> float:
    spectrum = np.abs(np.fft.rfft(x * np.hanning(len(x))))
    return float(np.fft.rfftfreq(len(x), 1 / rate)[np.argmax(spectrum)])


def band_db(x: np.ndarray, rate: int, lo: float, hi: float) -> float:
    p = np.abs(np.fft.rfft(x)) ** 2
    f = np.fft.rfftfreq(len(x), 1 / rate)
    return float(10 * np.log10(p[(f >= lo) & (f < hi)].sum()))


def args_for(*argv: str) -> argparse.Namespace:
    p = argparse.ArgumentParser()
    add_arguments(p)
    return p.parse_args(list(argv))


CONFIG = parse_config({"profiles": {"default": {"greeting": "How can I help you?"}},
                       "dialplan": {"1": "default"}})


# --- packet loss and concealment -----------------------------------------------------------


@pytest.mark.unit
@pytest.mark.parametrize("loss", [0.01, 0.05])
def test_packet_loss_drops_the_expected_fraction_of_frames(loss):
    n = 100_000
    lost = ln.loss_mask(n, loss, np.random.default_rng(7))
    sigma = np.sqrt(loss * (1 - loss) / n)
    assert abs(lost.mean() - loss) < 4 * sigma
    assert np.array_equal(lost, ln.loss_mask(n, loss, np.random.default_rng(7)))  # seeded
    assert not np.array_equal(lost, ln.loss_mask(n, loss, np.random.default_rng(8)))


@pytest.mark.unit
def test_the_line_loses_frames_to_silence_and_the_plc_fills_them():
    audio = tone(440, PHONE_RATE, 60.0)  # 3000 frames
    zero = ln.received(ln.CONDITIONS["loss5-zero"], audio, PHONE_RATE, seed=3)
    plc = ln.received(ln.CONDITIONS["loss5-plc"], audio, PHONE_RATE, seed=3)
    clean = ln.received(ln.CONDITIONS["ulaw"], audio, PHONE_RATE, seed=3)
    frames = len(clean) // FRAME
    silent = [i for i in range(frames) if not zero[i * FRAME:(i + 1) * FRAME].any()]
    assert abs(len(silent) / frames - 0.05) < 4 * np.sqrt(0.05 * 0.95 / frames)
    changed = [i for i in range(frames)
               if not np.array_equal(zero[i * FRAME:(i + 1) * FRAME],
                                     clean[i * FRAME:(i + 1) * FRAME])]
    assert changed == silent  # only the lost frames differ from the clean line
    level = np.sqrt(np.mean(clean.astype(float) ** 2))
    for i in silent:
        filled = plc[i * FRAME:(i + 1) * FRAME].astype(float)
        if i - 1 not in silent:  # the first frame of a gap: the last one, barely faded
            assert np.sqrt(np.mean(filled**2)) > 0.8 * level


@pytest.mark.unit
def test_concealment_repeats_the_last_frame_and_fades_a_long_gap_to_silence():
    pcm = np.concatenate([np.full(FRAME, 1000, np.int16), np.full(FRAME, 2000, np.int16),
                          np.zeros(6 * FRAME, np.int16)])
    lost = np.array([False, False, True, True, True, True, True, False])
    pcm[-FRAME:] = 500
    out = ln.conceal(pcm, lost, "repeat")
    first = out[2 * FRAME:3 * FRAME]
    assert first[0] == 2000 and 1500 <= first[-1] < 2000  # the last frame, starting to fade
    assert out[3 * FRAME:4 * FRAME].max() <= 1500
    assert not out[6 * FRAME:7 * FRAME].any()  # silent after 80 ms
    assert (out[-FRAME:] == 500).all()  # a received frame is left alone
    assert not ln.conceal(pcm, lost, "zero")[2 * FRAME:7 * FRAME].any()
    with pytest.raises(ValueError, match="conceal"):
        ln.conceal(pcm, lost, "interpolate")


# --- level, noise, codecs --------------------------------------------------------------------


@pytest.mark.unit
def test_quiet_talker_is_twenty_db_down():
    x = tone(300, 16000, 1.0)
    y = ln.caller_end(ln.CONDITIONS["quiet"], x, 16000, seed=0, babble=None)
    assert 10 * np.log10(ln.power(y) / ln.power(x)) == pytest.approx(-20.0, abs=0.01)


@pytest.mark.unit
def test_pink_noise_is_mixed_at_its_snr_and_falls_3_db_per_octave():
    x = tone(500, 16000, 4.0)
    y = ln.caller_end(ln.CONDITIONS["pink10"], x, 16000, seed=1, babble=None)
    assert ln.snr_db(x, y - x) == pytest.approx(10.0, abs=0.5)
    noise = ln.pink_noise(16000 * 20, np.random.default_rng(0))
    # 1/f: equal power per octave, so a 3-octave-higher octave holds about the same power.
    assert band_db(noise, 16000, 250, 500) == pytest.approx(band_db(noise, 16000, 2000, 4000),
                                                           abs=1.0)
    assert not np.array_equal(y, ln.caller_end(ln.CONDITIONS["pink10"], x, 16000, 2, None))


@pytest.mark.tool  # six espeak-ng talkers, no model
@pytest.mark.needs("espeak-ng")
def test_babble_is_mixed_at_its_snr():
    rate = 22050
    talkers = Synthesizer().babble_talkers("The weather was warm on the coast.", rate)
    x = tone(200, rate, 3.0)
    y = ln.caller_end(ln.CONDITIONS["babble15"], x, rate, seed=4, babble=talkers)
    assert ln.snr_db(x, y - x) == pytest.approx(15.0, abs=0.5)
    assert ln.power(y - x) > 0


@pytest.mark.unit
@pytest.mark.parametrize("freq", [1000.0, 6000.0])
def test_g722_round_trip_keeps_a_tones_frequency(freq):
    x = ln.g722_roundtrip((tone(freq, 16000, 1.0) * 32767).astype(np.int16))
    assert len(x) == 16000
    assert peak_hz(x.astype(float), 16000) == pytest.approx(freq, abs=2.0)
    assert np.sqrt(np.mean(x.astype(float) ** 2)) > 0.5 * 0.3 * 32767 / np.sqrt(2)


@pytest.mark.unit
def test_every_condition_gives_16_khz_audio_of_the_same_length():
    x = tone(700, 24000, 1.0)
    talkers = [tone(300, 24000, 2.0), tone(410, 24000, 2.0)]
    for cond in ln.CONDITIONS.values():
        y = ln.apply(cond, x, 24000, seed=5, babble=talkers)
        assert abs(len(y) - 16000) <= 2, cond.name
        assert peak_hz(y, 16000) == pytest.approx(700, abs=5), cond.name


@pytest.mark.unit
def test_unknown_condition_is_named():
    with pytest.raises(ValueError, match="--conditions: unknown wifi"):
        ln.parse_conditions(["ulaw", "wifi"])
    assert [c.name for c in ln.parse_conditions(["g722", "ulaw"])] == ["ulaw", "g722"]


# --- statistics and scoring -------------------------------------------------------------------


@pytest.mark.unit
def test_bootstrap_interval_holds_the_estimate_and_narrows_with_more_utterances():
    rng = np.random.default_rng(0)
    widths = []
    for n in (20, 80, 320):
        words = rng.integers(5, 12, n)
        errs = rng.binomial(words, 0.2)
        lo, hi = bootstrap_ci(errs, words, seed=1)
        assert lo <= corpus_wer(errs, words) <= hi
        widths.append(hi - lo)
        assert bootstrap_ci(errs, words, seed=1) == (lo, hi)  # seeded
    assert widths[0] > widths[1] > widths[2]
    assert widths[0] / widths[2] == pytest.approx(4.0, rel=0.35)  # ~ 1/sqrt(n)


@pytest.mark.unit
def test_paired_difference_interval():
    rng = np.random.default_rng(2)
    words = rng.integers(5, 12, 100)
    a = rng.binomial(words, 0.2)
    assert bootstrap_diff_ci(a, a, words) == (0.0, 0.0)
    lo, hi = bootstrap_diff_ci(a + 1, a, words)  # one more error per utterance: always worse
    assert 0 < lo <= 100 / words.sum() <= hi


@pytest.mark.unit
def test_scoring_forgives_spelling_but_not_words():
    assert normalize("Is Dr. Lindqvist in?") == normalize("Is Doctor Lindqvist in?")
    assert normalize("My card number is 472918.") == normalize("My card number is 4 7 2 9 1 8.")
    assert normalize("due on the 12th of March") == normalize("due on the twelfth of March")
    assert normalize("the café") == "the cafe"
    assert errors("Where is the branch on Elm Street?", "where is the branch on elm street") == (
        0, 7)
    assert errors("Where is the branch on Elm Street?", "where is the bench on Elm") == (2, 7)
    assert errors("How many books?", "") == (3, 3)


# --- voices -------------------------------------------------------------------------------------


@pytest.mark.tool  # espeak-ng --voices
@pytest.mark.needs("espeak-ng")
def test_broad_plan_has_every_accent_variant_and_kokoro_voice_and_balanced_questions():
    accents, _ = espeak_accents()
    variants = espeak_variants()
    assert {"en-us", "en-gb", "en-029", "en-gb-x-rp", "en-gb-scotland"} <= set(accents)
    assert {"f3", "m2", "klatt", "Mr serious"} <= {v for v, _ in variants}
    plan = broad_plan(len(QUESTIONS), seed=0)
    names = {v.espeak for v, _ in plan.items}
    assert all(any(n.split("+")[0] == a for n in names) for a in accents)
    assert {v for v, _ in variants} == {n.split("+")[1] for n in names if "+" in n}
    assert {v.name for v, _ in plan.items if v.engine == "kokoro"} == {
        f"kokoro:{k}" for k in KOKORO_VOICES}
    counts = np.bincount([q for _, q in plan.items], minlength=len(QUESTIONS))
    assert counts.max() - counts.min() <= 1
    assert plan.items == broad_plan(len(QUESTIONS), seed=0).items
    assert plan.items != broad_plan(len(QUESTIONS), seed=1).items


@pytest.mark.tool  # espeak-ng --voices
@pytest.mark.needs("espeak-ng")
def test_voice_arguments():
    plan = parse_voices(["en-us+f3@140", "kokoro:jm_kumo"], 4, seed=0)
    assert [(v.name, q) for v, q in plan.items][:2] == [("en-us+f3@140", 0), ("en-us+f3@140", 1)]
    assert len(plan.items) == 8
    kokoro_only = parse_voices(["kokoro"], len(QUESTIONS), seed=0)
    assert {v.engine for v, _ in kokoro_only.items} == {"kokoro"}
    assert parse_voices(["kokoro:af_heart"], 4, seed=0).items[0][0].engine == "kokoro"
    with pytest.raises(ValueError, match="unknown Kokoro voice 'af_nobody'"):
        parse_voices(["kokoro:af_nobody"], 4, seed=0)
    with pytest.raises(ValueError, match="--profile: unknown 'nope'"):
        settings_from(args_for("--profile", "nope"), CONFIG)


# --- a quick run --------------------------------------------------------------------------------


@pytest.mark.model
def test_kokoro_voices_are_said_by_kokoro_whatever_voice_the_default_profile_speaks(tmp_path):
    assert CONFIG.profiles["default"].tts.voice != "jf_alpha"
    synth = synthesizer(ModelCache(), cache=tmp_path)
    audio, rate = synth.say(kokoro_voice("jf_alpha"), "When does the library open?")
    assert rate == 24000  # Kokoro's rate; Piper's voice speaks at 22050
    assert 0.8 < len(audio) / rate < 4.0
    assert len(list(tmp_path.glob("*.npz"))) == 1  # cached for the next run


@pytest.mark.tool
@pytest.mark.model
def test_quick_run_on_tiny_en_with_two_voices(tmp_path, capsys):
    out = tmp_path / "wer.json"
    args = args_for("--quick", "--models", "tiny.en", "--voices", "en-us", "en-gb-x-rp",
                    "--json", str(out))
    assert run(args, CONFIG) == 0
    printed = capsys.readouterr().out
    assert "tiny.en" in printed and "20 utterances" in printed
    data = json.loads(out.read_text())
    (only,) = data["runs"]
    assert (only["model"], only["condition"], len(only["utterances"])) == ("tiny.en", "ulaw", 20)
    assert only["wer"] < 0.5
    lo, hi = only["ci95"]
    assert lo <= only["wer"] <= hi
    # Seeded and greedy: the same utterances score the same (the first voice's first 3 here).
    again = bench(settings_from(args_for("--quick", "--models", "tiny.en", "--voices", "en-us",
                                         "--questions", "3"), CONFIG))
    assert list(again.runs[0].errors) == [u["errors"] for u in only["utterances"][:3]]
    assert again.runs[0].hyps == [u["heard"] for u in only["utterances"][:3]]
    # The saved run prints the same tables again without measuring.
    assert run(args_for("--from-json", str(out)), CONFIG) == 0
    assert capsys.readouterr().out.splitlines()[:8] == printed.splitlines()[:8]


@pytest.mark.unit
def test_a_runaway_transcript_counts_once_in_the_capped_wer():
    said = ["I lost my card", "how do I get a new one"]
    heard = ["I lost my car " + "I knew " * 40, "how do I get a new one"]
    scored = [errors(r, h) for r, h in zip(said, heard, strict=True)]
    run_ = Run(Variant("tiny.en"), "ulaw", [0, 1], np.array([e for e, _ in scored]),
               np.array([n for _, n in scored]), np.ones(2), np.ones(2), heard)
    assert list(run_.errors) == [81, 0] and list(run_.capped) == [4, 0]
    assert run_.loops == 1
    assert corpus_wer(run_.capped, run_.words) == pytest.approx(4 / 11)
