"""Imports point down: CLI, benchmarks, wiring, call, turn and SIP, then models, db, dialplan.

Checked on every project module by walking its syntax tree (an introspection test in the spirit
of faster-whisper's signature test), so an upward arrow fails here before it tangles the code:

* only ``agent/sip/`` imports pjsua2: its ``useragent``, ``callbacks``, ``pjconfig`` and ``legs``
  modules (STYLE.md 2);
* ``db/``, ``models/`` and ``dialplan/`` never import ``agent``; ``dialplan`` imports neither
  ``models`` nor ``db``; ``db`` and ``models`` do not import each other;
* inside ``agent/`` a layer imports only layers below it (table :data:`AGENT_LAYERS`);
* ``bench/`` (the benchmarks, beside the agent) may import it and what is below it; no agent
  module imports a bench (``callagent bench`` loads one by name);
* ``testkit/`` (the outside of a call, shared by the tests and the benchmarks) imports only
  ``models``, ``db`` and ``dialplan``; ``bench`` and ``tests`` may import it, no agent module does;
* runtime code never imports ``tests``;
* no import circle among runtime modules, not even through an ``if TYPE_CHECKING:`` or a
  function-local import (the failure prints each circle, file and line of every arrow);
* inside ``models/``: a stage package's ``__init__`` and ``models/registry.py`` import no
  backend (the registry names them in ``BACKENDS``, each an existing class); a module of one
  stage imports another stage only through its ``base``; no backend imports another;
* runtime code imports no private name (``_x``) from outside the package that owns it.
  ``tests/`` may: they are white-box.
"""

from __future__ import annotations

import ast
from collections import deque
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[1]
RUNTIME = ("agent", "models", "dialplan", "db", "bench", "testkit")
PJSUA2_ALLOWED = {Path("agent/sip/useragent.py"), Path("agent/sip/callbacks.py"),
                  Path("agent/sip/pjconfig.py"), Path("agent/sip/legs.py")}

# Package -> the project packages it may import (besides itself).
BASE_RULES = {
    "dialplan": set(),
    "models": {"dialplan"},
    "db": {"dialplan"},
    "bench": {"agent", "models", "db", "dialplan", "testkit"},
    "testkit": {"models", "db", "dialplan"},
}
# agent sub-packages, top to bottom: each may import only those listed after it (and models,
# db, dialplan). A call (agent.call) uses the turn runner and the audio link, never the CLI.
AGENT_LAYERS = (
    "agent.cli",
    ("agent.cluster", "agent.campaign", "agent.console"),
    ("agent.server", "agent.simulate", "agent.supervisor", "agent.webhooks", "agent.telemetry"),
    ("agent.call", "agent.summary"),
    ("agent.turn", "agent.sip"),
    "agent.log",
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


def test_only_the_bench_command_imports_the_benchmarks():
    """``bench/`` sits beside the agent, above it: no agent module names a bench.

    Only ``callagent bench`` loads one, by name (:mod:`agent.cli.bench`).
    """
    offenders = [f"{p.relative_to(ROOT)} imports {m}" for p in project_files(("agent",))
                 for m in _project_imports(p) if m.split(".")[0] == "bench"]
    assert offenders == []


def test_the_agent_never_imports_the_test_kit():
    """``testkit/`` is the outside of a call (a caller, its capture): a running agent needs none."""
    offenders = [f"{p.relative_to(ROOT)} imports {m}" for p in project_files(("agent",))
                 for m in _project_imports(p) if m.split(".")[0] == "testkit"]
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


# ---- the import graph: circles --------------------------------------------------------------


def _module_files(root: Path, packages=RUNTIME) -> dict[str, Path]:
    files = sorted(p for pkg in packages for p in (root / pkg).rglob("*.py"))
    return {".".join(_parts(p, root)): p for p in files}


def _parts(path: Path, root: Path) -> tuple[str, ...]:
    rel = path.relative_to(root).with_suffix("")
    return rel.parts[:-1] if rel.name == "__init__" else rel.parts


def _resolve(name: str, modules: dict[str, Path]) -> str | None:
    """The project module that ``import name`` runs: its longest prefix that is one."""
    parts = name.split(".")
    for i in range(len(parts), 0, -1):
        if ".".join(parts[:i]) in modules:
            return ".".join(parts[:i])
    return None


def import_edges(path: Path, root: Path, modules: dict[str, Path]) -> dict[str, int]:
    """The project modules ``path`` imports, each with the line of its first import.

    Every import counts: at the top, inside a function, under ``if TYPE_CHECKING:``, and
    ``importlib.import_module("...")`` with a literal name. ``from pkg import mod`` is an arrow
    to ``pkg.mod`` (not ``pkg``) when ``mod`` is a module; a package's ``__init__`` run on the
    way to a submodule is not counted.
    """
    me = _parts(path, root)
    package = me if path.name == "__init__.py" else me[:-1]
    edges: dict[str, int] = {}

    def add(name: str | None, line: int) -> None:
        target = _resolve(name, modules) if name else None
        if target is not None and target != ".".join(me):
            edges.setdefault(target, line)

    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if isinstance(node, ast.Import):
            for a in node.names:
                add(a.name, node.lineno)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package[:len(package) - node.level + 1]
                base = ".".join((*up, *([base] if base else [])))
            for a in node.names:
                sub = f"{base}.{a.name}" if base else a.name
                add(sub if sub in modules else base, node.lineno)
        elif (isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "import_module"
              and node.args and isinstance(node.args[0], ast.Constant)):
            add(str(node.args[0].value), node.lineno)
    return edges


def import_graph(root: Path = ROOT, packages=RUNTIME) -> dict[str, dict[str, int]]:
    modules = _module_files(root, packages)
    return {name: import_edges(p, root, modules) for name, p in modules.items()}


def import_circles(graph: dict[str, dict[str, int]]) -> list[list[str]]:
    """One shortest circle per strongly connected group of modules (Tarjan), sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    groups: list[set[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = set()
            while True:
                w = stack.pop()
                group.add(w)
                if w == v:
                    break
            if len(group) > 1:
                groups.append(group)

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(_shortest_circle(graph, group) for group in groups)


def _shortest_circle(graph: dict[str, dict[str, int]], group: set[str]) -> list[str]:
    """Breadth first inside ``group``, from its first module back to it."""
    start = min(group)
    came: dict[str, str] = {}
    todo = deque([start])
    while todo:
        v = todo.popleft()
        for w in sorted(graph[v]):
            if w == start:
                path = [v]
                while path[0] != start:
                    path.insert(0, came[path[0]])
                return [*path, start]
            if w in group and w not in came:
                came[w] = v
                todo.append(w)
    raise AssertionError(f"no circle in {group}")  # a strongly connected group has one


def describe(circle: list[str], graph: dict[str, dict[str, int]], root: Path = ROOT) -> str:
    files = _module_files(root, {m.split(".")[0] for m in circle})
    arrows = [f"{files[a].relative_to(root)}:{graph[a][b]} imports {b}"
              for a, b in zip(circle, circle[1:], strict=False)]
    return " -> ".join(circle) + "\n      " + "\n      ".join(arrows)


def test_no_import_circles():
    graph = import_graph()
    circles = [describe(c, graph) for c in import_circles(graph)]
    assert not circles, "import circles:\n  " + "\n  ".join(circles)


def test_checker_catches_a_circle_through_type_checking(tmp_path):
    pkg = tmp_path / "agent"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from typing import TYPE_CHECKING\n\n"
                              "if TYPE_CHECKING:\n    from agent.b import B\n")
    (pkg / "b.py").write_text("def f():\n    from agent import c\n")
    (pkg / "c.py").write_text("from . import a\n")
    (pkg / "d.py").write_text("from agent import a, b\n")
    graph = import_graph(tmp_path, ("agent",))
    assert graph["agent.d"] == {"agent.a": 1, "agent.b": 1}
    assert import_circles(graph) == [["agent.a", "agent.b", "agent.c", "agent.a"]]
    assert "agent/a.py:4 imports agent.b" in describe(import_circles(graph)[0], graph, tmp_path)


# ---- inside models/ ---------------------------------------------------------------------------

STAGES = tuple(sorted(p.parent.name for p in (ROOT / "models").glob("*/base.py")))


def _backends() -> dict[str, str]:
    """``models.registry.BACKENDS``: module -> class name, read without importing a backend."""
    from models.registry import BACKENDS

    return dict(target.split(":") for target in BACKENDS.values())


def _backend_unit(module: str) -> str | None:
    """The backend ``module`` belongs to: a backend module, or a backend's own package."""
    for backend in _backends():
        package = backend.rsplit(".", 1)[0]
        if package.count(".") >= 2:  # models.<stage>.<backend package>.<module>
            if module == package or module.startswith(package + "."):
                return package
        elif module == backend:
            return backend
    return None


def _stage(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if parts[0] == "models" and len(parts) > 1 and parts[1] in STAGES else None


def test_registry_names_real_backends_and_imports_none():
    assert set(STAGES) >= {"asr", "llm", "tts", "vad"}
    modules = _module_files(ROOT)
    for module, cls in _backends().items():
        assert module in modules, f"BACKENDS names {module}, which is no module"
        tree = ast.parse(modules[module].read_text(encoding="utf-8"))
        assert any(isinstance(n, ast.ClassDef) and n.name == cls for n in tree.body), \
            f"{module} defines no class {cls}"
    graph = import_graph()
    offenders = [f"{m} imports {t}" for m in ("models.registry", *(f"models.{s}" for s in STAGES))
                 for t in graph[m] if _backend_unit(t)]
    assert offenders == []


def test_stages_meet_only_through_their_base():
    offenders = [f"{m} imports {t}" for m, targets in import_graph().items() for t in targets
                 if _stage(m) and _stage(t) and _stage(m) != _stage(t)
                 and t not in (f"models.{_stage(t)}", f"models.{_stage(t)}.base")]
    assert offenders == []


def test_no_backend_imports_another():
    assert _backend_unit("models.llm.llama_batch.generation") == "models.llm.llama_batch"
    offenders = [f"{m} imports {t}" for m, targets in import_graph().items() for t in targets
                 if _backend_unit(m) and _backend_unit(t) and _backend_unit(m) != _backend_unit(t)]
    assert offenders == []


# ---- private names ----------------------------------------------------------------------------


def private_imports(path: Path, root: Path = ROOT) -> list[str]:
    """``path``'s imports of a ``_private`` project name owned by a package other than its own.

    A name owned by module ``pkg.mod`` (or the module ``pkg._mod``) belongs to package ``pkg``;
    its modules and subpackages may import it.
    """
    modules = _module_files(root)
    me = _parts(path, root)
    mine = ".".join(me if path.name == "__init__.py" else me[:-1])
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names = [f"{node.module}.{a.name}" for a in node.names]
        else:
            continue
        for name in names:
            parts = name.split(".")
            if parts[0] not in RUNTIME:
                continue
            for i, part in enumerate(parts):
                if part.startswith("_") and not part.startswith("__"):
                    owner = ".".join(parts[:i])
                    if owner in modules and modules[owner].name != "__init__.py":
                        owner = owner.rsplit(".", 1)[0]  # a module's name: its package's
                    if mine != owner and not mine.startswith(owner + "."):
                        found.append(f"{path.relative_to(root)}:{node.lineno} imports {name}")
                    break
    return found


def test_no_private_imports_from_other_packages():
    offenders = [o for p in project_files(RUNTIME) for o in private_imports(p)]
    assert offenders == []


def test_checker_catches_a_private_import(tmp_path):
    for pkg in ("agent", "agent/sip", "agent/call"):
        (tmp_path / pkg).mkdir()
        (tmp_path / pkg / "__init__.py").write_text("")
    (tmp_path / "agent/sip/callbacks.py").write_text("_Call = 1\n")
    (tmp_path / "agent/sip/_hidden.py").write_text("")
    (tmp_path / "agent/sip/useragent.py").write_text("from agent.sip.callbacks import _Call\n"
                                                     "from agent.sip import _hidden\n")
    (tmp_path / "agent/call/worker.py").write_text("from agent.sip.callbacks import _Call\n"
                                                   "import agent.sip._hidden\n")
    assert private_imports(tmp_path / "agent/sip/useragent.py", tmp_path) == []
    assert private_imports(tmp_path / "agent/call/worker.py", tmp_path) == [
        "agent/call/worker.py:1 imports agent.sip.callbacks._Call",
        "agent/call/worker.py:2 imports agent.sip._hidden"]
