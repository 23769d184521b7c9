"""One console for a whole ``callagent cluster``: the calls of both workers, live, then gone.

Two sipp callers go through kamailio, which sends one to each worker; the console (in the
cluster's own process) lists both calls, each with its worker and the caller's words as they
are said, read here from ``/api/calls?active=1`` as a script would; both leave the list within
2 s of their BYE.
"""

from __future__ import annotations

import socket
import time

import httpx
import pytest
from cluster_harness import calls, real_cluster, routed, start_cluster

from testkit.agentproc import free_block
from testkit.samples import QUESTION
from testkit.wire import spoken_ulaw
from tests.waiting import wait_until

HOLD_S = 25.0


@real_cluster
@pytest.mark.slow  # two workers load their models on shared cores
def test_the_console_sees_every_workers_calls(tmp_path):
    audio = spoken_ulaw(QUESTION, tmp_path / "q.ulaw", lead_s=2.0, tail_s=HOLD_S)
    port = free_block(1, socket.SOCK_STREAM)
    cluster = start_cluster(tmp_path, f"sqlite:///{tmp_path / 'calls.db'}", metrics=False,
                            sip_extra=f"[console]\nenabled = true\nport = {port}\n")
    api = f"http://127.0.0.1:{port}/api/calls?active=1"
    try:
        assert cluster.events("console-listening")
        sipp = calls(cluster, routed(tmp_path, "two", audio, int(HOLD_S * 1000)), 2,
                     HOLD_S + 60)

        def live() -> list[dict]:
            return httpx.get(api, timeout=5).json()["calls"]

        assert wait_until(lambda: len(live()) == 2, 20), live()
        assert {c["worker"] for c in live()} == {"w1", "w2"}
        heard = wait_until(lambda: all(any(ln["who"] == "caller" for ln in c["lines"])
                                       for c in live()), HOLD_S)
        up = live()
        assert heard, up
        out, _ = sipp.communicate(timeout=HOLD_S + 90)
        ended = time.time()
        assert sipp.returncode == 0, out[-2000:]
        assert wait_until(lambda: live() == [], 2.0), live()
        print(f"console: both workers' calls listed ({[c['worker'] for c in up]}), words "
              f"{[ln['text'] for c in up for ln in c['lines'] if ln['who'] == 'caller']}; "
              f"gone {time.time() - ended:.2f} s after sipp ended")
    finally:
        assert cluster.stop() == 0
