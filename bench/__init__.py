"""Benchmarks: pipeline, call on the wire, ASR, WER; scorer.

Numbers, not pass/fail. The caller's side they share with the tests (sipp scenarios, spoken
samples, free ports, agent processes) is the test kit, :mod:`testkit`.
"""
