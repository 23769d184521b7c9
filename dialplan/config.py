"""Parse ``config.toml`` once into typed, validated objects.

Every key is checked against the dataclasses in :mod:`dialplan.options`,
:mod:`dialplan.profile` and :mod:`dialplan.sip`: an unknown key or a value of the wrong type
fails at start with :class:`ConfigError` naming the full key (``profiles.fast.llm.max_tokens``),
never mid-call.
Profiles are merged here, so each :class:`~dialplan.profile.Profile` is complete and validated
on its own. What the file leaves to the environment (an OpenAI-compatible server's key,
:data:`API_KEY_ENV`; ``sip.auth``'s passwords, :func:`sip_passwords`; the webhooks' secrets,
:func:`webhook_secrets`; the console's token, :func:`console_token`) is read here too, the one
place outside the CLI that reads it.
"""

from __future__ import annotations

import dataclasses
import os
import tomllib
import types
import typing
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from dialplan.campaign import CampaignOptions
from dialplan.console import ConsoleOptions
from dialplan.knowledge import KnowledgeError, load_facts
from dialplan.options import (
    ASROptions,
    AudioOptions,
    DBOptions,
    LimitOptions,
    LLMOptions,
    TTSOptions,
)
from dialplan.profile import BUILTIN_TOOLS, HttpTool, McpServer, Profile
from dialplan.secrets import read_secret
from dialplan.sip import SIPAuthOptions, SIPOptions
from dialplan.telemetry import TelemetryOptions
from dialplan.webhooks import WebhookOptions

STAGE_SECTIONS: dict[str, type] = {
    "audio": AudioOptions,
    "asr": ASROptions,
    "llm": LLMOptions,
    "tts": TTSOptions,
    "limits": LimitOptions,
}
PROFILE_TEXT_KEYS = ("system_prompt", "greeting", "goodbye", "filler", "repeat", "apology",
                     "transferring", "transfer_failed", "message_prompt", "message_taken",
                     "digits_prompt", "tool_error", "still_there", "hold_ack", "consult_summary",
                     "consult_ask", "consult_declined", "consult_busy", "consult_no_answer")
KEYPAD_KEYS = "0123456789*#"
API_KEY_ENV = ("CALLAGENT_LLM_API_KEY", "OPENAI_API_KEY")
"""Where ``llm.api_key`` of an ``openai`` profile comes from when empty, first set wins."""


class ConfigError(ValueError):
    """A config value is missing, unknown or of the wrong type; the message names the key."""


@dataclass(frozen=True)
class SchedulerOptions:
    """``[scheduler]``: how the process's model scheduler shares the CPU."""

    pairs: bool = True
    """Two callers' urgent jobs may run side by side on one core each; the ASR and TTS models
    then also load one-thread copies for it. False: one job at a time, on every core."""


@dataclass(frozen=True)
class Config:
    """The whole parsed config."""

    sip: SIPOptions = field(default_factory=SIPOptions)
    db: DBOptions = field(default_factory=DBOptions)
    scheduler: SchedulerOptions = field(default_factory=SchedulerOptions)
    profiles: dict[str, Profile] = field(default_factory=dict)
    """Profiles by name, each fully merged over the top-level stage sections."""
    tools: dict[str, HttpTool | McpServer] = field(default_factory=dict)
    """Operator-defined HTTP tools and MCP servers by name (``[tools.NAME]``); profiles list
    the ones they use."""
    dialplan: dict[str, str] = field(default_factory=dict)
    """Called extension (request-URI user part) -> profile name."""
    webhooks: tuple[WebhookOptions, ...] = ()
    """Receivers of the call log's events (``[[webhooks]]``); none = no events queued."""
    campaigns: CampaignOptions = field(default_factory=CampaignOptions)
    """``[campaigns]``: the defaults of ``callagent campaign`` (its flags override them)."""
    console: ConsoleOptions = field(default_factory=ConsoleOptions)
    """``[console]``: the web console of ``serve`` and ``cluster``."""
    telemetry: TelemetryOptions = field(default_factory=TelemetryOptions)
    """``[telemetry]``: OpenTelemetry traces of the calls (off unless ``otlp_endpoint``)."""
    source: str = "<defaults>"
    """Where the config came from (for messages)."""


def load_config(path: str | Path | None, env: Mapping[str, str] | None = None) -> Config:
    """Read and validate a config file (``None`` = built-in defaults).

    Args:
        path: the TOML file.
        env: environment variables for what the file leaves empty (None: the process's).

    Raises:
        ConfigError: the file is missing, not TOML, or a key is unknown or badly typed.
    """
    if path is None:
        return parse_config({}, env=env)
    p = Path(path)
    try:
        data = tomllib.loads(p.read_text(encoding="utf-8"))
    except FileNotFoundError as e:
        raise ConfigError(f"config file not found: {p}") from e
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"{p}: not valid TOML: {e}") from e
    return parse_config(data, source=str(p), env=env)


def parse_config(data: dict[str, Any], source: str = "<dict>",
                 env: Mapping[str, str] | None = None) -> Config:
    """Validate an already-loaded TOML mapping (see :func:`load_config`)."""
    allowed = {"sip", "db", "scheduler", "profiles", "dialplan", "tools", "webhooks",
               "campaigns", "console", "telemetry", *STAGE_SECTIONS, *PROFILE_TEXT_KEYS}
    for key in data:
        if key not in allowed:
            raise ConfigError(f"unknown key '{key}' (allowed: {', '.join(sorted(allowed))})")
    sip = build(SIPOptions, data.get("sip", {}), "sip")
    db = build(DBOptions, data.get("db", {}), "db")
    scheduler = build(SchedulerOptions, data.get("scheduler", {}), "scheduler")
    campaigns = build(CampaignOptions, data.get("campaigns", {}), "campaigns")
    console = build(ConsoleOptions, data.get("console", {}), "console")
    telemetry = build(TelemetryOptions, data.get("telemetry", {}), "telemetry")
    webhooks = _webhooks(data.get("webhooks", []))
    raw_tools = data.get("tools", {})
    _expect_table(raw_tools, "tools")
    tools = {}
    for name, table in raw_tools.items():
        if name in BUILTIN_TOOLS:
            raise ConfigError(f"tools.{name}: the name of a built-in tool")
        tools[name] = _tool(table, f"tools.{name}")

    base = {k: data[k] for k in (*STAGE_SECTIONS, *PROFILE_TEXT_KEYS) if k in data}
    raw_profiles = data.get("profiles", {"default": {}})
    _expect_table(raw_profiles, "profiles")
    profiles = {}
    for name, over in raw_profiles.items():
        _expect_table(over, f"profiles.{name}")
        if "facts" in over:
            raise ConfigError(f"unknown key 'profiles.{name}.facts' (facts come from the file "
                              "a profile's knowledge names)")
        for key in ("http_tools", "mcp_servers"):
            if key in over:
                raise ConfigError(f"unknown key 'profiles.{name}.{key}' (HTTP tools and MCP "
                                  "servers are [tools.NAME] tables, listed by name in a "
                                  "profile's tools)")
        prof = build(Profile, {"name": name, **merge(base, over)}, f"profiles.{name}")
        profiles[name] = dataclasses.replace(
            prof, http_tools={t: tools[t] for t in prof.tools
                              if isinstance(tools.get(t), HttpTool)},
            mcp_servers={t: tools[t] for t in prof.tools if isinstance(tools.get(t), McpServer)},
            facts=_facts(prof.knowledge, source, f"profiles.{name}.knowledge"),
            hold_audio=_hold_audio(prof.hold_audio, source, f"profiles.{name}.hold_audio"))
    if not profiles:
        raise ConfigError("profiles: at least one profile is needed")
    profiles = _with_api_keys(profiles, os.environ if env is None else env)
    for name, prof in profiles.items():
        _check_actions(prof, tools, f"profiles.{name}")
        if prof.under_load and (prof.under_load not in profiles or prof.under_load == name):
            raise ConfigError(f"profiles.{name}.under_load: '{prof.under_load}' is not another "
                              f"profile (defined: {', '.join(profiles)})")

    plan = data.get("dialplan", {ext: "default" for ext in ("100",) if "default" in profiles})
    _expect_table(plan, "dialplan")
    for ext, prof in plan.items():
        if not isinstance(prof, str):
            raise ConfigError(f"dialplan.{ext}: expected a profile name, got {prof!r}")
        if prof not in profiles:
            raise ConfigError(
                f"dialplan.{ext}: unknown profile '{prof}' (defined: {', '.join(profiles)})"
            )
    return Config(sip=sip, db=db, scheduler=scheduler, profiles=profiles, tools=tools,
                  dialplan=dict(plan), webhooks=webhooks, campaigns=campaigns, console=console,
                  telemetry=telemetry, source=source)


def _tool(table: Any, where: str) -> HttpTool | McpServer:
    """A ``[tools.NAME]`` table: an MCP server where it has ``mcp``, else an HTTP tool."""
    _expect_table(table, where)
    if "mcp" not in table:
        return build(HttpTool, table, where)
    spec = table["mcp"]
    if isinstance(spec, str):  # a URL; the dataclass holds a command's words or the URL alone
        table = {**table, "mcp": [spec]}
    elif not isinstance(spec, list):
        raise ConfigError(f'{where}.mcp: expected a command list (["command", "arg"]) or an '
                          f"http(s) URL, got {spec!r}")
    return build(McpServer, table, where)


def _webhooks(raw: Any) -> tuple[WebhookOptions, ...]:
    """The ``[[webhooks]]`` entries, each checked, one per URL (the URL keys its deliveries)."""
    if not isinstance(raw, list):
        raise ConfigError(f"webhooks: expected [[webhooks]] entries, got {raw!r}")
    hooks = _convert(tuple[WebhookOptions, ...], raw, "webhooks")
    urls = [h.url for h in hooks]
    for i, url in enumerate(urls):
        if url in urls[:i]:
            raise ConfigError(f"webhooks[{i}].url: {url!r} is also webhooks[{urls.index(url)}]'s "
                              "(one entry per receiver)")
    return hooks


def _facts(knowledge: str, source: str, key: str) -> tuple:
    """The knowledge file's facts; a relative path is the config file's neighbour."""
    if not knowledge:
        return ()
    path = Path(knowledge).expanduser()
    if not path.is_absolute() and source != "<dict>":
        path = Path(source).parent / path
    try:
        return load_facts(path)
    except KnowledgeError as e:
        raise ConfigError(f"{key}: {e}") from None


def _hold_audio(path: str, source: str, key: str) -> str:
    """The hold WAV's path (a relative one is the config file's neighbour), checked readable."""
    if not path:
        return ""
    p = Path(path).expanduser()
    if not p.is_absolute() and source != "<dict>":
        p = Path(source).parent / p
    try:
        import soundfile  # the config's only audio check: a bad file fails at start

        soundfile.info(str(p))
    except Exception as e:  # noqa: BLE001 (missing, unreadable, not audio)
        raise ConfigError(f"{key}: {p}: not a readable audio file ({e})") from None
    return str(p)


def _check_actions(profile: Profile, tools: dict[str, HttpTool | McpServer],
                   where: str) -> None:
    """The profile's tools exist, and its keypad names actions it can take."""
    for i, name in enumerate(profile.tools):
        if name not in BUILTIN_TOOLS and name not in tools:
            raise ConfigError(
                f"{where}.tools[{i}]: unknown tool '{name}' (built in: "
                f"{', '.join(BUILTIN_TOOLS)}; defined: {', '.join(tools) or 'none'})")
    if "transfer" in profile.tools and not profile.directory:
        raise ConfigError(f"{where}.tools: transfer needs a directory ({where}.directory)")
    for digit, action in profile.keypad.items():
        key = f"{where}.keypad.{digit}"
        if digit not in KEYPAD_KEYS or len(digit) != 1:
            raise ConfigError(f"{key}: not a keypad key (one of {KEYPAD_KEYS})")
        if not isinstance(action, str):
            raise ConfigError(f"{key}: expected a string, got {action!r}")
        kind, _, arg = action.partition(":")
        if kind == "transfer" and arg not in profile.directory:
            raise ConfigError(f"{key}: '{arg}' is not in {where}.directory "
                              f"(entries: {', '.join(profile.directory) or 'none'})")
        if kind == "say" and not arg.strip():
            raise ConfigError(f"{key}: say: needs the text to say")
        if kind not in ("transfer", "say") and action not in ("end", "message"):
            raise ConfigError(f"{key}: {action!r} is not transfer:NAME, end, message or say:TEXT")


def _with_api_keys(profiles: dict[str, Profile], env: Mapping[str, str]) -> dict[str, Profile]:
    """The profiles, with the key of :data:`API_KEY_ENV` (the first set) filled in.

    Only ``openai`` profiles whose ``llm.api_key`` is empty get it.
    """
    key = next((env[k] for k in API_KEY_ENV if env.get(k)), "")
    if not key:
        return profiles
    return {name: dataclasses.replace(p, llm=dataclasses.replace(p.llm, api_key=key))
            if p.llm.backend == "openai" and not p.llm.api_key else p
            for name, p in profiles.items()}


def sip_passwords(auth: SIPAuthOptions, env: Mapping[str, str] | None = None) -> dict[str, str]:
    """Each ``sip.auth`` user's password, read from where ``sip.auth.users`` says it is.

    Called when the agent starts, not at every config load: commands that never answer a call
    (``report``, ``db``) need no passwords. The passwords go to the SIP gate only, never into
    :class:`Config` (which is printed and compared).

    Args:
        auth: the ``[sip.auth]`` options.
        env: environment variables (None: the process's).

    Raises:
        ConfigError: a variable unset or empty, a file unreadable or empty; names the key.
    """
    env = os.environ if env is None else env
    out = {}
    for user, where in auth.users.items():
        try:
            out[user] = read_secret(where, f"sip.auth.users.{user}", env)
        except ValueError as e:
            raise ConfigError(str(e)) from None
    return out


def webhook_secrets(hooks: tuple[WebhookOptions, ...],
                    env: Mapping[str, str] | None = None) -> dict[str, str]:
    """Each webhook's signing secret by URL, read from where its ``secret`` says it is.

    Called by the process that delivers (``serve``, ``cluster``), like :func:`sip_passwords`.

    Raises:
        ConfigError: a variable unset or empty, a file unreadable or empty; names the key.
    """
    env = os.environ if env is None else env
    try:
        return {h.url: read_secret(h.secret, f"webhooks[{i}].secret", env)
                for i, h in enumerate(hooks)}
    except ValueError as e:
        raise ConfigError(str(e)) from None


def console_token(options: ConsoleOptions, env: Mapping[str, str] | None = None) -> str:
    """The console's bearer token, read from where ``console.token`` says it is ("": none).

    Called by the process that serves the console (``serve``, ``cluster``), like
    :func:`sip_passwords`.

    Raises:
        ConfigError: the variable unset or empty, the file unreadable or empty; names the key.
    """
    if not options.token:
        return ""
    try:
        return read_secret(options.token, "console.token", os.environ if env is None else env)
    except ValueError as e:
        raise ConfigError(str(e)) from None


def merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    """Deep-merge two TOML tables; ``over`` wins, nested tables merge key by key."""
    out = dict(base)
    for key, value in over.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = merge(out[key], value)
        else:
            out[key] = value
    return out


def build(cls: type, data: Any, where: str) -> Any:
    """Build dataclass ``cls`` from a TOML table, checking every key and type."""
    _expect_table(data, where)
    hints = typing.get_type_hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls)}
    for key in data:
        if key not in fields:
            raise ConfigError(f"unknown key '{where}.{key}' (allowed: {', '.join(sorted(fields))})")
    kwargs = {k: _convert(hints[k], v, f"{where}.{k}") for k, v in data.items()}
    try:
        return cls(**kwargs)
    except TypeError as e:  # a required field is missing
        raise ConfigError(f"{where}: {e}") from e
    except ValueError as e:  # a value out of range: the options say which ("key = value: ...")
        raise ConfigError(f"{where}.{e}") from e


def _convert(tp: Any, value: Any, where: str) -> Any:
    origin = typing.get_origin(tp)
    if dataclasses.is_dataclass(tp):
        return build(tp, value, where)
    if origin is Literal:
        choices = typing.get_args(tp)
        if value not in choices:
            raise ConfigError(f"{where}: {value!r} is not one of {', '.join(map(repr, choices))}")
        return value
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        return None if value is None else _convert(args[0], value, where)
    if origin is list:
        (item,) = typing.get_args(tp)
        if not isinstance(value, list):
            raise ConfigError(f"{where}: expected a list, got {value!r}")
        return [_convert(item, v, f"{where}[{i}]") for i, v in enumerate(value)]
    if origin is tuple:  # tuple[X, ...]: a TOML list, kept hashable (options key model caches)
        item = typing.get_args(tp)[0]
        if not isinstance(value, list):
            raise ConfigError(f"{where}: expected a list, got {value!r}")
        return tuple(_convert(item, v, f"{where}[{i}]") for i, v in enumerate(value))
    if origin is dict or tp is dict:
        _expect_table(value, where)
        _, item = typing.get_args(tp) or (str, Any)
        if item is Any or item is dict:
            return dict(value)
        return {str(k): _convert(item, v, f"{where}.{k}") for k, v in value.items()}
    if tp is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if tp in (int, float, str, bool):
        if not isinstance(value, tp) or (tp is int and isinstance(value, bool)):
            raise ConfigError(f"{where}: expected {tp.__name__}, got {value!r}")
        return value
    raise ConfigError(f"{where}: unsupported type {tp}")  # a bug in options.py, not user error


def _expect_table(value: Any, where: str) -> None:
    if not isinstance(value, dict):
        raise ConfigError(f"{where}: expected a table, got {value!r}")
