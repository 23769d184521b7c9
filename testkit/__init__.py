"""The test kit: the outside of a call, shared by the tests and the benchmarks.

A real sipp caller and its scenarios (:mod:`testkit.wire`, ``testkit/sipp/``), the wire's
capture read back (:mod:`testkit.wire`), spoken samples (:mod:`testkit.samples`) and synthetic
callers' clips kept on disk (:mod:`testkit.clips`), free ports and agent processes started as a
caller would (:mod:`testkit.agentproc`).

Imports point down: the kit imports ``models``, ``dialplan`` and ``db`` only. It imports nothing
from ``bench/`` (the benchmarks, which import the kit) nor from ``agent/`` (started as a
process, never imported); no agent module imports it (tests/test_imports.py).
"""
