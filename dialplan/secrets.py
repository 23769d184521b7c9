"""Where a secret is, never what it is: ``"env:VARIABLE"`` or ``"file:/path"`` in the config.

Shared by ``[sip.auth]``'s users (:class:`dialplan.sip.SIPAuthOptions`) and ``[[webhooks]]``'s
signing secrets (:class:`dialplan.webhooks.WebhookOptions`): the options check the reference's
form when the config is parsed, and :func:`read_secret` reads it when the process that needs
it starts, so commands that never answer a call need no secrets. A secret is never part of an
error message or a log line. Imports nothing of the project.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

REF_FORM = '"env:VARIABLE" or "file:/path"'
"""How a reference is written, for messages."""


def is_secret_ref(ref: str) -> bool:
    """Whether ``ref`` names an environment variable or a file (not a secret put in directly)."""
    kind, _, rest = ref.partition(":")
    return kind in ("env", "file") and bool(rest.strip())


def read_secret(ref: str, key: str, env: Mapping[str, str]) -> str:
    """The secret ``ref`` names: the variable's value, or the file's first line.

    Args:
        ref: ``"env:VARIABLE"`` or ``"file:/path"`` (checked by :func:`is_secret_ref`).
        key: The config key that holds ``ref``, for the message.
        env: Environment variables (:mod:`dialplan.config` hands in the process's: the one
            place outside the CLI that reads them).

    Returns:
        The secret, never empty.

    Raises:
        ValueError: The variable is unset or empty, the file unreadable or empty; names the key.
    """
    kind, _, name = ref.partition(":")
    if kind == "env":
        secret = env.get(name, "")
        if not secret:
            raise ValueError(f"{key}: environment variable {name} is not set (or empty)")
        return secret
    try:
        lines = Path(name).read_text(encoding="utf-8").splitlines()
    except OSError as e:
        raise ValueError(f"{key}: cannot read {name}: {e.strerror}") from None
    secret = lines[0] if lines else ""
    if not secret:
        raise ValueError(f"{key}: {name} is empty (the secret is its first line)")
    return secret
