"""The scripted calls of ``bench summary``: each call's turns, and the facts they hold.

Written as the call log would hold them: the caller's words as the ASR writes them (numbers
as digits, some filler), the agent's replies as a small model says them. Each call knows what
a note-taker should read out of it: the caller's name (None: never said), why they called
(any one of the phrases in ``reason`` shows it), and the number to call back on (None: none
given, or one the caller declined). Some calls make a field hard on purpose: a name spelled
out, a number corrected, a number that is not the callback one, a name the agent says but the
caller never gave.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ScriptedCall:
    """One call of the bench and its facts."""

    name: str
    greeting: str
    turns: tuple[tuple[str, str], ...]
    """(the caller's words, the agent's reply) per turn."""
    caller_name: str | None
    reason: tuple[str, ...]
    """Phrases any one of which in the extracted reason shows it right (lower case)."""
    callback_number: str | None
    """Its digits (None: no number to call back on)."""


CALLS: tuple[ScriptedCall, ...] = (
    ScriptedCall(
        "charged-twice", "Hello, this is the front desk assistant. How can I help you?",
        (("Hi, yes, my name is Maria Lopez. I'm calling because my card was charged twice for "
          "the same order.", "I'm sorry to hear that. I can pass this on to the accounts team. "
          "Can they call you back?"),
         ("Yes, please call me back on 555-0142.", "Thank you, Maria. I've noted 555-0142 and "
          "the team will call you back."),
         ("Great, thanks. Bye.", "Goodbye.")),
        "Maria Lopez", ("charged twice", "double charge", "charged two", "duplicate", "twice"),
        "5550142"),
    ScriptedCall(
        "opening-hours", "Hello, how can I help you?",
        (("Hi. What time are you open on Saturday?", "On Saturdays we are open from ten until "
          "four."),
         ("Okay, and is there parking nearby?", "Yes, there is a car park behind the building."),
         ("Perfect, thank you.", "You're welcome. Goodbye.")),
        None, ("hour", "open", "saturday", "time"), None),
    ScriptedCall(
        "reschedule", "Good morning, you're through to the appointments line. How can I help?",
        (("Morning. This is James Okafor. I need to move my appointment on Thursday, something "
          "came up at work.", "Of course, James. I can't change bookings myself, but I can ask "
          "the team to call you. What number should they use?"),
         ("My mobile, 07700 900 123.", "Thank you. The team will call you on 07700 900123 to "
          "find a new time."),
         ("Thanks a lot.", "Goodbye, James.")),
        "James Okafor", ("reschedul", "move", "change", "appointment"), "07700900123"),
    ScriptedCall(
        "spelled-name", "Hello, how can I help you?",
        (("Hello, I'd like to leave a message for the manager.", "Of course. May I have your "
          "name?"),
         ("It's Siobhan, S-I-O-B-H-A-N, Kelly.", "Thank you, Siobhan. What is the message?"),
         ("I found a wallet outside your shop yesterday and I handed it in at the counter. I "
          "just wanted to make sure the owner gets it.", "That's very kind. I'll pass it on to "
          "the manager."),
         ("That's all, no need to call me back.", "Thank you for calling. Goodbye.")),
        "Siobhan Kelly", ("wallet", "found", "handed in", "lost", "message"), None),
    ScriptedCall(
        "corrected-number", "Hello, this is the service desk. How can I help?",
        (("Hi, I'm Tom. My washing machine repair was booked for today and nobody came.",
          "I'm sorry about that, Tom. I'll ask the service team to call you. What's your "
          "number?"),
         ("It's 555-0199. No, sorry, 555-0189.", "Thank you. So that's 555-0189?"),
         ("Yes, that's right.", "The team will call you back on 555-0189 today.")),
        "Tom", ("repair", "nobody came", "no one came", "missed", "technician", "no-show",
                "didn't show", "did not show", "didn't come", "did not come", "washing machine"),
        "5550189"),
    ScriptedCall(
        "no-name-callback", "Hello, how can I help you?",
        (("Yeah, hi. I ordered a sofa three weeks ago and it still hasn't been delivered.",
          "I'm sorry for the wait. I can ask the delivery team to check and call you back. "
          "What number can they reach you on?"),
         ("Call me on 020 7946 0321.", "Thank you. They will call you on 020 7946 0321."),
         ("Okay.", "Goodbye.")),
        None, ("deliver", "sofa", "order", "late", "not arrived", "hasn't arrived"),
        "02079460321"),
    ScriptedCall(
        "other-number", "Hello, you're through to the office assistant. How can I help?",
        (("Hi, this is Priya Shah. I'd like to cancel my membership please.", "I can pass that "
          "on, Priya. Is there a number the team can reach you on?"),
         ("My membership number is 448812, if that helps. But they can email me, I'd rather "
          "not get a call.", "Thank you. I've noted your membership number, 448812, and that "
          "you'd prefer an email."),
         ("Thanks. Bye.", "Goodbye.")),
        "Priya Shah", ("cancel", "membership"), None),
    ScriptedCall(
        "price-question", "Hello, how can I help you?",
        (("Hi, I'm Daniel Brooks, how much do you charge for a one hour lesson?", "I don't "
          "know the price, Daniel. I can ask someone to call you back with it."),
         ("Sure, my number is 555 0167.", "Thank you. Someone will call you on 555 0167."),
         ("Cheers.", "Goodbye.")),
        "Daniel Brooks", ("price", "cost", "charge", "how much", "lesson", "fee"), "5550167"),
    ScriptedCall(
        "agent-names", "Hello, Anna speaking, how can I help you?",
        (("Hi Anna, I'm calling about a parcel that was left at the wrong address.", "I'm sorry "
          "about that. I'll report it to the delivery team."),
         ("Thanks. The parcel has a tracking number ending in 7731.", "Got it, ending in 7731. "
          "The team will look into it."),
         ("Alright, bye.", "Goodbye.")),
        None, ("parcel", "wrong address", "deliver", "package"), None),
    ScriptedCall(
        "complaint", "Hello, how can I help you?",
        (("Hello. My name is Grace Liu. I want to complain about a rude member of staff at "
          "your branch on Monday.", "I'm sorry to hear that, Grace. I'll pass your complaint "
          "to the branch manager."),
         ("Please have the manager call me, 555-0110.", "Of course. The manager will call you "
          "on 555-0110."),
         ("Thank you.", "Thank you for calling. Goodbye.")),
        "Grace Liu", ("complain", "rude", "staff"), "5550110"),
    ScriptedCall(
        "wrong-number", "Hello, how can I help you?",
        (("Oh, hi. Is this the pharmacy?", "No, sorry, this isn't the pharmacy."),
         ("Oh, sorry, wrong number.", "No problem. Goodbye.")),
        None, ("wrong number", "pharmacy", "mistake", "misdial"), None),
    ScriptedCall(
        "refund-late-name", "Hello, how can I help you?",
        (("Hi, I returned a jacket two weeks ago and I still haven't had my refund.", "I'm "
          "sorry about that. Can I take your name and a number so the team can call you?"),
         ("Sure. Robert Fischer, and the number is 555-0123.", "Thank you, Robert. The team "
          "will call you on 555-0123 about your refund."),
         ("Thanks.", "Goodbye.")),
        "Robert Fischer", ("refund", "return", "jacket"), "5550123"),
)
"""Twelve calls: eight names and seven callback numbers to find, and four names and five
numbers not to invent. The first run of the bench was read, and the job's grammar and prompt
changed after it: these calls are no longer unseen (see :data:`HELD_OUT`)."""

HELD_OUT: tuple[ScriptedCall, ...] = (
    ScriptedCall(
        "heating", "Hello, how can I help you?",
        (("Hello, it's Karen Mitchell here. Our heating stopped working this morning. Could "
          "an engineer come out?", "I'm sorry, Karen. I'll ask the team to arrange a visit. "
          "What number should they call?"),
         ("555-0176, please.", "Thank you. The team will call you on 555-0176.")),
        "Karen Mitchell", ("heating", "boiler", "engineer", "not working", "stopped"),
        "5550176"),
    ScriptedCall(
        "invoice-copy", "Hello, you're through to the accounts assistant. How can I help?",
        (("Hi, could you send me a copy of last month's invoice? I seem to have lost it.",
          "Of course. I'll ask the accounts team to send it. Would you like a call back?"),
         ("No, email is fine, they have my address. Thanks.", "You're welcome. Goodbye.")),
        None, ("invoice", "copy"), None),
    ScriptedCall(
        "table-surname", "Hello, how can I help you?",
        (("Hi, I'd like to reserve a table for six on Friday evening.", "I can pass that on. "
          "What name is it under?"),
         ("Under the name Olsen.", "Thank you. Would you like the team to call you to "
          "confirm?"),
         ("No, I'll call back myself tomorrow.", "Alright. Goodbye.")),
        "Olsen", ("table", "reserv", "book"), None),
    ScriptedCall(
        "two-numbers", "Hello, how can I help you?",
        (("Hi, this is Hugo Santos. I'm waiting on the quote for my new kitchen. My work "
          "number is 555-0150, but please call me back on my mobile, 555-0177.", "Thank you, "
          "Hugo. I'll ask the team to call you on 555-0177 about your quote."),
         ("Great, thanks.", "Goodbye.")),
        "Hugo Santos", ("quote", "kitchen"), "5550177"),
)
"""Four calls written after that change and before the next run: unseen by any choice."""

EXTRACT = {
    "caller_name": "the caller's name",
    "reason": "why the caller called",
    "callback_number": "the phone number the caller asked to be called back on",
}
"""The fields asked for: those of ``config.toml``'s example."""
