"""bench prefix's facts block: cut to the size asked, repeated past the facts' end."""

from __future__ import annotations

import pytest

from bench.prefix import facts_block

pytestmark = pytest.mark.unit


def words(text: str) -> int:
    return len(text.split())


def test_the_block_reaches_the_size_and_numbers_its_repeats():
    lines = ["Open at nine.", "Parking behind."]
    block = facts_block(lines, 9, words)
    assert block.splitlines() == ["Open at nine.", "Parking behind.", "Open at nine. (1)"]
    assert words(block) >= 9 and words("\n".join(block.splitlines()[:-1])) < 9


def test_no_size_is_no_facts():
    assert facts_block(["Open at nine."], 0, words) == ""
