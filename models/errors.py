"""Errors raised by model loading, with the fix in the message."""


class ModelMissingError(RuntimeError):
    """A model or its runtime package is not installed; the message says what to install."""
