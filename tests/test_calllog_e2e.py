"""simulate -> call log -> report, with two ASR backends switched by profile in one process."""

import json

import pytest

from agent.cli import main as cli
from agent.simulate import simulate
from db.writer import CallLogWriter
from dialplan import parse_config
from dialplan.options import DBOptions
from models.asr.voxtral_tiny import build_tiny_voxtral
from tests.conftest import TEST_CONFIG

pytestmark = [pytest.mark.model, pytest.mark.tool]  # espeak-ng says the question


@pytest.fixture(scope="module")
def two_backend_config(tmp_path_factory):
    tiny = build_tiny_voxtral(tmp_path_factory.mktemp("voxtral") / "tiny-voxtral")
    fast_llm = {"model": "smollm2-135m", "max_tokens": 30}
    return parse_config(
        {
            "system_prompt": TEST_CONFIG["system_prompt"],
            "profiles": {
                "whisper": {"asr": {"model": "tiny.en"}, "llm": fast_llm},
                "voxtral": {
                    "llm": fast_llm,
                    "asr": {"backend": "voxtral", "model": str(tiny), "voxtral": {"warmup": False}},
                },
            },
            "dialplan": {"100": "whisper", "200": "voxtral"},
        }
    )


def test_report_by_backend_reads_both_backends_from_the_db(
    tmp_path, two_backend_config, stage_cache, question_audio, capsys
):
    url = f"sqlite:///{tmp_path / 'log.db'}"
    writer = CallLogWriter(DBOptions(url=url, spool_dir=str(tmp_path / "spool")))
    calls = {}
    for name in ("whisper", "voxtral"):
        profile = two_backend_config.profiles[name]
        stages = stage_cache.stages(profile)
        calls[name] = simulate(*question_audio, profile, stages, call_log=writer, fast=True)
        # Loaded once per process: asking again gives the very same model objects.
        assert stage_cache.stages(profile).asr is stages.asr
    assert writer.close(timeout=10)
    assert (
        stage_cache.stages(two_backend_config.profiles["whisper"]).llm
        is stage_cache.stages(two_backend_config.profiles["voxtral"]).llm
    )
    assert {"faster-whisper", "voxtral"} <= {
        b for s, b in stage_cache.models.loaded() if s == "asr"
    }

    capsys.readouterr()
    assert cli.main(["report", "--by", "backend", "--format", "json", "--db", url]) == 0
    report = json.loads(capsys.readouterr().out)
    groups = {g["key"]: g for g in report["groups"]}
    assert set(groups) == {"faster-whisper", "voxtral"}
    for name, backend in (("whisper", "faster-whisper"), ("voxtral", "voxtral")):
        turns = calls[name].turns
        assert turns and groups[backend]["turns"] == len(turns)
        # The numbers are the recorded ones, read back, not recomputed.
        v2v = groups[backend]["stages"]["voice_to_voice"]
        assert v2v["p50"] == pytest.approx(turns[0].voice_to_voice_s, abs=1e-9)
        asr = groups[backend]["stages"]["asr"]
        assert asr["p50"] == pytest.approx(turns[0].asr_s, abs=1e-9)
    rtf = {r["backend"]: r for r in report["rtf"]}
    assert set(rtf) >= {"faster-whisper", "voxtral"}

    capsys.readouterr()
    call_id = calls["voxtral"].call_id
    assert cli.main(["report", "--call", call_id, "--format", "json", "--db", url]) == 0
    timeline = json.loads(capsys.readouterr().out)
    assert json.dumps(timeline).count("voxtral") >= 1
