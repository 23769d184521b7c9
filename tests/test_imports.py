"""Imports point down: CLI, benchmarks, wiring, call, turn and SIP, then models, db, dialplan.

Checked on every project module by walking its syntax tree (an introspection test in the spirit
of faster-whisper's signature test), so an upward arrow fails here before it tangles the code:

* only ``agent/sip/`` imports pjsua2: its ``useragent`` and ``callbacks`` modules (STYLE.md 2);
* ``db/``, ``models/`` and ``dialplan/`` never import ``agent``; ``dialplan`` imports neither
  ``models`` nor ``db``; ``db`` and ``models`` do not import each other;
* inside ``agent/`` a layer imports only layers below it (table :data:`AGENT_LAYERS`);
* runtime code never imports ``tests``.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[1]
RUNTIME = ("agent", "models", "dialplan", "db")
PJSUA2_ALLOWED = {Path("agent/sip/useragent.py"), Path("agent/sip/callbacks.py")}

# Package -> the project packages it may import (besides itself).
BASE_RULES = {
    "dialplan": set(),
    "models": {"dialplan"},
    "db": {"dialplan"},
}
# agent sub-packages, top to bottom: each may import only those listed after it (and models,
# db, dialplan). A call (agent.call) uses the turn runner and the audio link, never the CLI.
AGENT_LAYERS = (
    "agent.cli",
    ("agent.bench", "agent.cluster"),
    ("agent.server", "agent.simulate", "agent.supervisor"),
    "agent.call",
    ("agent.turn", "agent.sip"),
)


def imported_modules(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
            names.update(f"{node.module}.{a.name}" for a in node.names)
        elif (isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "import_module"
              and node.args and isinstance(node.args[0], ast.Constant)):
            names.add(str(node.args[0].value))
    return names


def module_name(path: Path) -> str:
    rel = path.relative_to(ROOT).with_suffix("")
    parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
    return ".".join(parts)


def project_files(packages=(*RUNTIME, "tests")) -> list[Path]:
    return sorted(p for pkg in packages for p in (ROOT / pkg).rglob("*.py"))


def _agent_rank(module: str) -> int | None:
    for rank, layer in enumerate(AGENT_LAYERS):
        for name in (layer if isinstance(layer, tuple) else (layer,)):
            if module == name or module.startswith(name + "."):
                return rank
    return None


def _project_imports(path: Path) -> set[str]:
    return {m for m in imported_modules(path) if m.split(".")[0] in (*RUNTIME, "tests")}


def test_walk_finds_the_layers():
    files = {p.relative_to(ROOT) for p in project_files()}
    assert Path("agent/sip/useragent.py") in files and len(files) > 40
    assert "pjsua2" in imported_modules(ROOT / "agent/sip/useragent.py")
    for layer in AGENT_LAYERS:
        for name in (layer if isinstance(layer, tuple) else (layer,)):
            assert any(module_name(p).startswith(name) for p in project_files(("agent",))), name


def test_only_the_sip_user_agent_imports_pjsua2():
    offenders = [
        str(p.relative_to(ROOT)) for p in project_files()
        if p.relative_to(ROOT) not in PJSUA2_ALLOWED
        and any(m == "pjsua2" or m.startswith("pjsua2.") for m in imported_modules(p))
    ]
    assert offenders == []


def test_lower_packages_never_import_upward():
    offenders = []
    for pkg, allowed in BASE_RULES.items():
        for p in project_files((pkg,)):
            for m in _project_imports(p):
                top = m.split(".")[0]
                if top != pkg and top not in allowed:
                    offenders.append(f"{p.relative_to(ROOT)} imports {m}")
    assert offenders == []


def test_agent_layers_import_only_downward():
    offenders = []
    for p in project_files(("agent",)):
        mine = _agent_rank(module_name(p))
        if mine is None:
            continue  # agent/__init__.py
        for m in _project_imports(p):
            if m == "agent" or not m.startswith("agent."):
                continue
            theirs = _agent_rank(m)
            same_layer = theirs == mine and m.split(".")[:2] == module_name(p).split(".")[:2]
            if theirs is None or (theirs <= mine and not same_layer):
                offenders.append(f"{p.relative_to(ROOT)} imports {m}")
    assert offenders == []


def test_runtime_never_imports_tests():
    offenders = [f"{p.relative_to(ROOT)} imports {m}" for p in project_files(RUNTIME)
                 for m in _project_imports(p) if m.split(".")[0] == "tests"]
    assert offenders == []


def test_checker_catches_an_upward_import(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("from agent.call.session import CallSession\nimport pjsua2\n")
    assert {"agent.call.session", "pjsua2"} <= imported_modules(bad)
    assert _agent_rank("agent.call.session") > _agent_rank("agent.cli.main")
