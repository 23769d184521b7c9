"""``bench soak`` refuses a ``--keep`` folder that holds an earlier run's call log.

Its counts come from the call log in that folder: an earlier run's records would be added to
this run's (a soak of 500 calls once reported 995 call records).
"""

from __future__ import annotations

import shutil

import pytest

from agent.cli import main as cli

pytestmark = pytest.mark.unit


def test_keep_folder_with_a_call_log_is_refused(tmp_path, capsys, monkeypatch):
    # The soak looks for its programs first; it is refused before it would run any of them.
    monkeypatch.setattr(shutil, "which", lambda name, *_, **__: f"/usr/bin/{name}")
    (tmp_path / "calls.db").write_bytes(b"")
    assert cli.main(["bench", "soak", "--calls", "1", "--keep", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "already holds a call log" in err and str(tmp_path) in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["calls.db"]  # nothing started
