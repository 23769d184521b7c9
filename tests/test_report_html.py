"""The HTML report: self-contained, charts drawn, and really rendered by headless chromium."""

from __future__ import annotations

import os
import shutil
import struct
import subprocess
import tempfile
import zlib
from datetime import UTC, datetime
from html.parser import HTMLParser

import numpy as np
import pytest
from db_fixtures import (
    known_records,
    sqlite_url_fixture,  # noqa: F401 (fixtures)
    write_records,
)
from test_report_queries import with_actions

from db import html as report_html
from db import reports
from db.migrate import make_engine

DRAWN = ("rect", "path", "circle", "line")


class _SVGCounter(HTMLParser):
    """Counts drawn elements inside each <svg>, and anything that could fetch a resource."""

    def __init__(self):
        super().__init__()
        self.svgs: list[dict[str, int]] = []
        self.inside = False
        self.fetching: list[str] = []

    def handle_starttag(self, tag, attrs):
        if tag == "svg":
            self.svgs.append({t: 0 for t in DRAWN})
            self.inside = True
        elif self.inside and tag in DRAWN:
            self.svgs[-1][tag] += 1
        if tag in ("script", "link", "img", "iframe", "object", "embed"):
            self.fetching.append(tag)
        self.fetching += [f"{tag}@{k}" for k, v in attrs if k in ("src", "href") and v]

    def handle_endtag(self, tag):
        if tag == "svg":
            self.inside = False


@pytest.fixture
def page(sqlite_url, tmp_path):
    write_records(sqlite_url, with_actions(known_records(datetime.now(UTC))), tmp_path / "spool")
    import argparse

    from agent.cli import report as cmd_report

    parser = argparse.ArgumentParser()
    cmd_report.add_parser(parser.add_subparsers(dest="command"))
    out = tmp_path / "report.html"
    args = parser.parse_args(["report", "--db", sqlite_url, "--since", "24h", "--html", str(out),
                              "--format", "json"])
    assert args.func(args) == 0
    return out


@pytest.mark.unit
def test_page_is_self_contained_with_drawn_charts(page):
    text = page.read_text(encoding="utf-8")
    counter = _SVGCounter()
    counter.feed(text)
    assert counter.fetching == []
    assert "url(" not in text and "@import" not in text
    # Only the SVG namespace may look like a URL; it is a name, never fetched.
    assert text.count("http") == text.count('xmlns="http://www.w3.org/2000/svg"')
    assert len(counter.svgs) == 4  # histogram, stage bars, RTF over time, call timeline
    for svg in counter.svgs:
        assert svg["rect"] + svg["path"] + svg["circle"] > 0, svg
    histogram, stages, rtf, timeline = counter.svgs
    assert stages["rect"] >= 13 * 6  # 13 turns x 6 stages, plus the legend
    assert rtf["path"] >= 2 and rtf["circle"] >= 26
    assert timeline["rect"] >= 3 * 3  # caller, stages and reply of vx-1's 3 turns


@pytest.mark.unit
def test_unanswered_turns_shown_per_group_with_reasons(page):
    text = page.read_text(encoding="utf-8")
    assert "16 turns (3 unanswered, 18.8%)" in text
    # Beside each histogram: answered n, then the unanswered count and rate of that backend.
    assert "faster-whisper (n=10; unanswered 2 of 12 turns, 16.7%)" in text
    assert "voxtral (n=3; unanswered 1 of 4 turns, 25.0%)" in text
    # The 5 s stamped on fw-2's unheard hangup turn is not in the histogram: its axis ends at
    # 1000 ms (the slowest answered turn), not 5000.
    histogram = text[text.index("<h2>Voice-to-voice</h2>"):text.index("</svg>")]
    assert ">1000</text>" in histogram and ">5000</text>" not in histogram
    # The table per group, with the reasons, and the totals row.
    assert ("<tr><td>faster-whisper</td><td>12</td><td>2</td><td>16.7%</td>"
            "<td>hangup 1, no-words 1</td></tr>") in text
    assert "<tr><td>voxtral</td><td>4</td><td>1</td><td>25.0%</td><td>barge-in 1</td></tr>" in text
    assert ("<tr><td>(all)</td><td>16</td><td>3</td><td>18.8%</td>"
            "<td>barge-in 1, hangup 1, no-words 1</td></tr>") in text
    # The charted call (fw-2, with the slowest turn) marks its unanswered turn.
    assert "turn 5: no reply (hangup)" in text


@pytest.mark.unit
def test_tool_calls_and_messages(page, sqlite_url):
    text = page.read_text(encoding="utf-8")
    section = text[text.index("<h2>Tool calls and messages</h2>"):]
    # The window's tool calls per name and outcome (transfers included), with latencies.
    assert ("<tr><td>lookup_order</td><td>timeout</td><td>1</td><td>3,000</td><td>3,000</td>"
            "</tr><tr><td>transfer</td><td>busy</td><td>1</td><td>2,500</td><td>2,500</td></tr>"
            "<tr><td>transfer</td><td>ok</td><td>1</td><td>320</td><td>320</td></tr>") in section
    # The charted call (fw-2, with the slowest turn): its tool call, no recording.
    assert "Call fw-2 (inbound): not recorded." in section
    assert ("<tr><td>lookup_order</td><td>0</td><td>3,000</td><td>timeout</td><td>llm</td>"
            "</tr>") in section
    engine = make_engine(sqlite_url)
    report = reports.build_report(engine, None)
    vx = reports.call_timeline(engine, "vx-1")
    engine.dispose()
    section = report_html.actions_section(report, vx)
    assert "Call vx-1 (outbound): recording /media/2026/vx-1.wav (120.0 s)." in section
    assert ("<tr><td>transfer</td><td>2</td><td>320</td><td>ok</td><td>llm</td></tr>"
            "<tr><td>transfer</td><td>-</td><td>2,500</td><td>busy</td><td>keypad</td></tr>"
            ) in section
    assert ("<td>Please call me back about the invoice</td><td>/media/2026/vx-1-msg.wav</td>"
            in section)
    empty = reports.Report(generated_at=datetime.now(UTC), since=None, by="backend",
                           totals=reports.Totals(0, 0, 0, 0), groups=[], rtf=[], slowest=[],
                           recent_calls=[])
    assert report_html.actions_section(empty, None) == "<p>No tool calls in this window.</p>"


@pytest.mark.unit
def test_text_is_escaped(sqlite_url, tmp_path):
    records = known_records(datetime.now(UTC))
    records[1].transcript = "<script>alert('x')</script>"
    no_words = next(r for r in records if getattr(r, "unanswered", "") == "no-words")
    no_words.unanswered = "<b>odd</b>"  # a reason is text too: it is shown escaped
    records = with_actions(records)
    next(r for r in records if getattr(r, "name", "") == "lookup_order").name = "<i>x</i>"
    next(r for r in records if hasattr(r, "audio_path")).text = "<u>call me</u>"
    write_records(sqlite_url, records, tmp_path / "spool")
    engine = make_engine(sqlite_url)
    report = reports.build_report(engine, None)
    turns = reports.load_turns(engine)
    text = report_html.render_html(report, turns, reports.call_timeline(engine, "fw-1"))
    actions = report_html.actions_section(report, reports.call_timeline(engine, "vx-1"))
    engine.dispose()
    assert "<script>" not in text and "&lt;script&gt;" in text
    assert "<b>" not in text and text.count("&lt;b&gt;odd&lt;/b&gt;") >= 3  # tables, timeline
    assert "<i>" not in text and "&lt;i&gt;x&lt;/i&gt;" in text  # a tool's name
    assert "<u>" not in actions and "&lt;u&gt;call me&lt;/u&gt;" in actions  # a message


@pytest.mark.unit
def test_empty_window_still_renders():
    report = reports.Report(generated_at=datetime.now(UTC), since=None, by="backend",
                            totals=reports.Totals(0, 0, 0, 0), groups=[], rtf=[], slowest=[],
                            recent_calls=[])
    text = report_html.render_html(report, [], None)
    assert text.count("no data in this window") == 4
    assert "0 turns (0 unanswered, -)" in text  # no turns: no rate, not 0 %


def _png_rows(png: bytes) -> tuple[int, int, list[bytes]]:
    """Width, height and the still-filtered scanlines of an 8-bit RGB(A) PNG."""
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat, ihdr = 8, b"", None
    while pos < len(png):
        (length,) = struct.unpack(">I", png[pos:pos + 4])
        kind, data = png[pos + 4:pos + 8], png[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            ihdr = struct.unpack(">IIBBBBB", data)
        elif kind == b"IDAT":
            idat += data
        pos += 12 + length
    width, height, depth, color = ihdr[:4]
    assert depth == 8 and color in (2, 6), ihdr
    stride = 1 + width * (3 if color == 2 else 4)
    raw = zlib.decompress(idat)
    return width, height, [raw[i * stride:(i + 1) * stride] for i in range(height)]


def _content_rows(png: bytes) -> float:
    """Fraction of scanlines that vary along the row.

    Without PIL the PNG is not unfiltered: in a blank (uniform) image every filtered scanline is
    constant after its first pixel, whichever filter the encoder chose, so a row whose filtered
    bytes take several values has something drawn on it.
    """
    _, height, rows = _png_rows(png)
    varied = sum(1 for r in rows if len(np.unique(np.frombuffer(r[5:], np.uint8))) > 2)
    return varied / height


@pytest.mark.unit
def test_content_rows_sees_blank_png():
    width, height = 64, 32
    rows = b"".join(b"\x00" + b"\xff" * (width * 3) for _ in range(height))
    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(
            ">I", zlib.crc32(kind + data))

    png = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(
        b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b"")
    assert _content_rows(png) == 0.0


@pytest.mark.tool
@pytest.mark.needs("chromium")
def test_chromium_renders_charts(page, tmp_path):
    shot = tmp_path / "shot.png"
    profile = tempfile.mkdtemp(prefix="chromium-profile-")
    try:
        subprocess.run(
            ["chromium", "--headless", "--no-sandbox", "--disable-gpu",
             "--disable-background-networking", "--disable-component-update", "--no-first-run",
             # Any network request would fail: the page must not need one.
             "--host-resolver-rules=MAP * ~NOTFOUND", f"--user-data-dir={profile}",
             f"--screenshot={shot}", "--window-size=1200,2000", page.as_uri()],
            check=True, capture_output=True, timeout=90, env={**os.environ, "HOME": profile})
    finally:
        shutil.rmtree(profile, ignore_errors=True)
    png = shot.read_bytes()
    width, height, _ = _png_rows(png)
    assert (width, height) == (1200, 2000)
    try:
        from PIL import Image

        pixels = np.asarray(Image.open(shot).convert("RGB")).reshape(-1, 3)
        assert (pixels.min(axis=1) < 200).mean() > 0.02  # enough non-white ink
        assert len(np.unique(pixels, axis=0)) > 8  # charts are colourful
    except ImportError:  # Pillow is no dependency: the check below needs none, and is made
        pass             # either way; Pillow, where it is installed, also checks the colours
    assert _content_rows(png) > 0.2  # a blank chromium page scores 0.0, this page about 0.5
