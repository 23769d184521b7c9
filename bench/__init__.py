"""Benchmarks: pipeline, call on the wire, ASR, WER; spoken samples, sipp scenarios, scorer.

Numbers, not pass/fail.
"""
