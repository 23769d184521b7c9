"""Config parsing errors name the key; profiles merge over the top-level sections."""

from dataclasses import replace
from pathlib import Path

import pytest

from dialplan import ConfigError, Dialplan, load_config, parse_config
from dialplan.options import TTSOptions
from dialplan.plan import under_load

pytestmark = pytest.mark.unit


def test_shipped_config_loads_and_routes():
    config = load_config("config.toml")
    plan = Dialplan.from_config(config)
    assert plan.resolve("100").name == "default"
    assert plan.resolve("101").llm.model == "smollm2-135m"
    assert plan.resolve("101").asr.model == "tiny.en" and plan.resolve("100").asr.model == "base"
    assert plan.resolve("999") is None


def test_shipped_under_load_profiles(tmp_path):
    """`lite` (what ships) keeps Whisper base; one line switches to `lite-tiny`'s tiny.en."""
    text = open("config.toml").read()
    shipped = Dialplan.from_config(load_config("config.toml"))
    lite = shipped.fallback(shipped.resolve("100"))
    assert (lite.asr.model, lite.llm.model, lite.llm.max_tokens) == (
        "base", "qwen2.5-coder-0.5b-instruct-iq4_nl", 48)
    assert 'under_load = "lite"\n' in text
    switched = tmp_path / "config.toml"
    switched.write_text(text.replace('under_load = "lite"\n', 'under_load = "lite-tiny"\n')
                        .replace('knowledge = "dialplan/', f'knowledge = "{Path.cwd()}/dialplan/'))
    plan = Dialplan.from_config(load_config(switched))
    quick = plan.fallback(plan.resolve("100"))
    assert (quick.asr.model, quick.llm.model, quick.llm.max_tokens) == (
        "tiny.en", "qwen2.5-coder-0.5b-instruct-iq4_nl", 48)
    # The caller still hears the default profile's agent: its persona and facts, and hibari,
    # the imitation of its voice (Kokoro's af_heart).
    main = plan.resolve("100")
    assert quick.system_prompt == main.system_prompt and quick.facts == main.facts
    assert (main.tts.backend, main.tts.voice, main.tts.lead) == (
        "kokoro-onnx", "af_heart", "hibari")
    assert (quick.tts.backend, quick.tts.voice) == ("hibari", "heart")
    cheap = load_config(switched).profiles["lite-tiny"]
    piper = under_load(replace(main, tts=TTSOptions(backend="piper")), cheap)
    assert piper.tts.backend == "piper"  # no imitation of Piper's voice: it stays


@pytest.mark.parametrize(
    ("data", "key"),
    [
        ({"asr": {"beem_size": 2}}, "asr.beem_size"),
        ({"asr": {"beam_size": "five"}}, "asr.beam_size"),
        ({"asr": {"backend": "kaldi"}}, "asr.backend"),
        ({"llm": {"temperature": "hot"}}, "llm.temperature"),
        ({"sip": {"port": True}}, "sip.port"),
        ({"sip": {"registrar": {"pasword": "x"}}}, "sip.registrar.pasword"),
        ({"profiles": {"p": {"tts": {"voyce": "x"}}}}, "profiles.p.tts.voyce"),
        ({"profiles": {"p": {}}, "dialplan": {"100": "nope"}}, "dialplan.100"),
        ({"colour": "blue"}, "colour"),
        ({"audio": {"codecs": 3}}, "audio.codecs"),
        ({"profiles": {"p": {"limits": {"rtp_timeout_s": "10s"}}}},
         "profiles.p.limits.rtp_timeout_s"),
        # under the audio tail a turn keeps (the speculation would hear less than the endpoint)
        ({"audio": {"speculate_s": 0.05}}, "audio.speculate_s"),
        ({"profiles": {"p": {"audio": {"speculate_s": 0.5}}}}, "profiles.p.audio.speculate_s"),
        ({"scheduler": {"pairs": "no"}}, "scheduler.pairs"),
        ({"scheduler": {"slots": 2}}, "scheduler.slots"),
        ({"scheduler": True}, "scheduler"),
        ({"limits": {"idle_prompt_s": -1}}, "limits.idle_prompt_s = -1"),
        ({"profiles": {"p": {"limits": {"hold_s": "1m"}}}}, "profiles.p.limits.hold_s"),
        ({"profiles": {"p": {"still_there": 3}}}, "profiles.p.still_there"),
    ],
)
def test_bad_values_name_the_key(data, key):
    with pytest.raises(ConfigError) as e:
        parse_config(data)
    assert key in str(e.value)


def test_malformed_toml_and_missing_file(tmp_path):
    bad = tmp_path / "c.toml"
    bad.write_text("[asr\nmodel = 1")
    with pytest.raises(ConfigError, match="not valid TOML"):
        load_config(bad)
    with pytest.raises(ConfigError, match="not found"):
        load_config(tmp_path / "missing.toml")


def test_profile_overrides_merge_key_by_key():
    config = parse_config(
        {
            "asr": {"model": "base", "beam_size": 2},
            "llm": {"max_tokens": 50, "temperature": 0.1},
            "system_prompt": "global prompt",
            "profiles": {
                "a": {},
                "b": {
                    "llm": {"model": "smollm2-135m"},
                    "asr": {"backend": "voxtral", "voxtral": {"max_batch": 2}},
                    "greeting": "hi",
                },
            },
        }
    )
    a, b = config.profiles["a"], config.profiles["b"]
    assert (a.asr.model, a.asr.beam_size, a.llm.max_tokens) == ("base", 2, 50)
    assert a.system_prompt == b.system_prompt == "global prompt"
    assert b.llm.model == "smollm2-135m" and b.llm.max_tokens == 50  # merged, not replaced
    assert b.llm.temperature == 0.1 and b.greeting == "hi"
    assert b.asr.backend == "voxtral" and b.asr.model == "base" and b.asr.voxtral.max_batch == 2
    assert a.asr.backend == "faster-whisper"
    assert isinstance(a.llm.temperature, float)


def test_rtp_timeout_is_a_per_profile_limit():
    shipped = load_config("config.toml")
    assert {p.limits.rtp_timeout_s for p in shipped.profiles.values()} == {10.0}
    config = parse_config({"limits": {"rtp_timeout_s": 5},
                           "profiles": {"a": {}, "b": {"limits": {"rtp_timeout_s": 0}}}})
    a, b = config.profiles["a"].limits, config.profiles["b"].limits
    assert a.rtp_timeout_s == 5.0 and isinstance(a.rtp_timeout_s, float)
    assert b.rtp_timeout_s == 0.0  # never
    assert b.max_silence_s == a.max_silence_s == 30.0  # the other limits keep their defaults


def test_scheduler_pairs_is_read_and_on_by_default():
    assert parse_config({}).scheduler.pairs is True
    assert parse_config({"scheduler": {"pairs": False}}).scheduler.pairs is False
    assert load_config("config.toml").scheduler.pairs is True


def test_sip_allow_names_the_bad_network_and_checks_callers():
    with pytest.raises(ConfigError, match=r"sip\.allow = '10\.0\.0\.0/33'"):
        parse_config({"sip": {"allow": ["10.0.0.0/33"]}})
    sip = parse_config({"sip": {"allow": ["127.0.0.1", "10.0.0.0/8"]}}).sip
    assert sip.allows("127.0.0.1") and sip.allows("10.9.8.7")
    assert not sip.allows("127.0.0.2") and not sip.allows("")
    assert parse_config({"sip": {"allow": []}}).sip.allows("203.0.113.9")  # empty: anyone
    default = parse_config({}).sip  # loopback and private networks only (issue 47)
    assert default.allows("192.168.1.20") and not default.allows("203.0.113.9")
