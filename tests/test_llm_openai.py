"""``llm.backend = "openai"``: the reply streamed from an OpenAI-compatible server.

Against a real server (llama-cpp-python's ``llama_cpp.server`` serving the bundled SmolLM2):
tokens stream with their timing, a simulated call is answered and its turn logs the first-token
time, and a server killed mid-reply or mid-call fails the turn with the error logged. A small
HTTP server injects the faults a real one will not produce on demand (an error status, a stall,
a disconnect watched from the server's side) and records the requests it gets.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from http.server import BaseHTTPRequestHandler

import numpy as np
import pytest

from agent.cli import main as cli
from agent.simulate import simulate
from db.records import EventRecord, TurnRecord
from db.writer import CallLogWriter
from dialplan import ConfigError, parse_config
from dialplan.options import DBOptions, LLMOptions
from models.llm.base import Message
from models.llm.openai import LLMServerError, OpenAILLM
from models.registry import ModelCache
from testkit.samples import spoken
from tests.conftest import TEST_CONFIG
from tests.llm_server import MODEL, FakeServer, LlamaServer, event, free_tcp_port, headers
from tests.waiting import wait_until

QUESTION = [Message("system", TEST_CONFIG["system_prompt"]),
            Message("user", "When does the library open on Saturday?")]


def llm(url: str, **kw) -> OpenAILLM:
    return OpenAILLM(LLMOptions(backend="openai", base_url=url, model=MODEL, **kw))


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    srv = LlamaServer(tmp_path_factory.mktemp("llm")).wait_ready()
    yield srv
    srv.stop()


@pytest.fixture
def own_server(tmp_path):
    """A server of the test's own, to kill."""
    srv = LlamaServer(tmp_path).wait_ready()
    yield srv
    srv.stop()


# ---- a real server -------------------------------------------------------------------------


@pytest.mark.server  # llama_cpp.server in a child process
@pytest.mark.model
def test_reply_streams_from_a_real_server_with_its_timing_and_usage(server):
    model = llm(server.url, max_tokens=12, temperature=0.0)
    stream = model.stream(QUESTION)
    pieces = list(stream)
    m = stream.metrics
    assert len(pieces) >= 2 and "".join(pieces) == stream.text and stream.text.strip()
    assert m.model == MODEL
    assert 0 < m.ttft_s <= m.duration_s
    assert 0 < m.tokens <= 12
    # llama_cpp.server sends no usage event when streaming (llama-server and vLLM do: see
    # the injected-fault tests for how it is read); 0 means "not reported".
    assert (m.prompt_tokens, m.cached_tokens) == (0, 0)


@pytest.mark.server  # llama_cpp.server in a child process
@pytest.mark.model
def test_a_server_killed_mid_reply_raises_a_server_error(own_server):
    stream = llm(own_server.url, max_tokens=400, temperature=0.0).stream(
        [Message("user", "Count from one to two hundred in words, one number a line.")])
    it = iter(stream)
    assert next(it)
    own_server.kill()
    with pytest.raises(LLMServerError, match="cut before the reply finished|cannot connect"):
        for _ in it:
            pass
    assert stream.metrics.tokens >= 1 and stream.metrics.ttft_s > 0


def caller(*parts: str | float) -> tuple[np.ndarray, int]:
    """Caller audio: text is spoken, numbers are seconds of silence."""
    out, rate = [], 24000
    for part in parts:
        if isinstance(part, str):
            audio, rate = spoken(part)
            out.append(audio)
        else:
            out.append(np.zeros(int(part * rate), np.float32))
    return np.concatenate(out), rate


def openai_profile(url: str):
    return parse_config({
        "system_prompt": TEST_CONFIG["system_prompt"],
        "profiles": {"shared": {"asr": {"model": "tiny.en"},
                                "llm": {"backend": "openai", "base_url": url, "model": MODEL,
                                        "max_tokens": 24, "timeout_s": 20.0}}},
        "dialplan": {"100": "shared"},
    }).profiles["shared"]


@pytest.mark.server  # llama_cpp.server in a child process
@pytest.mark.tool
@pytest.mark.model
def test_simulated_call_is_answered_by_the_server_and_logs_first_token_time(
        server, stage_cache, tmp_path):
    profile = openai_profile(server.url)
    stages = stage_cache.stages(profile)
    assert isinstance(stages.llm, OpenAILLM)
    db = tmp_path / "log.db"
    writer = CallLogWriter(DBOptions(url=f"sqlite:///{db}", spool_dir=str(tmp_path / "spool")))
    call = simulate(*caller("What time does the library open on Saturday?"), profile, stages,
                    call_log=writer, fast=True, greeting=False)
    assert writer.close(timeout=10)
    (turn,) = call.turns
    assert turn.reply_text and not turn.unanswered and turn.audio_out_s > 0.5
    with sqlite3.connect(db) as con:
        rows = con.execute("SELECT llm_ttft_s, llm_tokens, reply_text, unanswered FROM turns "
                           "WHERE call_id = ?", (call.call_id,)).fetchall()
        (llm_model,) = con.execute("SELECT llm_model FROM calls WHERE id = ?",
                                   (call.call_id,)).fetchone()
    ((ttft, tokens, reply, unanswered),) = rows
    assert 0 < ttft < 20 and 0 < tokens <= 24 and reply == turn.reply_text and not unanswered
    assert llm_model == MODEL


class KillOnFirstTurn:
    """A call log that kills the server once the first turn is recorded (after its reply)."""

    def __init__(self, srv: LlamaServer):
        self.srv = srv

    def put(self, record) -> None:
        if isinstance(record, TurnRecord) and record.index == 0:
            self.srv.kill()


@pytest.mark.server  # llama_cpp.server in a child process
@pytest.mark.tool
@pytest.mark.model
def test_server_gone_mid_call_gets_an_apology_and_the_turn_logged_with_the_error(
        own_server, stage_cache):
    profile = openai_profile(own_server.url)
    stages = stage_cache.stages(profile)
    call = simulate(*caller("What time does the library open on Saturday?", 25.0,
                            "Can I return a book on Sunday?"),
                    profile, stages, call_log=KillOnFirstTurn(own_server), fast=True,
                    greeting=False)
    first, second = call.turns
    assert first.reply_text and first.llm_ttft_s > 0 and not first.unanswered
    # The caller hears the profile's apology, not silence; the turn still counts as unanswered.
    assert second.unanswered == "error" and second.reply_text == profile.apology
    assert second.transcript and second.audio_out_s > 1.0
    errors = [r.detail for r in call.records if isinstance(r, EventRecord) and r.kind == "error"]
    assert len(errors) == 1 and "LLMServerError" in errors[0] and own_server.url in errors[0]
    assert "cannot connect" in errors[0]
    assert call.end_reason == "caller-bye"  # the call goes on after the failed turn


# ---- injected faults -----------------------------------------------------------------------


@pytest.fixture
def fake(request):
    srv = FakeServer(*getattr(request, "param", ("ok",)))
    yield srv
    srv.close()


@pytest.mark.server  # an HTTP fake on a loopback port
def test_request_maps_the_options_and_usage_maps_to_the_metrics(fake):
    stream = llm(fake.url, max_tokens=7, temperature=0.2, seed=5).stream(QUESTION)
    assert "".join(stream) == "Hello there."
    ((headers, body),) = fake.requests
    assert body["model"] == MODEL and body["max_tokens"] == 7 and body["temperature"] == 0.2
    assert body["seed"] == 5 and body["stream"] is True
    assert body["stream_options"] == {"include_usage": True}
    assert body["messages"] == [{"role": m.role, "content": m.content} for m in QUESTION]
    assert "authorization" not in {k.lower() for k in headers}
    m = stream.metrics
    # The server's counts win over the pieces counted (an event may carry several tokens).
    assert (m.prompt_tokens, m.cached_tokens, m.tokens) == (40, 32, 2)


@pytest.mark.server  # an HTTP fake on a loopback port
def test_llama_server_timings_give_prompt_and_cached_tokens(fake):
    # llama.cpp's C++ server: ``timings`` (prompt_n evaluated now, cache_n reused) and no usage.
    def answer(h: BaseHTTPRequestHandler) -> None:
        headers(h)
        event(h, {"choices": [{"delta": {"content": "Hi"}}]})
        event(h, {"choices": [{"delta": {"content": "."}, "finish_reason": "stop"}],
                   "timings": {"prompt_n": 5, "cache_n": 30, "predicted_n": 2}})
        h.wfile.write(b"data: [DONE]\n\n")

    fake.answer = answer
    stream = llm(fake.url).stream(QUESTION)
    assert "".join(stream) == "Hi."
    m = stream.metrics
    assert (m.prompt_tokens, m.cached_tokens, m.tokens) == (35, 30, 2)


@pytest.mark.server  # an HTTP fake on a loopback port
def test_api_key_from_the_option_or_the_environment(fake):
    def options(env: dict[str, str], **table) -> LLMOptions:  # the key is resolved at load
        table = {"backend": "openai", "base_url": fake.url, "model": MODEL, **table}
        return parse_config({"llm": table}, env=env).profiles["default"].llm

    both = {"OPENAI_API_KEY": "from-openai-env", "CALLAGENT_LLM_API_KEY": "from-callagent-env"}
    for o in (options({"OPENAI_API_KEY": "from-openai-env"}), options(both),
              options(both, api_key="from-config")):
        list(OpenAILLM(o).stream(QUESTION))
    assert [h["Authorization"] for h, _ in fake.requests] == [
        "Bearer from-openai-env", "Bearer from-callagent-env", "Bearer from-config"]
    assert "from-config" not in repr(LLMOptions(api_key="from-config"))
    local = parse_config({"llm": {"backend": "llama-batch"}}, env=both)
    assert local.profiles["default"].llm.api_key == ""  # only an openai profile sends a key


@pytest.mark.server  # an HTTP fake on a loopback port
@pytest.mark.parametrize("fake", [("status",)], indirect=True)
def test_an_error_status_is_a_server_error_with_the_servers_message(fake):
    with pytest.raises(LLMServerError, match="HTTP 500: .*model overloaded"):
        list(llm(fake.url).stream(QUESTION))


@pytest.mark.server  # an HTTP fake on a loopback port
@pytest.mark.parametrize("fake", [("stall",)], indirect=True)
def test_no_first_token_within_the_timeout_is_a_server_error(fake):
    stream = llm(fake.url, timeout_s=0.5).stream(QUESTION)
    t0 = time.monotonic()
    with pytest.raises(LLMServerError, match="no token within 0.5 s"):
        list(stream)
    assert time.monotonic() - t0 < 3.0
    assert stream.metrics.ttft_s is None and stream.metrics.tokens == 0


@pytest.mark.server  # an HTTP fake on a loopback port
@pytest.mark.parametrize("end", [b"", b"data: [DONE]\n\n"], ids=["closed", "done-early"])
def test_a_stream_that_ends_without_a_finish_reason_is_a_server_error(fake, end):
    def cut(h: BaseHTTPRequestHandler) -> None:
        headers(h)
        event(h, {"choices": [{"delta": {"content": "Hello"}}]})
        h.wfile.write(end)

    fake.answer = cut
    stream = llm(fake.url).stream(QUESTION)
    with pytest.raises(LLMServerError, match="ended before the reply finished"):
        list(stream)
    assert stream.text == "Hello"


@pytest.mark.server  # an HTTP fake on a loopback port
@pytest.mark.parametrize("fake", [("trickle",)], indirect=True)
def test_closing_the_stream_closes_the_connection(fake):
    stream = llm(fake.url).stream(QUESTION)
    it = iter(stream)
    assert [next(it) for _ in range(3)] == [" w0", " w1", " w2"]
    stream.close()
    # The server's next writes fail: it sees the caller gone (and would stop generating).
    assert fake.gone.wait(5.0)
    assert list(it) == [] and stream.metrics.tokens == 3


@pytest.mark.server  # an HTTP fake on a loopback port
@pytest.mark.parametrize("fake", [("stall",)], indirect=True)
def test_closing_from_another_thread_wakes_a_reader_waiting_for_the_first_token(fake):
    stream = llm(fake.url, timeout_s=10.0).stream(QUESTION)
    out: dict = {}

    def read() -> None:
        try:
            out["pieces"] = list(stream)
        except Exception as e:  # kept for the assertion below to show
            out["error"] = e

    reader = threading.Thread(target=read)
    reader.start()
    assert wait_until(lambda: fake.requests, timeout=5.0)
    time.sleep(0.2)  # the reader is blocked on the socket now
    t0 = time.monotonic()
    stream.close()
    reader.join(5.0)
    assert not reader.is_alive() and time.monotonic() - t0 < 2.0  # not the 10 s read timeout
    assert out == {"pieces": []}


@pytest.mark.unit
def test_connection_refused_is_a_server_error():
    url = f"http://127.0.0.1:{free_tcp_port()}/v1"
    with pytest.raises(LLMServerError, match=f"{url}/chat/completions: cannot connect"):
        list(llm(url).stream(QUESTION))
    llm(url).prime("You are a test.")  # best effort: logged, not raised


@pytest.mark.unit
def test_history_is_trimmed_to_the_context_oldest_exchange_first():
    model = llm("http://127.0.0.1:9/v1", n_ctx=300, max_tokens=40)
    turns = [Message(r, f"{r} message number {i} " + "word " * 40)
             for i in range(6) for r in ("user", "assistant")]
    msgs = [Message("system", "Be brief."), *turns, Message("user", "And now?")]
    kept = model.fit(msgs)
    assert kept[0] == msgs[0] and kept[-1] == msgs[-1]
    assert kept[1:-1] == msgs[len(msgs) - len(kept) + 1:-1]  # the newest history survives
    assert 2 <= len(kept) < len(msgs)
    budget = 300 - 40 - 32
    assert sum(model.count_tokens(m.content) + 8 for m in kept) <= budget or len(kept) == 2


# ---- configuration -------------------------------------------------------------------------


@pytest.mark.unit
@pytest.mark.parametrize(("llm_table", "message"), [
    ({"backend": "openai"}, "llm.base_url: required"),
    ({"backend": "openai", "base_url": "127.0.0.1:8080/v1"}, "llm.base_url: expected an http"),
    ({"backend": "openai", "base_url": "http://h/v1", "timeout_s": 0}, "llm.timeout_s: must be"),
])
def test_bad_openai_settings_are_config_errors_naming_the_key(llm_table, message):
    profile = parse_config({"llm": llm_table}).profiles["default"]
    with pytest.raises(ConfigError, match=message):
        ModelCache().llm(profile.llm)


@pytest.mark.unit
def test_unknown_backend_is_rejected_at_parse():
    with pytest.raises(ConfigError, match="profiles.default.llm.backend: 'vllm' is not one of"):
        parse_config({"llm": {"backend": "vllm"}})


@pytest.mark.model
def test_cli_exits_2_naming_the_missing_base_url(tmp_path, capsys):
    import soundfile as sf

    config = tmp_path / "c.toml"
    config.write_text('[profiles.p]\nasr = { model = "tiny.en" }\nllm = { backend = "openai" }\n'
                      '[dialplan]\n"100" = "p"\n')
    wav = tmp_path / "q.wav"
    sf.write(wav, np.zeros(8000, np.float32), 8000)
    code = cli.main(["simulate", str(wav), "--profile", "p", "--config", str(config), "--no-log"])
    assert code == 2
    assert "llm.base_url: required" in capsys.readouterr().err
