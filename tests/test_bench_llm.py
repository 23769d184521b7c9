"""``bench llm``: speed and agreement figures of GGUF models against a reference."""

from __future__ import annotations

import argparse
import json

import pytest

from agent.bench.llm import add_arguments, run
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


def test_models_of_two_tokenizers_are_refused(capsys, tmp_path):
    p = argparse.ArgumentParser()
    add_arguments(p)
    args = p.parse_args(["--models", "smollm2-135m", "qwen2.5-1.5b-instruct", "--questions", "1"])
    assert run(args, CONFIG) == 2
    assert "only models of one tokenizer compare" in " ".join(capsys.readouterr().err.split())
