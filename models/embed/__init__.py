"""Sentence vectors: which of a profile's facts a caller's words are about."""
