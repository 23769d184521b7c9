"""``bench tools``: its false-claim rule and tables, and its core run on the small models.

The run checks the structure of what it prints and that the counts add up, never accuracy:
SmolLM2-135M is not expected to pick tools well.
"""

from __future__ import annotations

import re

import numpy as np
import pytest

from bench import tools_report
from bench.tools import (
    LIBRARY,
    QUICK,
    REQUESTS,
    Request,
    caller_audio,
    measure,
    profiles_for,
    report,
)
from bench.tools_report import (
    NONE,
    REPEAT,
    SILENT,
    ModelRun,
    Turn,
    confusion_table,
    false_claim,
    summary_table,
)
from dialplan import parse_config


def rows(table: str) -> list[list[str]]:
    """A markdown table's body rows, cell by cell."""
    lines = table.strip().splitlines()[2:]
    return [[c.strip() for c in line.strip("|").split(" | ")] for line in lines]


@pytest.mark.unit
@pytest.mark.parametrize(("reply", "claim"), [
    ("Transferring you to the children's section now.", "Transferring you"),
    ("Sure, I'll put you through to accounts.", "I'll put you through"),
    ("I've taken a message and will pass it on.", "I've taken"),
    ("Okay, I will now hang up. Goodbye!", "I will now hang up"),
    ("I\u2019ll connect you with the front desk.", "I'll connect"),
    ("I can transfer you to the front desk if you like.", ""),
    ("We open at ten on Saturday.", ""),
    ("You can leave a message with the front desk.", ""),
])
def test_a_false_claim_is_an_announced_action_not_an_offer(reply, claim):
    assert false_claim(reply) == claim


@pytest.mark.unit
def test_the_docstring_shows_every_claim_pattern():
    listed = [line.strip() for line in tools_report.__doc__.splitlines()]
    for pattern in tools_report.CLAIMS:
        assert pattern in listed


@pytest.mark.unit
def test_the_requests_cover_every_tool_and_entry_and_quick_keeps_one_of_each():
    assert len(REQUESTS) >= 30
    kinds = {r.tool for r in REQUESTS}
    assert kinds == {"transfer", "end_call", "take_message", NONE}
    assert {r.target for r in REQUESTS if r.tool == "transfer"} == set(LIBRARY["directory"])
    quick = [REQUESTS[i] for i in QUICK]
    assert {r.tool for r in quick} == kinds
    assert {r.target for r in quick if r.target} == set(LIBRARY["directory"])


@pytest.mark.unit
def test_tables_count_a_false_claim_as_wrong_and_rows_add_up():
    turns = [
        Turn("Kids please", "transfer", "children", "Kids please", "transfer", "children",
             first_audio_s=2.0, decision_s=1.5, tts_s=0.5),
        Turn("Fees please", "transfer", "accounts", "Fees please", "transfer", "front-desk",
             first_audio_s=2.2, decision_s=1.6, tts_s=0.6),
        Turn("Bye", "end_call", "", "Bye", "end_call", implicit=True, reply="Goodbye!",
             first_audio_s=1.0, decision_s=0.7, tts_s=0.3),
        Turn("Open?", NONE, "", "Open?", NONE, reply="Transferring you to the desk.",
             first_audio_s=1.2, decision_s=0.8, tts_s=0.4),
        Turn("Hmm", NONE, "", "Hmm", REPEAT, reply="Sorry?"),
        Turn("Dinosaurs?", NONE, "", "Dinosaurs?", SILENT, refused=["malformed"],
             refused_text=["<tools></tools>"]),
    ]
    run = ModelRun("default", "qwen", "base", turns)
    assert [t.right_tool for t in turns] == [True, True, True, False, False, False]
    assert [t.called for t in turns] == [True, True, False, False, False, True]
    assert run.right_tool() == 3
    [row] = rows(summary_table([run]))
    assert row[3:10] == ["3/6 (50 %)", "1/2 (50 %)", "1", "1", "1", "1", "2.10 / 1.10 s"]
    body = rows(confusion_table(run))
    head = [h.strip() for h in confusion_table(run).splitlines()[0].strip("|").split(" | ")]
    assert [r[0] for r in body] == ["transfer children", "transfer accounts", "end_call",
                                    "none"]
    for r in body:  # each row's chosen columns add up to its requests
        assert sum(int(c or 0) for c in r[2:-1]) == int(r[1])
    assert head[-4:] == ["repeat", "silent", "transfer front-desk", "false claims"]
    assert body[-1][-1] == "1"  # the plain question answered with a claim


@pytest.mark.model
def test_the_core_on_the_small_models_counts_every_request(stage_cache, tmp_path):
    # No tools in the config: the bench lends the profile the library's; under load it uses
    # another SmolLM2 profile, so there are two runs to compare.
    config = parse_config({"profiles": {
        "default": {"asr": {"model": "tiny.en"},
                    "llm": {"model": "smollm2-135m", "max_tokens": 24}, "under_load": "lite"},
        "lite": {"asr": {"model": "tiny.en"}, "llm": {"model": "smollm2-135m", "max_tokens": 16}},
    }})
    profiles = profiles_for(config, "default")
    assert [p.name for p in profiles] == ["default", "default/lite"]
    assert profiles[1].tools == profiles[0].tools == ("end_call", "transfer", "take_message")
    requests = [REQUESTS[0], REQUESTS[12], REQUESTS[18], Request("Are you open on Sunday?")]
    lines: list[str] = []
    runs = measure(profiles, requests, stage_cache, clips=tmp_path, progress=lines.append)
    assert len(list(tmp_path.glob("*.npz"))) == len(requests)  # kept for the next run
    again = caller_audio(requests[:1], stage_cache, clips=tmp_path)
    assert np.array_equal(again[0], caller_audio(requests[:1], stage_cache, clips=tmp_path)[0])
    assert len(runs) == 2 and all(len(r.turns) == len(requests) for r in runs)
    assert sum(line.startswith("heard") for line in lines) == len(requests)  # one shared ASR
    for r in runs:
        for t in r.turns:
            assert t.chosen in ("transfer", "end_call", "take_message", "collect_digits", NONE,
                                REPEAT, SILENT)
            assert t.heard and (t.chosen in (REPEAT, SILENT) or t.first_audio_s > 0)
            if t.first_audio_s is not None:
                assert t.first_audio_s == pytest.approx(t.decision_s + t.tts_s)
    text = report(runs, requests, profiles[0], "Piper")
    assert re.match(r"## bench tools: \d{4}-\d\d-\d\d, .+, \d+ cores?\n", text)
    summary = rows(text.split("\n\n")[2])
    assert [r[1] for r in summary] == ["default", "default/lite"]
    for r, row in zip(runs, summary, strict=True):
        assert row[3].startswith(f"{r.right_tool()}/{len(requests)} ")
        assert row[4].startswith(f"{sum(t.right_target for t in r.turns)}/1 ")
        assert int(row[5]) == sum(bool(t.claim) for t in r.turns)
        assert int(row[6]) == sum(t.chosen == SILENT for t in r.turns)
        assert int(row[7]) == sum(len(t.refused) for t in r.turns)
    for r in runs:
        table = text.split(f"**Confusion: {r.name}** (rows expected, columns chosen)\n\n")[1]
        table = table.split("\n\n")[0]
        body = rows(table)
        assert sum(int(row[1]) for row in body) == len(requests)
        for row in body:
            assert sum(int(c or 0) for c in row[2:-1]) == int(row[1])
    assert "**Latency of a tool turn**" in text
