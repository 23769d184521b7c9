"""The llama-batch LLM backend: every call's reply decoded in one llama.cpp batch.

:mod:`.engine` holds the backend (:class:`~.engine.BatchedLlamaLLM`, named in
``models.registry.BACKENDS``) and :mod:`.generation` one reply on its KV sequence. The two
share the engine's private state (its condition, the ``llama_cpp`` module, ``_finish``), which
is why they form a package of their own. Imports nothing: ``llama_cpp`` loads only when a
profile names this backend.
"""
