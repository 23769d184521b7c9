"""Only agent/sip.py may import pjsua2 (STYLE.md item 2), checked on every project module."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("agent", "models", "dialplan", "db", "tests")
ALLOWED = {Path("agent/sip.py")}


def imported_modules(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
        elif (isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "import_module"
              and node.args and isinstance(node.args[0], ast.Constant)):
            names.add(str(node.args[0].value))
    return names


def project_files() -> list[Path]:
    return sorted(p for pkg in PACKAGES for p in (ROOT / pkg).rglob("*.py"))


def test_walk_finds_the_sip_module():
    files = {p.relative_to(ROOT) for p in project_files()}
    assert Path("agent/sip.py") in files and len(files) > 20
    assert "pjsua2" in imported_modules(ROOT / "agent/sip.py")


def test_only_sip_module_imports_pjsua2():
    offenders = [
        str(p.relative_to(ROOT)) for p in project_files()
        if p.relative_to(ROOT) not in ALLOWED
        and any(m == "pjsua2" or m.startswith("pjsua2.") for m in imported_modules(p))
    ]
    assert offenders == []
