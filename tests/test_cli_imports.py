"""What a command imports: only the bench it runs, and no bench for any other command.

Issue 59: every start of ``serve`` or ``call`` imported all ten benches (and jiwer, G.722 and
the sipp harnesses with them). Read from a fresh interpreter's ``sys.modules`` once the help is
printed: ``-X importtime``'s listing on stderr stopped partway through the commands' imports
here, and would have missed them.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BENCH_ONLY = ("bench", "testkit", "jiwer", "G722")  # testkit: the benches' and tests' caller


LIST = """
import sys
from agent.cli.main import main
try:
    main(sys.argv[1:])
except SystemExit as e:
    assert not e.code, e.code
print("MODULES", " ".join(sorted(sys.modules)))
"""


def imported(*argv: str) -> set[str]:
    """The modules ``callagent ARGV`` imports (its help printed, nothing run)."""
    done = subprocess.run([sys.executable, "-c", LIST, *argv], cwd=ROOT, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    line = next(x for x in done.stdout.splitlines() if x.startswith("MODULES "))
    return set(line.split()[1:])


@pytest.mark.tool
@pytest.mark.parametrize("argv", [("--help",), ("serve", "--help"), ("call", "--help"),
                                  ("bench", "--help")])
def test_commands_import_no_bench(argv):
    mods = imported(*argv)
    assert "agent.cli.serve" in mods  # the listing is read: every command's parser is built
    assert not {m for m in mods if m.split(".")[0] in BENCH_ONLY or m.startswith("bench")}


@pytest.mark.tool
def test_a_bench_imports_itself_and_no_other():
    mods = imported("bench", "answers", "--help")
    benches = {m for m in mods if m.startswith("bench.")}
    assert "bench.answers" in benches
    assert not benches & {"bench.call", "bench.soak", "bench.amd",
                          "bench.flood", "bench.pipeline"}
