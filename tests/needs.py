"""What a test needs installed: missing, the test fails and names what to install (issue 44).

Never a skip: a bare machine would otherwise pass the suite without checking anything. ``make
setup`` (and so ``make test`` and CI's ``.ci/run``) installs every program and package named
here; ``pytest -m unit`` runs the tests that need none of them.

A test asks with the mark ``@pytest.mark.needs("sipp", "tshark")`` (checked before its
fixtures are set up, by :mod:`tests.marks`), or by calling :func:`require` or
:func:`require_module`.
"""

from __future__ import annotations

import glob
import importlib
import shutil
from types import ModuleType

import pytest

PACKAGES = {
    "sipp": "sip-tester",
    "tshark": "tshark",
    "espeak-ng": "espeak-ng",
    "sox": "sox",
    "chromium": "chromium",
    "chromedriver": "chromium-driver",
    "kamailio": "kamailio",
    "initdb": "postgresql",
    "runuser": "util-linux",
}
"""Program -> the Debian package that installs it (the Makefile's ``APT_PACKAGES``)."""
ELSEWHERE = {
    "kamailio": "/usr/sbin/kamailio",
    "initdb": "/usr/lib/postgresql/*/bin/initdb",  # Debian keeps the server tools off PATH
    "runuser": "/usr/sbin/runuser",
}
"""Where Debian puts a program that is often not on a user's PATH."""


def find(program: str) -> str | None:
    """Path of ``program``: where Debian installs it (the newest version), else on PATH."""
    debian = sorted(glob.glob(ELSEWHERE.get(program, "")), reverse=True)
    return debian[0] if debian else shutil.which(program)


def require(*programs: str) -> None:
    """Fail the running test unless every one of ``programs`` is installed."""
    missing = [p for p in programs if find(p) is None]
    if missing:
        apt = " ".join(dict.fromkeys(PACKAGES.get(p, p) for p in missing))
        pytest.fail(f"{', '.join(missing)} not installed: `make setup` installs it (apt-get "
                    f"install {apt}); `pytest -m unit` runs the tests that need nothing",
                    pytrace=False)


def require_module(name: str, extra: str = "test") -> ModuleType:
    """``import name``, or fail naming the project extra that installs it."""
    try:
        return importlib.import_module(name)
    except ImportError as e:
        pytest.fail(f"python package {name} missing ({e}): pip install -e '.[{extra}]' "
                    "(make setup does)", pytrace=False)
