"""What an extension resolves to: a persona, its phrases, tools, directory and stage options.

A :class:`Profile` is one ``[profiles.NAME]`` table merged over the top-level defaults by
:mod:`dialplan.config`; the options of its stages are :mod:`dialplan.options`'. Pure data, like
them: each field's docstring is the config reference.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Literal

from dialplan.knowledge import Fact
from dialplan.options import ASROptions, AudioOptions, LimitOptions, LLMOptions, TTSOptions


@dataclass(frozen=True)
class DirectoryEntry:
    """A person or department the agent may transfer callers to (``[profiles.X.directory]``)."""

    uri: str
    """Where the transfer goes: a SIP URI (``sip:desk@pbx.example.com``) sent as REFER's
    Refer-To."""
    description: str = ""
    """One line on what they handle; the LLM reads it to choose the target."""
    attended: bool = False
    """Warm transfer: the caller hears ``hold_audio`` while the agent calls the target, says
    who is calling and why (one sentence, from the call so far) and asks them to accept ("yes"
    or key 1; "no" or key 2 declines). Accepted: the two are joined (REFER with Replaces, or
    the agent bridges their audio if the caller's phone refuses the REFER); otherwise the
    caller hears what happened and is offered to leave a message. With no call slot free for
    the second call (``sip.max_calls``), a blind transfer is made, and the call log says so."""


@dataclass(frozen=True)
class HttpTool:
    """An operator-defined tool the LLM may call (``[tools.NAME]``).

    The agent POSTs the arguments as JSON to ``url`` and speaks from the JSON it gets back.
    """

    description: str
    """What the tool does and when to use it; the LLM reads it."""
    url: str
    """Where the arguments are POSTed (``http://`` or ``https://``)."""
    parameters: dict = field(default_factory=lambda: {"type": "object", "properties": {}})
    """The arguments as a JSON schema (an object with ``properties`` and ``required``)."""
    timeout_s: float = 3.0
    """Seconds to wait for the answer; then the caller hears ``tool_error``."""
    read_only: bool = False
    """It only looks something up (it changes nothing): a caller's words that match its
    description call it without waiting for the model to (:mod:`agent.turn.routing`)."""

    def __post_init__(self) -> None:
        if not self.url.startswith(("http://", "https://")):
            raise ValueError(f"url = {self.url!r}: must start with http:// or https://")
        if not isinstance(self.parameters.get("properties", {}), dict):
            raise ValueError("parameters: expected a JSON schema with a properties table")


@dataclass(frozen=True)
class McpServer:
    """An MCP server whose tools the LLM may call (``[tools.NAME]`` with ``mcp``).

    A profile that lists NAME in its ``tools`` offers every tool the server lists (or those
    ``include`` names) under the server's own names, with its descriptions and input schemas.
    The agent keeps one session per process, lists the tools once when the first profile that
    uses the server loads, and reconnects when the session fails.
    """

    mcp: tuple[str, ...]
    """The server: the command that runs it and its arguments (``["python", "server.py"]``,
    spoken to over its stdin and stdout), or its URL (``"http://127.0.0.1:8000/mcp"``,
    streamable HTTP; a string in the TOML)."""
    include: tuple[str, ...] = ()
    """Only these of its tools (empty: every tool it lists)."""
    timeout_s: float = 3.0
    """Seconds to wait for a tool's answer (reconnecting included); then the caller hears
    ``tool_error``."""
    connect_timeout_s: float = 20.0
    """At start, how long to wait for the server to list its tools. One that does not is
    retried in the background; calls that start after it listed them are offered its tools."""

    def __post_init__(self) -> None:
        if not self.mcp or not all(self.mcp):
            raise ValueError(f"mcp = {list(self.mcp)}: expected a command list "
                             '(["command", "arg"]) or an http(s) URL')
        if self.mcp[0].startswith(("http://", "https://")) and len(self.mcp) > 1:
            raise ValueError(f"mcp = {list(self.mcp)}: a URL is given alone, as a string")
        for name in ("timeout_s", "connect_timeout_s"):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} = {getattr(self, name)}: must be more than 0")

    @property
    def url(self) -> str:
        """The streamable HTTP endpoint ("" for a command)."""
        return self.mcp[0] if self.mcp[0].startswith(("http://", "https://")) else ""


BUILTIN_TOOLS = ("end_call", "transfer", "take_message", "collect_digits", "send_digits")
"""Tools the agent implements itself; a profile lists the ones it may use in ``tools``."""


@dataclass(frozen=True)
class Profile:
    """Everything one agent persona needs, fully merged: what an extension resolves to."""

    name: str
    system_prompt: str = (
        "You are a friendly phone assistant. Answer in one or two short sentences, "
        "in plain spoken English without lists or symbols."
    )
    """System prompt for the LLM."""
    greeting: str = "Hello, how can I help you?"
    """Spoken when the call is answered; empty = say nothing."""
    goodbye: str = "Thank you for calling. Goodbye."
    """Spoken before the agent hangs up on a limit."""
    repeat: str = "Sorry, I didn't catch that. Could you say it again?"
    """Said instead of an answer when the transcript is a guess (``asr.min_avg_logprob``)."""
    apology: str = "Sorry, I'm having trouble answering right now. Please try again."
    """Spoken instead of an answer that failed (the LLM server down, a model error): the caller
    is never left in silence, and the turn is logged with the error."""
    under_load: str = ""
    """Name of a cheaper profile (e.g. tiny.en, shorter ``llm.max_tokens``) whose ASR and LLM
    answer a turn while the agent is overloaded (``limits.under_load_ahead``,
    ``limits.under_load_after_s``); the persona (prompts, phrases) and the voice stay this
    profile's, so the caller hears the same agent. The call log records each turn it answered.
    Empty = always this profile's models."""
    filler: str = "One moment, please."
    """Spoken once to a caller whose answer has not started ``limits.filler_after_s`` after
    the end of their turn (a loaded agent), so the line is never dead air."""
    still_there: str = "Are you still there?"
    """Said once to a caller silent for ``limits.idle_prompt_s`` (and when a wait they asked
    for, ``limits.hold_s``, runs out)."""
    hold_ack: str = "Sure, take your time."
    """Said at once, without the LLM, to a caller who asks the agent to wait ("hold on", "one
    second", "give me a minute"); the call then waits up to ``limits.hold_s`` for them."""
    tools: tuple[str, ...] = ()
    """What the LLM may do besides talk: built-in ``end_call``, ``transfer`` (to the
    ``directory``), ``take_message``, ``collect_digits``, ``send_digits`` (keypad tones down
    the line: an outbound call through a menu), and the names of ``[tools.NAME]`` tables: an
    HTTP tool, or an MCP server (all its tools). Empty = it can only talk."""
    directory: dict[str, DirectoryEntry] = field(default_factory=dict)
    """Transfer targets by name (``front-desk = { uri = "sip:...", description = "..." }``)."""
    keypad: dict[str, str] = field(default_factory=dict)
    """Keypad digit -> action: ``transfer:NAME`` (a directory entry), ``end``, ``message``
    or ``say:TEXT``. Digits not mapped here reach the LLM as the caller's words
    ("keypad: 4729#") after ``#`` or a pause."""
    transferring: str = "Transferring you to {name} now."
    """Said before a transfer ({name}: the directory entry, spoken)."""
    transfer_failed: str = "Sorry, {name} is not available right now. Can I help you instead?"
    """Said when a transfer fails (the target busy, not answering, or refused)."""
    consult_summary: str = "I have a caller on the line for {name}."
    """An attended transfer: what the target hears if no one-sentence summary of the call could
    be written (the LLM failed or was slow; {name}: the directory entry, spoken)."""
    consult_ask: str = ("Will you take the call? Say yes or press 1. "
                        "Say no or press 2.")
    """An attended transfer: said to the target after the summary."""
    consult_declined: str = ("Sorry, {name} can't take your call right now. "
                             "Would you like to leave a message?")
    """Said to the caller when the target declined, hung up or did not decide in time."""
    consult_busy: str = "Sorry, {name} is busy right now. Would you like to leave a message?"
    """Said to the caller when the target's line was busy (486, 600)."""
    consult_no_answer: str = ("Sorry, {name} is not answering right now. "
                              "Would you like to leave a message?")
    """Said to the caller when the target did not answer (or could not be called)."""
    hold_audio: str = ""
    """A WAV (any rate; relative to the config file) the caller hears, looped, while an attended
    transfer calls the target. Empty = a generated soft tone."""
    consult_ring_s: float = 20.0
    """An attended transfer gives up on a target that has not answered after this long."""
    consult_answer_s: float = 15.0
    """... and on a target that has not accepted or declined this long after the question."""
    message_prompt: str = "Please leave your message now, and I will pass it on."
    """Said when the caller may leave a message (``take_message``, keypad ``message``)."""
    message_taken: str = "Thank you, I have passed your message on. Anything else?"
    """Said once the caller's message is kept."""
    digits_prompt: str = "Please type it on your keypad, then press the hash key."
    """Said by ``collect_digits`` when the LLM gives no prompt of its own."""
    tool_error: str = "Sorry, I could not look that up just now."
    """Said when an HTTP or MCP tool times out, fails or answers something unusable."""
    dont_know: str = "Sorry, I don't know that. I can put you through to someone who does."
    """With a knowledge file: said instead of a reply that would state a number (a price, a
    time, a phone number) that neither the persona, its facts nor the caller gave, or say the
    library has (or lets the caller book) something the caller named that no fact mentions."""
    http_tools: dict[str, HttpTool] = field(default_factory=dict)
    """Not a key: the ``[tools.NAME]`` tables of the names in ``tools``, filled in at parse."""
    mcp_servers: dict[str, McpServer] = field(default_factory=dict)
    """Not a key: the ``[tools.NAME]`` MCP servers of the names in ``tools``, filled in at
    parse; their tools are listed when the profile loads."""
    knowledge: str = ""
    """A knowledge file (.md or .toml, relative to the config file) of facts the agent may
    state: all of them go into the system prompt (a file too large for it: each turn's words
    carry the few that match them). Empty = the system prompt alone."""
    facts: tuple[Fact, ...] = ()
    """Not a key: the knowledge file's facts, read at parse."""
    recording: Literal["off", "stereo"] = "off"
    """``stereo``: one WAV per call, the caller on the left, the agent on the right, in
    ``db.media_dir``; its path and length go to the call log."""
    amd: bool = False
    """Outbound calls only (``callagent dial``): answering-machine detection. The callee's
    first audio (beep, voicemail words, the greeting's length) decides within ``amd_max_s``;
    to a machine the agent says ``voicemail_message`` after its beep and hangs up (end reason
    ``voicemail``), to a person, or when unsure, it says the greeting as without detection."""
    voicemail_message: str = ("Hello, this is an automated assistant calling. "
                              "Please call us back. Goodbye.")
    """Left on an answering machine (``amd``)."""
    amd_max_s: float = 10.0
    """``amd``: the longest the decision may take from the answer; undecided then = a person.
    Only a callee who talks on, neither pausing like a person nor ending like a box, reaches
    it: a person is decided at their first pause, a box by its words or beep, which come in its
    second sentence or later and are known a pass of the ASR after that (bench amd), or at its
    end; a box's message waits for its beep anyway, so a late decision costs it nothing."""
    summary: bool = False
    """After the hang-up, a background job asks the LLM for a two-sentence summary of the
    call, stored with it (``report --call``, the console) and carried by ``call.ended``."""
    extract: dict[str, str] = field(default_factory=dict)
    """Fields the same job reads out of the call: name -> what it means, e.g.
    ``{ caller_name = "the caller's name", callback_number = "..." }``. Each comes back as a
    string, or null when the call did not say it (JSON the LLM's grammar constrains)."""
    summary_wait_s: float = 300.0
    """How long ``call.ended`` waits for the summary and fields (they are postponed while calls
    are up under load); past it the event goes without them, and they reach the call log
    alone. 0 = never wait."""
    audio: AudioOptions = field(default_factory=AudioOptions)
    asr: ASROptions = field(default_factory=ASROptions)
    llm: LLMOptions = field(default_factory=LLMOptions)
    tts: TTSOptions = field(default_factory=TTSOptions)
    limits: LimitOptions = field(default_factory=LimitOptions)

    def __post_init__(self) -> None:
        if not 1.0 <= self.amd_max_s <= 30.0:
            raise ValueError(f"amd_max_s = {self.amd_max_s}: must be 1 to 30 seconds")
        for key in ("consult_ring_s", "consult_answer_s"):
            if not 2.0 <= getattr(self, key) <= 120.0:
                raise ValueError(f"{key} = {getattr(self, key)}: must be 2 to 120 seconds")
        if not 0.0 <= self.summary_wait_s <= 86400.0:
            raise ValueError(f"summary_wait_s = {self.summary_wait_s}: must be 0 to 86400 s")
        check_extract(self.extract)


EXTRACT_NAME = re.compile(r"[a-z][a-z0-9_]{0,39}")
EXTRACT_MAX_FIELDS = 12
EXTRACT_MAX_MEANING = 200
"""Characters of a field's meaning: it goes into the job's prompt, read by a small model."""


def check_extract(extract: dict[str, str]) -> None:
    """Raise ValueError naming the ``extract`` key that is not a field name and its meaning."""
    if len(extract) > EXTRACT_MAX_FIELDS:
        raise ValueError(f"extract: {len(extract)} fields, at most {EXTRACT_MAX_FIELDS}")
    for name, meaning in extract.items():
        if not EXTRACT_NAME.fullmatch(name):
            raise ValueError(f"extract.{name}: a field name is lower-case letters, digits and _ "
                             "(starting with a letter, at most 40)")
        if name == "summary":
            raise ValueError("extract.summary: the summary's own name (set summary = true)")
        if not isinstance(meaning, str) or not meaning.strip():
            raise ValueError(f"extract.{name}: say what the field means (a non-empty string)")
        if len(meaning) > EXTRACT_MAX_MEANING:
            raise ValueError(f"extract.{name}: {len(meaning)} characters, at most "
                             f"{EXTRACT_MAX_MEANING}")
