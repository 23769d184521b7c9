"""The process's settings come in from the CLI, never from a module reading them itself (issue 44).

Checked on every runtime module by walking its syntax tree, as :mod:`tests.test_imports` does:

* only config loading (``dialplan/config.py``) and the CLI (``agent/cli/``) read or set the
  environment (``os.environ``, ``os.getenv``, ``os.putenv``, ``os.unsetenv``): a backend gets
  what it needs as an argument (a models directory, an API key resolved at config load), and the
  CLI sets OpenMP's variables before any backend loads (:mod:`agent.cli.runtime`);
* no module makes a :class:`~models.scheduler.Scheduler` when it is imported (a module-level
  instance, a class attribute, a default argument): the CLI makes the process's one from the
  config and passes it in (:class:`~models.registry.ModelCache`).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[1]
ENV_READERS = (Path("dialplan/config.py"), Path("agent/cli"))
"""Config loading and the CLI: the only code that may touch the environment."""
ENV_NAMES = {"environ", "environb", "getenv", "getenvb", "putenv", "unsetenv"}


def runtime_files(skip: tuple[Path, ...] = ()) -> list[Path]:
    files = sorted(p for pkg in ("models", "db", "dialplan", "agent")
                   for p in (ROOT / pkg).rglob("*.py"))
    return [p for p in files
            if not any(p.relative_to(ROOT).is_relative_to(s) for s in skip)]


def env_uses(source: str) -> list[int]:
    """Lines of ``source`` that touch the environment through :mod:`os`."""
    tree = ast.parse(source)
    aliases = {a.asname or a.name for node in ast.walk(tree) if isinstance(node, ast.Import)
               for a in node.names if a.name == "os"}
    lines = []
    for node in ast.walk(tree):
        if (isinstance(node, ast.Attribute) and node.attr in ENV_NAMES
                and isinstance(node.value, ast.Name) and node.value.id in aliases):
            lines.append(node.lineno)
        elif (isinstance(node, ast.ImportFrom) and node.module == "os"
              and any(a.name in ENV_NAMES for a in node.names)):
            lines.append(node.lineno)
    return sorted(lines)


def _is_scheduler(node: ast.AST) -> bool:
    func = node.func if isinstance(node, ast.Call) else None
    return (isinstance(func, ast.Name) and func.id == "Scheduler") or (
        isinstance(func, ast.Attribute) and func.attr == "Scheduler")


def _run_at_import(body: list[ast.stmt]) -> list[ast.AST]:
    """The expressions of a module or class body that are evaluated as it is imported.

    A function's (or lambda's) body runs when it is called: only its decorators and default
    values are evaluated at import; a class body runs at once.
    """
    out: list[ast.AST] = []
    todo: list[ast.AST] = list(body)
    while todo:
        node = todo.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            args = node.args
            todo += [*args.defaults, *(d for d in args.kw_defaults if d is not None)]
            if not isinstance(node, ast.Lambda):
                todo += node.decorator_list
            continue
        out.append(node)
        todo += ast.iter_child_nodes(node)
    return out


def schedulers_made_at_import(source: str) -> list[int]:
    """Lines of ``source`` that make a ``Scheduler`` when the module is imported."""
    return sorted(n.lineno for n in _run_at_import(ast.parse(source).body) if _is_scheduler(n))


def test_walk_finds_the_modules():
    everything = {p.relative_to(ROOT) for p in runtime_files()}
    checked = {p.relative_to(ROOT) for p in runtime_files(ENV_READERS)}
    assert Path("models/registry.py") in checked and Path("agent/server.py") in checked
    assert Path("dialplan/config.py") in everything - checked
    assert Path("agent/cli/main.py") in everything - checked
    assert Path("dialplan/options.py") in checked


def test_only_config_loading_and_the_cli_touch_the_environment():
    offenders = [f"{p.relative_to(ROOT)}:{line}" for p in runtime_files(ENV_READERS)
                 for line in env_uses(p.read_text(encoding="utf-8"))]
    assert offenders == [], "read the value in dialplan/config.py or agent/cli/ and pass it in"


def test_no_module_makes_a_scheduler_when_imported():
    offenders = [f"{p.relative_to(ROOT)}:{line}" for p in runtime_files()
                 for line in schedulers_made_at_import(p.read_text(encoding="utf-8"))]
    assert offenders == [], "the CLI makes the process's scheduler and passes it in"


def test_the_checkers_catch_what_they_look_for():
    assert env_uses("import os\nx = os.environ.get('A')\n") == [2]
    assert env_uses("import os as o\no.environ.setdefault('A', '1')\ny = o.getenv('B')\n") == [2, 3]
    assert env_uses("from os import environ\n") == [1]
    assert env_uses("import os\np = os.path.join('a', 'b')\n") == []
    made = schedulers_made_at_import(
        "from models.scheduler import Scheduler\n"
        "import models.scheduler as ms\n"
        "SCHEDULER = Scheduler(pairs=True)\n"  # 3: a module global
        "if True:\n    OTHER: ms.Scheduler = ms.Scheduler()\n"  # 5: under an if
        "class A:\n    shared = Scheduler()\n"  # 7: a class attribute
        "def f(s=Scheduler()):\n"  # 8: a default argument
        "    return Scheduler()\n"  # 9: made when called: fine
        "g = lambda: Scheduler()\n")  # 10: fine
    assert made == [3, 5, 7, 8]
