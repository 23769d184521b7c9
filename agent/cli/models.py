"""``callagent models install|list``: install the bundled model packages, show what is where."""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

from rich.console import Console
from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TimeRemainingColumn
from rich.table import Table

from agent.cli import options as cliopts
from dialplan import Config, load_config
from models import catalog
from models.errors import ModelMissingError
from models.tts import kokoro_voices

VOICES = "kokoro-voices"
"""Kokoro's voice packs: not a PyPI package but an npm one (:mod:`models.tts.kokoro_voices`)."""


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("models", help="install and list the bundled offline models")
    msub = p.add_subparsers(dest="models_command", required=True)
    inst = msub.add_parser("install", help="pip-install model packages, assemble, verify sha256")
    inst.add_argument("names", nargs="*", help="models (default: all bundled)")
    inst.add_argument("--from", dest="source",
                      help="voxtral: a local checkpoint directory; kokoro-voices: a "
                           "kokoro-js-1.2.1.tgz fetched by hand (npm pack kokoro-js@1.2.1)")
    inst.add_argument("--npm-registry", default=kokoro_voices.REGISTRY,
                      help="where kokoro-voices is fetched from (an npm registry mirror)")
    inst.add_argument("--for", dest="for_config", default=None, metavar="CONFIG",
                      help="only the models CONFIG's extensions answer with (make serve); a "
                           "pick's re-quantized candidate is left for a full install")
    inst.add_argument("--fetch-only", action="store_true",
                      help="only pip-install, fetch and assemble: no re-quantizing or timing, "
                           "so llama.cpp need not be built yet (make's parallel set-up)")
    inst.set_defaults(func=install)
    ls = msub.add_parser("list", help="what is installed and what each profile uses")
    cliopts.add_common(ls, db=False)
    ls.set_defaults(func=list_models)


def install(args: argparse.Namespace) -> int:
    console = Console(stderr=True)
    if args.names == ["voxtral"]:
        return _install_voxtral(args, console)
    # A pick named, or all of them: every candidate is made and timed. A config's picks: only
    # the candidates made already (re-quantizing one takes minutes, for a file the timing may
    # not choose); a full install or the pick's name makes the rest.
    make_picks = args.for_config is None
    if args.for_config is not None:
        args.names = args.names or config_models(load_config(args.for_config))
        console.print(f"models for {args.for_config}: {', '.join(args.names)}")
    if not args.names or VOICES in args.names:
        if _install_voices(args, console) != 0:
            return 1
        if args.names == [VOICES]:
            return 0
        args.names = [n for n in args.names if n != VOICES]
    picks = [catalog.PICKS[n] for n in args.names or catalog.PICKS if n in catalog.PICKS]
    names = [n for n in args.names or catalog.CATALOG if n not in catalog.PICKS]
    asked = set(names)
    names += [c for p in picks for c in p.candidates if c not in names]
    models = []
    for name in names:
        model = catalog.lookup(name)
        if model is None:
            console.print(f"[red]unknown model {name}[/] (known: {', '.join(catalog.CATALOG)})")
            return 2
        models.append(model)
    missing = sorted(
        {pkg for m in models if not catalog.installed_packages(m) for pkg in m.packages}
    )
    if missing:
        console.print(f"installing {len(missing)} model package(s) from PyPI")
        with Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            TextColumn("{task.completed}/{task.total}"),
            console=console,
        ) as bar:
            task = bar.add_task("pip install", total=len(missing))
            for pkg in missing:
                bar.update(task, description=f"pip install {pkg}")
                subprocess.run(
                    [sys.executable, "-m", "pip", "install", "-q", "--no-deps", pkg], check=True
                )
                bar.advance(task)
    if not make_picks:
        models = [m for m in models if not m.derived_from or m.name in asked]
    if args.fetch_only:
        models = [m for m in models if not m.derived_from]
    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        DownloadColumn(),
        TimeRemainingColumn(),
        console=console,
    ) as bar:
        for model in models:
            if model.derived_from:  # one llama.cpp call: no byte count to show
                took = _requant_minutes(model)
                task = bar.add_task(f"{model.name}: re-quantize {model.derived_from} to "
                                    f"{model.file_type} (about {took} on 2 cores, once)",
                                    total=None)
            else:
                total = sum(_part_size(model, p) for p in model.parts)
                task = bar.add_task(f"{model.name}: assemble + sha256", total=total)
            path = catalog.ensure(model, progress=lambda n, t=task: bar.advance(t, n), verify=True)
            bar.update(task, total=1, completed=1)
            console.print(f"[green]ok[/] {model.name:<30} {path}")
    for p in [] if args.fetch_only else picks:
        if not make_picks and not all(catalog.made(catalog.CATALOG[c]) for c in p.candidates):
            console.print(f"[green]ok[/] {p.name:<30} {catalog.pick(p)} (the one made; `callagent "
                          f"models install {p.name}` makes the others and times them)")
            continue
        with console.status(f"{p.name}: timing {' and '.join(p.candidates)} on this CPU"):
            choice = catalog.pick(p, make=True)
        console.print(f"[green]ok[/] {p.name:<30} {choice} (faster here; {catalog.PICKS_FILE})")
    return 0


def config_models(config: Config) -> list[str]:
    """The bundled models (and picks) that the profiles of ``config``'s extensions use.

    With the profiles they fall back to under load: what ``serve`` loads for its calls.
    """
    names = set(config.dialplan.values())
    names |= {config.profiles[n].under_load for n in names if n in config.profiles}
    used: list[str] = []
    for name in sorted(n for n in names if n in config.profiles):
        prof = config.profiles[name]
        wanted = [prof.asr.model, prof.tts.model, prof.audio.end_of_turn]
        if prof.llm.backend != "openai":
            wanted.append(prof.llm.model)
        if prof.asr.denoise == "rnnoise":
            wanted.append("rnnoise")
        if prof.knowledge:
            wanted.append("wordllama-l2-256")
        if prof.tts.backend == "kokoro-onnx" and prof.tts.voice in kokoro_voices.ENGLISH:
            wanted.append(VOICES)
        for w in wanted:
            model = catalog.lookup(w)
            w = model.name if model else w
            if (model or w in catalog.PICKS or w == VOICES) and w not in used:
                used.append(w)
    return used


def _install_voices(args: argparse.Namespace, console: Console) -> int:
    """Kokoro's voices from the npm registry (or ``--from``), verified and unpacked once."""
    if kokoro_voices.installed():
        console.print(f"[green]ok[/] {VOICES:<30} {kokoro_voices.voices_file()}")
        return 0
    source = Path(args.source) if args.source else None
    where = source or kokoro_voices.url(args.npm_registry)
    try:
        with Progress(TextColumn("{task.description}"), BarColumn(), DownloadColumn(),
                      TimeRemainingColumn(), console=console) as bar:
            task = bar.add_task(f"{VOICES}: {where}", total=kokoro_voices.SIZE)
            path = kokoro_voices.install(source, args.npm_registry,
                                         progress=lambda n: bar.advance(task, n))
    except ModelMissingError as e:
        console.print(f"[red]{VOICES}[/]: {e}")
        return 1
    console.print(f"[green]ok[/] {VOICES:<30} {path}")
    return 0


def _requant_minutes(model: catalog.BundledModel) -> str:
    """How long re-quantizing to ``model`` takes on 2 cores, about 3.5 minutes a GB.

    The rate is fitted to re-quantizing the bundled 1.5B and 0.5B Qwens; it is only printed,
    as an estimate.
    """
    minutes = max(1, round(model.size / 1e9 * 3.5))
    return f"{minutes} minute{'s' if minutes > 1 else ''}"


def _part_size(model: catalog.BundledModel, part: catalog.Part) -> int:
    try:
        return catalog.part_path(model, part).stat().st_size
    except ModelMissingError:
        return 0


def _install_voxtral(args: argparse.Namespace, console: Console) -> int:
    if not args.source:
        console.print("voxtral weights are not on PyPI: use --from PATH (a local checkpoint)")
        return 2
    from models.asr.voxtral import install_from

    dest = install_from(Path(args.source), catalog.cache_dir() / "voxtral")
    console.print(f'[green]ok[/] voxtral installed at {dest}; set asr.model = "{dest}"')
    return 0


def list_models(args: argparse.Namespace) -> int:
    config = cliopts.load(args)
    used: dict[str, list[str]] = {}
    for prof in config.profiles.values():
        for stage, name in (
            ("asr", prof.asr.model),
            ("llm", prof.llm.model),
            ("tts", prof.tts.model),
        ):
            model = catalog.lookup(name)
            used.setdefault(model.name if model else name, []).append(f"{prof.name}:{stage}")
    table = Table(title="models")
    for col in ("name", "stage", "installed", "path", "used by", "description"):
        table.add_column(col)
    for m in catalog.CATALOG.values():
        ok = catalog.installed_packages(m)
        path = str(catalog.target_path(m)) if ok else "-"
        table.add_row(
            m.name,
            m.stage,
            "yes" if ok else "no",
            path,
            ", ".join(used.get(m.name, [])),
            m.description,
        )
    voices = kokoro_voices.installed()
    table.add_row(VOICES, "tts", "yes" if voices else "no",
                  str(kokoro_voices.voices_file()) if voices else "-", "",
                  f"Kokoro v1.0 voice packs (npm {kokoro_voices.PACKAGE}@{kokoro_voices.VERSION}); "
                  f"English: {', '.join(kokoro_voices.ENGLISH)}")
    for p in catalog.PICKS.values():
        table.add_row(p.name, "llm", "-", " or ".join(p.candidates),
                      ", ".join(used.get(p.name, [])), p.description)
    for name, users in used.items():
        if name not in catalog.CATALOG and name not in catalog.PICKS:
            table.add_row(
                name,
                "-",
                "yes" if Path(name).exists() else "no",
                name,
                ", ".join(users),
                "local path / hub id",
            )
    Console().print(table)
    return 0
