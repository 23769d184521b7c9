"""The three-question calls ``bench call --turns N`` places, one conversation per call.

Questions 2 and 3 of each are follow-ups: "that day", "it", "there" mean nothing without the
call's earlier turns, so a follow-up's reply time is what the agent's history (a longer prompt,
and whatever it keeps cached from the call's first turn) costs or saves. The questions ask what
any small business is asked, in general terms, so the bench profile's short system prompt is
enough context and no persona's words are needed.

Each call takes the next conversation, in turn: no two calls of a round put the same first
question, which the LLM would otherwise answer from its prompt cache after the first call.
"""

from __future__ import annotations

CONVERSATIONS: tuple[tuple[str, str, str], ...] = (
    ("What time do you open on Saturday?",
     "And when do you close that day?",
     "Is it the same on Sunday?"),
    ("Where are you located?",
     "Is there parking near there?",
     "Is it free to park there?"),
    ("Can I make a booking for Friday morning?",
     "Could we make that half past ten?",
     "And can I cancel it later if I need to?"),
    ("Do you take payment by card?",
     "What about cash?",
     "Can I pay that way over the phone?"),
    ("Are you open on public holidays?",
     "What about Easter Monday?",
     "And the day after that?"),
    ("How can I reach you by email?",
     "How quickly do you usually answer?",
     "And if it is urgent, who should I call instead?"),
    ("Is there step-free access to your building?",
     "Is there a lift to the upper floor as well?",
     "And are the toilets there accessible?"),
    ("Do you have free Wi-Fi for visitors?",
     "Do I need a password for it?",
     "And how long can I stay connected?"),
)
"""Eight calls of three questions; ``--turns N`` asks the first N of each (1 to 3)."""

MAX_TURNS = min(len(c) for c in CONVERSATIONS)
