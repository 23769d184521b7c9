"""A real OpenAI-compatible server for tests: llama-cpp-python's ``llama_cpp.server``.

It serves the bundled SmolLM2-135M GGUF on 127.0.0.1 under the model name ``smollm2-135m``,
so a profile with ``llm.backend = "openai"`` talks to a real server over real HTTP. Needs
llama-cpp-python's server dependencies (the ``test`` extra).
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx

from models import catalog

MODEL = "smollm2-135m"


def free_tcp_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class LlamaServer:
    """``python -m llama_cpp.server`` in a child process; ``url`` is its API root (…/v1).

    ``--interrupt_requests False``: by default a new request (another call's turn, a prime)
    cuts the reply being streamed.
    """

    def __init__(self, log_dir: Path, n_ctx: int = 1024):
        self.port = free_tcp_port()
        self.url = f"http://127.0.0.1:{self.port}/v1"
        self.log_path = log_dir / f"llama-server-{self.port}.log"
        gguf = catalog.resolve(MODEL, "llm")
        cmd = [sys.executable, "-m", "llama_cpp.server", "--model", str(gguf),
               "--model_alias", MODEL, "--host", "127.0.0.1", "--port", str(self.port),
               "--n_ctx", str(n_ctx), "--n_threads", "1", "--n_threads_batch", "1",
               "--interrupt_requests", "False", "--verbose", "False"]
        with open(self.log_path, "wb") as out:
            self.proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT,
                                         env={**os.environ, "PYTHONUNBUFFERED": "1"})

    def wait_ready(self, timeout_s: float = 120.0) -> LlamaServer:
        """Return once ``GET /v1/models`` answers; raise with the server's log if it never does."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                break
            try:
                if httpx.get(f"{self.url}/models", timeout=2.0).status_code == 200:
                    return self
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
        self.stop()
        raise RuntimeError(f"llama_cpp.server did not come up on port {self.port}:\n"
                           + self.log_text()[-3000:])

    def kill(self) -> None:
        """Stop at once (SIGKILL), as a crashed or unplugged server would."""
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(10)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)

    def log_text(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""
