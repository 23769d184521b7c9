"""The shape of a JSON reply: a flat object of string fields, as a JSON schema and as a grammar.

:meth:`models.llm.base.LLM.complete` takes one. A llama.cpp backend samples under its GBNF
grammar (:meth:`JsonObject.gbnf`), so the reply is that object and nothing else: its keys in
order, each value a string of at most ``max_chars`` characters (or ``null`` where the field
may be missing), no newline or control character in any. Around and between its members the
grammar allows what chat models write by habit, a markdown code fence and a few spaces and
newlines of indentation: held to one line, a small model strays from what it would say (it
wrote ``"null"`` for a reason it gave in free text, bench summary). A server backend sends the same
shape as a JSON schema (:meth:`JsonObject.schema`), which llama.cpp's server and vLLM turn into
the same kind of grammar. llama-cpp-python's own schema converter is not used for the
grammar: it ignores ``maxLength``, and a string the model never closes would run to the end
of ``max_tokens`` and come back cut.
Imports nothing from the project.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_NAME = re.compile(r"[a-z][a-z0-9_]*")


@dataclass(frozen=True)
class Field:
    """One key of the object."""

    name: str
    """Lower-case letters, digits and ``_``, starting with a letter."""
    max_chars: int = 120
    """The longest value (escapes count as one character each)."""
    nullable: bool = True
    """The value may be ``null`` (the text did not say it); else a string of 1 or more."""


@dataclass(frozen=True)
class JsonObject:
    """An object with exactly these keys, in this order."""

    fields: tuple[Field, ...]

    def __post_init__(self) -> None:
        names = [f.name for f in self.fields]
        if not names or len(set(names)) != len(names):
            raise ValueError(f"fields {names}: at least one, each named once")
        for f in self.fields:
            if not _NAME.fullmatch(f.name) or f.max_chars < 1:
                raise ValueError(f"field {f.name!r}: a lower-case name and max_chars >= 1")

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(f.name for f in self.fields)

    def schema(self) -> dict:
        """The JSON schema (draft 2020-12 subset every grammar converter reads)."""
        props = {}
        for f in self.fields:
            text = {"type": "string", "minLength": 1, "maxLength": f.max_chars}
            props[f.name] = {"anyOf": [text, {"type": "null"}]} if f.nullable else text
        return {"type": "object", "properties": props, "required": list(self.names),
                "additionalProperties": False}

    def gbnf(self) -> str:
        """The llama.cpp grammar of exactly this object (rule ``root``)."""
        members = ' "," ws '.join(f'"\\"{f.name}\\"" ws ":" ws {_rule(f)}' for f in self.fields)
        lines = [f'root ::= fence? "{{" ws {members} ws "}}" fence-end?',
                 r'fence ::= "```" "json"? "\n"', r'fence-end ::= "\n```"',
                 r"ws ::= [ \t\n]{0,16}",
                 r'char ::= [^"\\\x00-\x1f] | "\\" (["\\/bfnrt] | "u" [0-9a-fA-F]{4})']
        for f in self.fields:
            text = f'"\\"" char{{1,{f.max_chars}}} "\\""'
            lines.append(f"{_rule(f)} ::= {text}" + (' | "null"' if f.nullable else ""))
        return "\n".join(lines) + "\n"


def _rule(f: Field) -> str:
    return "value-" + f.name.replace("_", "-")  # GBNF rule names take no underscore
