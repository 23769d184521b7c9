"""A pick name loads whichever of its files answers a turn sooner on this CPU, timed once."""

import json
import math

import pytest

from models import catalog
from models.llm.pick import MARGIN, ROUNDS, Pick, choose, cpu_key, turn_ms

PAIR = Pick("m-fastest", ("q4k", "iq4"))
PATHS = {"iq4": "iq4.gguf", "q4k": "q4k.gguf"}
FILE = PATHS.__getitem__


class Clock:
    """Fake timings per file; counts the measurements."""

    def __init__(self, **ms):
        self.ms, self.calls = ms, []

    def __call__(self, path):
        name = path.split(".")[0]
        self.calls.append(name)
        value = self.ms[name]
        return value.pop(0) if isinstance(value, list) else value


@pytest.mark.unit
def test_the_faster_median_wins_and_is_kept_per_cpu(tmp_path):
    store = tmp_path / "picks.json"
    # One slow outlier does not decide: medians of three, candidates timed in turn.
    clock = Clock(iq4=[900.0, 900.0, 900.0], q4k=[700.0, 2000.0, 700.0])
    assert choose(PAIR, FILE, store, measure=clock, key=lambda: "cpu-a") == "q4k"
    assert clock.calls == ["q4k", "iq4"] * ROUNDS
    kept = json.loads(store.read_text())["m-fastest"]
    assert kept == {"cpu": "cpu-a", "choice": "q4k", "turn_ms": {"iq4": 900.0, "q4k": 700.0}}
    # Kept: not timed again on the same CPU and llama.cpp...
    again = Clock(iq4=1.0, q4k=1.0)
    asked = []  # nor is any file asked for (a missing one would be made first)
    assert choose(PAIR, asked.append, store, measure=again, key=lambda: "cpu-a") == "q4k"
    assert again.calls == [] and asked == []
    # ...timed again on another (and a tie goes to the first candidate).
    assert choose(PAIR, FILE, store, measure=again, key=lambda: "cpu-b") == "q4k"
    assert len(again.calls) == 2 * ROUNDS
    assert json.loads(store.read_text())["m-fastest"]["cpu"] == "cpu-b"


@pytest.mark.unit
def test_a_later_candidate_wins_only_when_clearly_faster(tmp_path):
    # The CI machine timed the two files within 5 % of each other: noise, not a reason to load
    # a second rounding of the weights.
    store = tmp_path / "picks.json"
    near = Clock(q4k=1444.0, iq4=1444.0 * (1 - MARGIN / 2))
    assert choose(PAIR, FILE, store, measure=near, key=lambda: "a") == "q4k"
    clear = Clock(q4k=1444.0, iq4=1444.0 * (1 - 2 * MARGIN))
    assert choose(PAIR, FILE, store, measure=clear, key=lambda: "b") == "iq4"


@pytest.mark.unit
def test_an_unreadable_store_is_measured_again_and_other_picks_are_kept(tmp_path):
    store = tmp_path / "picks.json"
    store.write_text("{not json")
    assert choose(PAIR, FILE, store, measure=Clock(iq4=5.0, q4k=9.0), key=lambda: "c") == "iq4"
    other = Pick("n-fastest", ("q4k", "iq4"))
    choose(other, FILE, store, measure=Clock(iq4=5.0, q4k=9.0), key=lambda: "c")
    assert set(json.loads(store.read_text())) == {"m-fastest", "n-fastest"}
    # A kept choice that is no longer a candidate is not trusted.
    store.write_text(json.dumps({"m-fastest": {"cpu": "c", "choice": "gone"}}))
    assert choose(PAIR, FILE, store, measure=Clock(iq4=9.0, q4k=5.0), key=lambda: "c") == "q4k"


@pytest.mark.unit
def test_the_cpu_key_names_the_llama_cpp_version():
    import llama_cpp

    key = cpu_key()
    assert key.endswith(f"-llama-cpp-{llama_cpp.__version__}") and key == cpu_key()


@pytest.mark.unit
def test_the_default_model_is_the_1_5b_pick():
    from dialplan.options import LLMOptions

    pick = catalog.PICKS[LLMOptions().model]
    # The published file first: its re-quantization only where clearly faster.
    assert pick.candidates == ("qwen2.5-coder-1.5b-instruct",
                               "qwen2.5-coder-1.5b-instruct-iq4_nl")
    assert all(catalog.CATALOG[c].stage == "llm" for c in pick.candidates)
    with pytest.raises(Exception, match="qwen2.5-1.5b-instruct-fastest"):
        catalog.resolve("gpt-9", "llm")  # the error lists pick names beside bundled ones


@pytest.mark.model
def test_a_pick_resolves_to_a_real_timed_file(tmp_path, monkeypatch):
    smol = catalog.ensure(catalog.CATALOG["smollm2-135m"])
    ms = turn_ms(smol)
    assert math.isfinite(ms) and 0 < ms < 10_000
    monkeypatch.setattr(catalog, "CACHE_DIR", tmp_path)
    monkeypatch.setitem(catalog.PICKS, "smol-fastest", Pick("smol-fastest", ("smollm2-135m",)))
    assert catalog.resolve("smol-fastest", "llm") == smol
    kept = json.loads((tmp_path / catalog.PICKS_FILE).read_text())["smol-fastest"]
    assert kept["choice"] == "smollm2-135m" and kept["turn_ms"]["smollm2-135m"] > 0


@pytest.mark.model
def test_a_load_uses_the_made_candidate_and_re_quantizes_nothing(tmp_path, monkeypatch):
    """``make serve`` makes no IQ4_NL file for the pick: a load takes the Q4_K_M, untimed."""
    monkeypatch.setattr(catalog, "CACHE_DIR", tmp_path)  # no re-quantized file, no kept choice
    monkeypatch.setattr(catalog, "choose", lambda *a, **k: pytest.fail("timed"))
    pick = catalog.PICKS["qwen2.5-1.5b-instruct-fastest"]
    assert catalog.made(catalog.CATALOG[pick.candidates[0]])
    assert not catalog.made(catalog.CATALOG[pick.candidates[1]])
    assert catalog.pick(pick) == "qwen2.5-coder-1.5b-instruct"
    assert not (tmp_path / catalog.PICKS_FILE).exists()  # a full install still times both
    assert not (tmp_path / pick.candidates[1]).exists()


@pytest.mark.unit
def test_serve_installs_the_models_of_its_extensions_only():
    from agent.cli.models import config_models
    from dialplan import load_config, parse_config

    used = config_models(load_config("config.toml"))
    # 100 default (base, the 1.5B pick, Kokoro af_heart, facts), 101 fast, 102 tiny, and the
    # under-load lite: its 0.5B IQ4_NL and hibari (a pip dependency, not a catalog model).
    assert set(used) == {"base", "tiny.en", "qwen2.5-1.5b-instruct-fastest", "smollm2-135m",
                         "qwen2.5-coder-0.5b-instruct-iq4_nl", "kokoro-82m-int8",
                         "kokoro-voices", "smart-turn-v3.2", "wordllama-l2-256"}
    plain = parse_config({"profiles": {"p": {"asr": {"model": "tiny.en", "denoise": "rnnoise"},
                                             "llm": {"backend": "openai", "model": "gpt-x"},
                                             "tts": {"backend": "piper"},
                                             "audio": {"end_of_turn": "off"}},
                                       "unused": {"asr": {"model": "base"}}},
                          "dialplan": {"1": "p"}})
    assert config_models(plain) == ["tiny.en", "en_US-joe-medium", "rnnoise"]
