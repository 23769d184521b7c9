"""OpenAI-compatible servers for tests: a real one, and a small one for fault injection.

:class:`LlamaServer` runs llama-cpp-python's ``llama_cpp.server`` with the bundled
SmolLM2-135M GGUF on 127.0.0.1 under the model name ``smollm2-135m``, so a profile with
``llm.backend = "openai"`` talks to a real server over real HTTP (needs llama-cpp-python's
server dependencies, the ``test`` extra). :class:`FakeServer` answers as a test tells it to:
the faults a real server will not produce on demand, and a record of the requests it got.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
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


class FakeServer:
    """An HTTP server answering ``POST …/chat/completions`` as ``mode`` says, recording requests.

    Modes: ``ok`` streams ``words`` then usage and [DONE]; ``status`` answers 500 with a body;
    ``stall`` sends headers and nothing more; ``trickle`` sends an event every 20 ms until
    the client goes away (``gone`` is set then).
    """

    def __init__(self, mode: str = "ok", words: tuple[str, ...] = ("Hello", " there", ".")):
        self.mode, self.words = mode, words
        self.requests: list[tuple[dict, dict]] = []
        self.gone = threading.Event()
        self.release = threading.Event()
        owner = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args) -> None:
                pass

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                owner.requests.append((dict(self.headers), body))
                owner.answer(self)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", free_tcp_port()), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_port}/v1"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def answer(self, h: BaseHTTPRequestHandler) -> None:
        if self.mode == "status":
            payload = b'{"error": {"message": "model overloaded"}}'
            h.send_response(500)
            h.send_header("Content-Length", str(len(payload)))
            h.end_headers()
            h.wfile.write(payload)
            return
        headers(h)
        if self.mode == "stall":
            self.release.wait(10)
            return
        try:
            if self.mode == "trickle":
                for i in range(500):
                    event(h, {"choices": [{"delta": {"content": f" w{i}"}}]})
                    time.sleep(0.02)
                return
            for w in self.words:
                event(h, {"choices": [{"delta": {"content": w}, "finish_reason": None}]})
            event(h, {"choices": [{"delta": {}, "finish_reason": "stop"}]})
            event(h, {"choices": [], "usage": {"prompt_tokens": 40, "completion_tokens": 2,
                                                 "prompt_tokens_details": {"cached_tokens": 32}}})
            h.wfile.write(b"data: [DONE]\n\n")
        except OSError:
            self.gone.set()

    def close(self) -> None:
        self.release.set()
        self.httpd.shutdown()
        self.httpd.server_close()


def event(h: BaseHTTPRequestHandler, obj: dict) -> None:
    h.wfile.write(b"data: " + json.dumps(obj).encode() + b"\n\n")
    h.wfile.flush()


def headers(h: BaseHTTPRequestHandler) -> None:
    h.send_response(200)
    h.send_header("Content-Type", "text/event-stream")
    h.send_header("Connection", "close")
    h.end_headers()
