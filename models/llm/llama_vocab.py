"""A GGUF model's tokenizer and chat template, through llama.cpp's C API (llama-batch's).

The same template and special-token handling as llama-cpp-python's ``Llama`` (its Jinja2
formatter over the GGUF's ``tokenizer.chat_template``), so both backends send the model the
same prompt.
"""

from __future__ import annotations

import ctypes
from typing import Any

from models.errors import ModelMissingError
from models.llm.base import Message


class ChatVocab:
    """Tokens of text and of chat prompts for one loaded model."""

    def __init__(self, lc: Any, model: Any, path: object):
        from llama_cpp.llama_chat_format import Jinja2ChatFormatter

        self._lc = lc
        self._vocab = lc.llama_model_get_vocab(model)
        template = lc.llama_model_chat_template(model, None)
        if not template:
            raise ModelMissingError(f"llm.model {path} has no chat template")
        self._format = Jinja2ChatFormatter(
            template.decode("utf-8"), eos_token=self._text(lc.llama_vocab_eos(self._vocab)),
            bos_token=self._text(lc.llama_vocab_bos(self._vocab)))

    def _text(self, token: int) -> str:
        if token < 0:
            return ""
        return self._lc.llama_vocab_get_text(self._vocab, token).decode("utf-8", "replace")

    def tokenize(self, text: str, add_bos: bool = False) -> list[int]:
        data = text.encode("utf-8")
        buf = (self._lc.llama_token * (len(data) + 8))()
        n = self._lc.llama_tokenize(self._vocab, data, len(data), buf, len(buf), add_bos, True)
        return list(buf[:n])

    def prompt(self, messages: list[Message]) -> list[int]:
        """The chat template applied to ``messages``, tokenized, ready for the reply."""
        result = self._format(messages=[{"role": m.role, "content": m.content}
                                        for m in messages])
        return self.tokenize(result.prompt, add_bos=not result.added_special)

    def piece(self, token: int) -> bytes:
        """The bytes of one token (a character may span two)."""
        buf = ctypes.create_string_buffer(64)
        n = self._lc.llama_token_to_piece(self._vocab, token, buf, len(buf), 0, False)
        return buf.raw[:max(0, n)]

    def is_end(self, token: int) -> bool:
        """End of generation (end of turn, end of text)."""
        return bool(self._lc.llama_vocab_is_eog(self._vocab, token))
