"""The line that opens every benchmark's results, and the markdown tables after it."""

import datetime
import re

import pytest
from rich.table import Table
from rich.text import Text

from bench.header import cpu_model, markdown_header, markdown_table, rich_to_markdown

CPUINFO = """processor\t: 0
vendor_id\t: AuthenticAMD
model name\t: AMD EPYC   7B13 64-Core Processor
flags\t\t: fpu vme avx2

processor\t: 1
vendor_id\t: AuthenticAMD
model name\t: AMD EPYC   7B13 64-Core Processor
"""


@pytest.mark.unit
def test_the_cpu_model_is_cpuinfos_model_name():
    assert cpu_model(CPUINFO) == "AMD EPYC 7B13 64-Core Processor"


@pytest.mark.tool  # with no model name in cpuinfo, platform.processor() runs uname -p
def test_without_a_model_name_the_cpu_is_still_named():
    assert cpu_model("processor\t: 0\nBogoMIPS\t: 50.00\n")  # e.g. an ARM kernel


@pytest.mark.unit
def test_the_header_names_the_bench_the_date_the_cpu_and_its_cores():
    day = datetime.date(1999, 12, 31)
    line = markdown_header("bench call", day=day, cpu="AMD EPYC 7B13", cores=2)
    assert line == f"## bench call: {day.isoformat()}, AMD EPYC 7B13, 2 cores"
    assert markdown_header("bench tts", day=day, cpu="x", cores=1).endswith(", 1 core")


@pytest.mark.unit
def test_by_default_the_header_is_todays_date_and_this_machines_cpu():
    line = markdown_header("bench llm")
    match = re.fullmatch(r"## bench llm: (\d{4}-\d{2}-\d{2}), (.+), (\d+) cores?", line)
    assert match, line
    assert match[1] == datetime.date.today().isoformat()
    assert match[2] == cpu_model()
    assert int(match[3]) >= 1


@pytest.mark.unit
def test_a_markdown_table_aligns_numbers_right_and_escapes_pipes():
    text = markdown_table(("voice", "RTF"), [("piper | joe", 0.16), ("kokoro", "1.29")],
                          right=(1,))
    assert text.splitlines() == [
        "| voice | RTF |",
        "| --- | ---: |",
        "| piper \\| joe | 0.16 |",
        "| kokoro | 1.29 |",
    ]


@pytest.mark.unit
def test_a_rich_table_prints_as_markdown_with_its_title_and_caption():
    table = Table(title="bench tts", caption="p50 (max)")
    table.add_column("voice")
    table.add_column("first clause s", justify="right")
    table.add_row("joe", Text("0.21 (0.98)"))
    table.add_row("[not markup]", "2.76\n(4.26)")
    assert rich_to_markdown(table).split("\n\n") == [
        "**bench tts**",
        "| voice | first clause s |\n| --- | ---: |\n| joe | 0.21 (0.98) |\n"
        "| [not markup] | 2.76 (4.26) |",
        "p50 (max)",
    ]
