"""``bench llm``: speed and agreement figures of GGUF models against a reference."""

from __future__ import annotations

import argparse
import json

import pytest

from bench.llm import add_arguments, run
from dialplan import parse_config
from models import catalog
from models.llm.quantize import requantize

pytestmark = pytest.mark.model

CONFIG = parse_config({"profiles": {"default": {"greeting": "How can I help you?"}},
                       "dialplan": {"1": "default"}})


def bench(capsys, *models: str, questions: int = 2) -> list[dict]:
    p = argparse.ArgumentParser()
    add_arguments(p)
    args = p.parse_args(["--models", *models, "--questions", str(questions), "--json"])
    assert run(args, CONFIG) == 0
    return json.loads(capsys.readouterr().out.splitlines()[0])


def test_a_model_agrees_with_itself_everywhere(capsys):
    path = str(catalog.resolve("smollm2-135m", "llm"))
    ref, same = bench(capsys, "smollm2-135m", path)
    assert ref["model"] == "smollm2-135m" and same["model"] == path
    assert len(same["step_ms"]) == len(ref["step_ms"]) > 2  # fed the reference's reply
    assert len(same["kld"]) == len(same["same_top"]) == len(ref["step_ms"]) + 2
    assert max(same["kld"]) < 1e-6 and all(same["same_top"])
    assert same["same_reply"] == ref["same_reply"] == 2
    assert all(0 < ms < 1000 for ms in ref["prompt_ms_per_token"] + same["prompt_ms_per_token"])


def test_a_requantized_model_is_close_but_not_the_same(capsys, tmp_path):
    wider = tmp_path / "smollm2-q8_0.gguf"
    requantize(catalog.resolve("smollm2-135m", "llm"), wider, "Q8_0")
    _, q8 = bench(capsys, "smollm2-135m", str(wider))
    assert 0 < sum(q8["kld"]) / len(q8["kld"]) < 0.05
    assert sum(q8["same_top"]) / len(q8["same_top"]) > 0.8


def test_the_output_matrix_may_be_as_narrow_as_the_rest(capsys, tmp_path):
    src = catalog.resolve("smollm2-135m", "llm")
    picked, narrow = tmp_path / "picked.gguf", tmp_path / "narrow.gguf"
    requantize(src, picked, "IQ4_NL")
    requantize(src, narrow, "IQ4_NL", output_type="IQ4_NL")
    # SmolLM2's output matrix is its token embedding, 49152 x 576, which llama.cpp keeps at
    # Q8_0 (8.5 bits a weight) in an IQ4_NL file: 4 bits a weight less.
    saved = picked.stat().st_size - narrow.stat().st_size
    assert saved == pytest.approx(49152 * 576 * 4 / 8, rel=0.02)
    _, out = bench(capsys, str(picked), str(narrow))
    assert 0 < sum(out["kld"]) / len(out["kld"]) < 0.2
    assert sum(out["same_top"]) / len(out["same_top"]) > 0.7
    with pytest.raises(ValueError, match="Q5_K"):
        requantize(src, tmp_path / "x.gguf", "IQ4_NL", output_type="Q5_K")


def test_models_of_two_tokenizers_are_refused(capsys, tmp_path):
    p = argparse.ArgumentParser()
    add_arguments(p)
    args = p.parse_args(["--models", "smollm2-135m", "qwen2.5-1.5b-instruct", "--questions", "1"])
    assert run(args, CONFIG) == 2
    assert "only models of one tokenizer compare" in " ".join(capsys.readouterr().err.split())
