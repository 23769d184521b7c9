"""Voxtral backend on a real (tiny, random-weight) transformers model, loaded by the real code.

Random weights give gibberish text, so the checks are about token ids: every optimisation and
every batching path must produce exactly what the plain eager, one-at-a-time path produces.
"""

from __future__ import annotations

import threading
import time
from dataclasses import replace

import numpy as np
import pytest
import voxtral_tiny as tiny

from models.asr.voxtral_batcher import MicroBatcher
from models.errors import ModelMissingError
from tests.needs import require_module

transformers = require_module("transformers")  # in the test extra: missing fails, naming it

from dialplan.options import ASROptions, VoxtralOptions  # noqa: E402
from models.asr.voxtral import VoxtralASR, install_from, max_new_tokens, resolve  # noqa: E402

OPTIMIZED = VoxtralOptions(attention="sdpa", dtype="float32", compile="off", static_cache="on",
                           batch_window_s=0.0, max_batch=4, warmup=True)


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    return tiny.build(tmp_path_factory.mktemp("voxtral"))


@pytest.fixture(scope="module")
def audios():
    return tiny.utterances()


@pytest.fixture(scope="module")
def reference(model_dir, audios):
    """Token ids from the eager path, one utterance per generate()."""
    asr = VoxtralASR(tiny.options(model_dir))
    return [asr.generate_ids([a])[0] for a in audios]


@pytest.mark.model
def test_prompt_matches_transcription_template(model_dir):
    asr = VoxtralASR(tiny.options(model_dir))
    prompt = asr.prompt.prompts([np.zeros(16000, np.float32)], "en")[0]
    ids = prompt.token_ids
    # <s>[INST][BEGIN_AUDIO][AUDIO]*375[/INST]lang:en[TRANSCRIBE], as mistral-common builds it.
    assert ids[:3] == [1, 3, 25] and ids[3:378] == [24] * 375 and ids[378] == 4
    assert asr.prompt.decode(ids[379:-1]) == "lang:en" and ids[-1] == 34
    assert prompt.features.shape == (1, 128, 3000)


@pytest.mark.model
def test_real_processor_path_builds_the_same_prompt(model_dir, tmp_path, audios):
    """With a tekken.json the backend uses VoxtralProcessor; its prompt equals the minimal one."""
    require_module("mistral_common")
    import shutil

    from models.asr.voxtral_tiny import write_tekken

    real_dir = tmp_path / "voxtral-tekken"
    shutil.copytree(model_dir, real_dir)
    write_tekken(real_dir)
    real = VoxtralASR(tiny.options(real_dir, OPTIMIZED))
    mini = VoxtralASR(tiny.options(model_dir, OPTIMIZED))
    assert (real.prompt.kind, mini.prompt.kind) == ("processor", "minimal")
    long = tiny.utterances((31.0,))[0]
    for lang in ("en", None):
        for a, b in zip(real.prompt.prompts([*audios, long], lang),
                        mini.prompt.prompts([*audios, long], lang), strict=True):
            assert a.token_ids == b.token_ids
            # The processor round-trips audio through a PCM16 WAV: features differ by ~1e-2.
            assert np.allclose(np.asarray(a.features), b.features, atol=0.05)
    out = real.transcribe_batch(audios)
    assert len(out) == 3 and all(t.metrics.batch_size == 3 for t in out)


@pytest.mark.model
def test_optimized_batched_matches_eager(model_dir, audios, reference):
    assert all(len(r) > 0 for r in reference)
    for vx in (OPTIMIZED, replace(OPTIMIZED, static_cache="off")):
        asr = VoxtralASR(tiny.options(model_dir, vx))
        assert asr.settings.attention == "sdpa"
        assert asr.generate_ids(audios) == reference


@pytest.mark.model
def test_batch_equals_one_by_one(model_dir, audios, reference):
    asr = VoxtralASR(tiny.options(model_dir, OPTIMIZED))
    batched = asr.transcribe_batch(audios)
    single = [asr.transcribe(a) for a in audios]
    assert [t.text for t in batched] == [t.text for t in single]
    assert [t.text for t in single] == [asr.prompt.decode(r).strip() for r in reference]
    assert {t.metrics.batch_size for t in batched} == {3}
    assert all(t.metrics.backend == "voxtral" and t.metrics.rtf > 0 for t in batched)


@pytest.mark.model
def test_concurrent_calls_share_one_generate(model_dir, audios, reference):
    vx = replace(OPTIMIZED, batch_window_s=0.4)  # generous: the test machine is shared
    results: dict[int, object] = {}
    with VoxtralASR(tiny.options(model_dir, vx)) as asr:
        barrier = threading.Barrier(len(audios))

        def call(i):
            barrier.wait()
            results[i] = asr.transcribe(audios[i])

        threads = [threading.Thread(target=call, args=(i,)) for i in range(len(audios))]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
    assert sorted(results) == [0, 1, 2]
    assert all(results[i].metrics.batch_size > 1 for i in results)
    assert [results[i].text for i in range(3)] == [asr.prompt.decode(r).strip() for r in reference]


@pytest.mark.model
def test_empty_and_long_audio(model_dir):
    asr = VoxtralASR(tiny.options(model_dir, OPTIMIZED))
    assert asr.transcribe(np.zeros(0, np.float32)).text == ""
    long = tiny.utterances((31.0,))[0]  # two 30 s chunks: 750 audio tokens, one prompt
    prompt = asr.prompt.prompts([long], "en")[0]
    assert prompt.features.shape[0] == 2 and prompt.token_ids.count(24) == 750
    mixed = [long, tiny.utterances((1.0,))[0]]  # different prompt lengths: left padding
    assert asr.generate_ids(mixed) == [asr.generate_ids([a])[0] for a in mixed]


@pytest.mark.model
@pytest.mark.slow
def test_compiled_static_cache_matches_eager(model_dir, audios, reference):
    # CPU inductor compiles for ~30 s on 2 cores, hence `slow` and compile=auto off on CPU.
    vx = replace(OPTIMIZED, compile="on", static_cache="on")
    asr = VoxtralASR(tiny.options(model_dir, vx))
    assert asr.settings.compile and not asr._compile_failed_logged
    assert asr.generate_ids([audios[0]]) == [reference[0]]


@pytest.mark.unit
def test_resolve_defaults():
    cpu = resolve(ASROptions(backend="voxtral"), cuda_available=False, flash_available=True)
    assert (cpu.device, cpu.dtype, cpu.attention, cpu.compile, cpu.static_cache) == (
        "cpu", "float32", "sdpa", False, False)
    gpu = resolve(ASROptions(backend="voxtral"), cuda_available=True, flash_available=False)
    assert (gpu.device, gpu.dtype, gpu.attention, gpu.compile, gpu.static_cache) == (
        "cuda", "bfloat16", "sdpa", True, True)
    fa = resolve(ASROptions(backend="voxtral"), cuda_available=True, flash_available=True)
    assert fa.attention == "flash_attention_2"
    forced = resolve(ASROptions(backend="voxtral", device="cpu",
                                voxtral=VoxtralOptions(attention="flash_attention_2")), True, True)
    assert forced.device == "cpu" and forced.attention == "sdpa"
    assert max_new_tokens(2.0, 6.0) == 20 and max_new_tokens(1e4, 6.0) == 448


@pytest.mark.unit
def test_missing_transformers_is_clear(monkeypatch):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "transformers" else real(name, *a))
    with pytest.raises(ModelMissingError, match=r"callagent\[voxtral\]"):
        VoxtralASR(ASROptions(backend="voxtral", model="/nowhere"))


@pytest.mark.unit
def test_missing_model_is_clear(tmp_path, monkeypatch):
    with pytest.raises(ModelMissingError, match="not found"):
        VoxtralASR(ASROptions(backend="voxtral", model=str(tmp_path / "absent")))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(ModelMissingError, match="HF_HUB_OFFLINE"):
        VoxtralASR(ASROptions(backend="voxtral", model="mistralai/Voxtral-Mini-3B-2507"))
    (tmp_path / "empty").mkdir()
    with pytest.raises(ModelMissingError, match="config.json"):
        VoxtralASR(ASROptions(backend="voxtral", model=str(tmp_path / "empty")))


@pytest.mark.model
def test_install_from(model_dir, tmp_path):
    installed = install_from(model_dir, tmp_path / "store")
    assert (installed / "config.json").exists() and (installed / "model.safetensors").exists()
    asr = VoxtralASR(tiny.options(installed))
    assert asr.model_name == "voxtral-tiny"
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "config.json").write_text('{"model_type": "whisper"}')
    with pytest.raises(ModelMissingError, match="not voxtral"):
        install_from(bad, tmp_path / "store")
    (bad / "config.json").write_text('{"model_type": "voxtral"}')
    with pytest.raises(ModelMissingError, match="no weights"):
        install_from(bad, tmp_path / "store")


@pytest.mark.unit
def test_batcher_groups_propagates_errors_and_closes():
    calls: list[int] = []

    def fn(items):
        calls.append(len(items))
        if "boom" in items:
            raise ValueError("boom")
        return [x.upper() for x in items]

    b = MicroBatcher(fn, window_s=0.3, max_batch=8)
    out: dict[str, object] = {}

    def go(x):
        try:
            out[x] = b.submit(x)
        except ValueError as exc:
            out[x] = exc

    threads = [threading.Thread(target=go, args=(x,)) for x in ("a", "b", "c")]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert out == {"a": "A", "b": "B", "c": "C"} and calls == [3]
    go("boom")
    assert isinstance(out["boom"], ValueError)
    started = time.monotonic()
    b.close()
    assert time.monotonic() - started < 1.0
    with pytest.raises(RuntimeError, match="closed"):
        b.submit("late")
