"""The words of an attended transfer: the call told in one sentence, and the target's answer.

Pure functions and the model work they stand for, run as jobs of the caller's call
(:mod:`agent.call.consult`): :func:`summarize` asks the LLM for one sentence about the call from
its history (:func:`call_so_far`, :func:`one_sentence` keeps the first sentence or refuses the
reply); :func:`synthesize` voices it at the line's rate; :func:`answer_of` reads "yes" or "no"
in a transcript (the target's answer, or a caller taking up the offer of a message).
Imports no pjsua2 and no database code.
"""

from __future__ import annotations

import re

import numpy as np

from agent.turn.textsplit import speakable
from models.audio import StreamResampler, float_to_pcm16
from models.llm.base import LLM, Message
from models.tts.base import TTS

SUMMARY_PROMPT = (
    "You are a phone assistant about to put a caller through to a colleague. Tell the "
    "colleague in one short sentence who is calling and what they want, using only what the "
    "call below says. Write only that sentence.")
SUMMARY_CHARS = 240
"""The sentence is cut here (and the LLM stopped): one sentence, said in a few seconds."""
HISTORY_MESSAGES = 8
"""The call's last messages the summary reads (the call so far, short)."""
YES = ("yes", "yeah", "yep", "yup", "sure", "ok", "okay", "accept", "alright", "certainly",
       "please", "go ahead", "put them through", "put him through", "put her through",
       "connect", "of course", "fine", "no problem")
NO = ("no", "nope", "not now", "decline", "can't", "cannot", "busy", "later", "don't",
      "not available", "no thanks", "not really")


def call_so_far(history: list[Message]) -> str:
    """The call's words, one line each (``Caller: ...``, ``Agent: ...``); tool traffic left out.

    The notes a large knowledge file adds to the caller's words (after a blank line, in
    brackets) and the agent's tool calls are not words anyone said.
    """
    lines = []
    for m in history[-HISTORY_MESSAGES:]:
        text = m.content
        if m.role == "user":
            if text.startswith("<tool_response>"):
                continue
            text = text.split("\n\n[", 1)[0]
            who = "Caller"
        elif m.role == "assistant":
            text = re.sub(r"<tool_call>.*?(</tool_call>|$)", "", text, flags=re.S)
            who = "Agent"
        else:
            continue
        text = " ".join(text.split())
        if text and not text.startswith("keypad:"):
            lines.append(f"{who}: {text}")
    return "\n".join(lines)


def summary_messages(history: list[Message], name: str) -> list[Message] | None:
    """What the LLM is asked for the summary; None when the caller has said nothing yet."""
    words = call_so_far(history)
    if "Caller:" not in words:
        return None
    return [Message("system", SUMMARY_PROMPT),
            Message("user", f"The call so far:\n{words}\n\nThe caller is being put through to "
                            f"{name}. The one sentence for {name}:")]


def summarize(llm: LLM, messages: list[Message]) -> str:
    """The LLM's reply to ``messages``, stopped after its first sentence (a scheduler job)."""
    stream = llm.stream(messages)
    try:
        for _ in stream:
            if len(stream.text) >= SUMMARY_CHARS or re.search(r"[.!?](\s|$)", stream.text):
                break
    finally:
        stream.close()
    return stream.text


def one_sentence(text: str) -> str | None:
    """The reply's first sentence, fit to be said; None for a reply that is not one.

    Refused: markup or a tool call, fewer than three words, an empty reply.
    """
    text = speakable(text.replace("\n", " ")).strip().strip('"').strip()
    if not text or "<" in text or "{" in text:
        return None
    m = re.match(r"(.+?[.!?])(\s|$)", text)
    sentence = (m.group(1) if m else text)[:SUMMARY_CHARS].strip()
    if len(sentence.split()) < 3:
        return None
    return sentence if sentence[-1] in ".!?" else sentence + "."


def synthesize(tts: TTS, text: str, rate: int) -> np.ndarray:
    """``text`` voiced, int16 at the line's ``rate`` (a scheduler job)."""
    speech = tts.synthesize(speakable(text))
    return float_to_pcm16(StreamResampler(speech.sample_rate, rate).process(speech.audio,
                                                                            last=True))


def answer_of(text: str) -> str | None:
    """``yes``, ``no`` or None (neither, or both) in what someone said."""
    words = " " + " ".join(re.sub(r"[^a-z' ]+", " ", text.lower().replace("’", "'")).split()) + " "
    yes = any(f" {w} " in words for w in YES)
    no = any(f" {w} " in words for w in NO)
    if yes == no:
        return None
    return "yes" if yes else "no"
