"""A real OpenAI-compatible chat-completions server for the tests, on 127.0.0.1 (a free port,
or the one given: ``FakeOpenAIServer(port=8080)``).

It speaks HTTP/1.1 over real sockets (``http.server`` in a thread), reads chunked request
bodies, and answers each request with the next behaviour of its script (``answer`` when the
script is empty):

    answer                 the role's valid result (``fake_model.answer_for``), streamed as
                           server-sent events in several chunks, then usage, then [DONE]
    Text(text)             ``text`` streamed the same way (garbage or repairable answers)
    Whole()                a valid result as one application/json completion (no stream)
    Status(code, retry_after=None, body="", headers=())   an error reply (headers: more of
                           them, as (name, value) pairs)
    Raw(body, content_type=..., status=200, reason=None)   exactly these bytes as the body
                           (with Content-Length), under that content type and status line
    Cut(text)              ``text`` streamed as events without a finish, then the connection
                           is cut (an answer that breaks off anywhere, even inside a key)
    ToolCalls(calls)       the model calling tools, as OpenAI streams it: per call a first
                           delta with its ``index``, ``id``, name and empty arguments, then its
                           arguments in pieces, then ``finish_reason: tool_calls``; ``calls``
                           are (name, arguments JSON text) pairs. ``whole=True``: each call
                           whole in one delta without ``index`` (older Ollama)
    stall                  read the request, then say nothing until the client hangs up
                           (counted in ``hang_ups``) or the server stops
    drop                   two events of the answer, then the connection is cut
    garbage                200 with bytes that are not an event stream
    bad_event              an event whose data is not JSON
    stream_error           an event carrying an ``error`` object
    no_done                the answer's events, then the end of the body without [DONE]
    flood                  200 and an event stream that is one endless line (64 KiB at a
                           time, no line break) until the client hangs up (``hang_ups``)

Every request is kept (headers, body, whether it was chunked, arrival time).

``flavour`` makes it answer as a real server does (what the runtime must cope with):

    openai             (the default) usage in a last ``choices: []`` chunk; any response_format
    llama.cpp          llama-server: a first delta with ``content: null``, usage in a
                       ``choices: []`` chunk, json_schema taken; a prompt past ``n_ctx_chars``
                       gets its 400 ``exceed_context_size_error``
    llama-cpp-python   no usage in streams; 500 naming ``response_format.type`` to a
                       json_schema response_format (only ``{"type": "json_object", "schema"}``
                       is taken); a prompt past ``n_ctx_chars`` gets an empty stream; one
                       answer at a time, and with ``interrupt_requests`` (True: its default
                       ``--interrupt_requests``) a request that comes while an answer streams
                       cuts it: after its next event, ``[DONE]`` and no finish_reason (counted
                       in ``interrupted``); the cut one's successor then runs. Its endpoints
                       that read the model (``/v1/models``, ``/extras/tokenize[/count]``) wait
                       for it too, and so cut a running answer as a chat request does
    strict-plain       a 400 naming ``response_format`` to any response_format

Its own endpoints (``/props``, ``/tokenize``, ``/api/show``, ...: ``fake_server_endpoints``)
answer as the flavour's server does (``vllm``, ``ollama`` and ``lmstudio`` stream as
``openai``), from ``window_tokens`` (the context it runs with, 4096), ``slots`` (1),
``model_name``, ``loaded`` (Ollama's and LM Studio's model is loaded: True) and ``num_ctx``
(Ollama's Modelfile parameter: None). ``endpoint_behaviours[path] = behaviour`` answers that
path with ``stall``, a ``Status`` or a ``Raw`` instead; ``endpoint_requests`` is what they
received (chat completions stay in ``requests``).

``event_seconds`` is a pause after each event of an answer (0: none; a model that takes its
time, so that requests overlap). ``running`` is the chat requests being answered now, and
``most_running`` the most there were at once.
``cached_tokens = N`` reports N of each prompt's tokens as cached (``prompt_tokens_details``).
``finish_reason`` is what the answer's last delta (or a whole completion) says: ``"stop"`` by
default, any other string as given (``"length"``: the model hit max_tokens), ``None``: a null
``finish_reason`` there (the stream still ends with [DONE]).
``loading = True`` answers every request 503 "Loading model" (llama-server while it loads);
``limited[model] = behaviour`` answers every request for ``model`` with ``behaviour`` (a model
whose limits are reached: ``Status(429, ...)``), ahead of the script, until it is removed;
``down()`` stops listening (connections refused), ``up()`` listens again on the same port.
``port`` is the port it listens on.

To try the runtime by hand against it, run it as a program: it serves until Ctrl-C, every
request answered with a valid result, and prints its base URL on a first line::

    python tests/support/fake_openai_server.py --port 8080 [--flavour llama-cpp-python]
    listening on http://127.0.0.1:8080/v1
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import re
import signal
import socket
import sys
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

if __package__:
    from .fake_model import answer_for
    from .fake_server_endpoints import endpoint_answer
else:  # run as a program (`python tests/support/fake_openai_server.py`): its neighbour by path
    _spec = importlib.util.spec_from_file_location(
        "fake_model", Path(__file__).with_name("fake_model.py")
    )
    assert _spec is not None and _spec.loader is not None
    _fake_model = importlib.util.module_from_spec(_spec)
    _spec.loader.exec_module(_fake_model)
    answer_for: Callable[[str, str], dict[str, object]] = _fake_model.answer_for
    _spec = importlib.util.spec_from_file_location(
        "fake_server_endpoints", Path(__file__).with_name("fake_server_endpoints.py")
    )
    assert _spec is not None and _spec.loader is not None
    _endpoints = importlib.util.module_from_spec(_spec)
    _spec.loader.exec_module(_endpoints)
    endpoint_answer: Callable[[Any, str, str, bytes], tuple[int, Any] | None] = (
        _endpoints.endpoint_answer
    )

# llama-cpp-python's endpoints that take its model's lock, as a chat completion does.
_READ_THE_MODEL = ("/v1/models", "/extras/tokenize", "/extras/tokenize/count")
# The usage the server reports: prompt characters / 4 and one token per answer character.
PROMPT_TOKENS_PER_CHAR = 4


@dataclass(frozen=True)
class Text:
    text: str


@dataclass(frozen=True)
class Whole:
    pass


@dataclass(frozen=True)
class Status:
    code: int
    retry_after: str | None = None
    body: str = ""
    headers: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class Raw:
    body: bytes
    content_type: str = "text/event-stream"
    status: int = 200
    reason: str | None = None  # the status line's phrase; None: the standard one


@dataclass(frozen=True)
class Cut:
    text: str


@dataclass(frozen=True)
class ToolCalls:
    calls: tuple[tuple[str, str], ...]
    whole: bool = False


Behaviour = str | Text | Whole | Status | Raw | Cut | ToolCalls


Flavour = str  # "openai" | "llama.cpp" | "llama-cpp-python" | "vllm" | "ollama" | "lmstudio"
# | "strict-plain"


@dataclass(frozen=True)
class SeenRequest:
    path: str
    headers: dict[str, str]  # lower-cased names
    body: bytes
    chunked: bool
    arrived: float  # time.monotonic()

    def json(self) -> Any:
        return json.loads(self.body)

    @property
    def prompt(self) -> str:
        users = [m for m in self.json()["messages"] if m["role"] == "user"]
        content: str = users[0]["content"]  # after the system message, before tool rounds
        return content

    @property
    def messages(self) -> list[Any]:
        found: list[Any] = self.json()["messages"]
        return found

    @property
    def response_format(self) -> Any:
        return self.json().get("response_format")


def _role_and_request(prompt: str) -> tuple[str, str]:
    role = re.search(r"You are the (\S+) role inside teams_runtime\.", prompt)
    record = prompt.split("Current request:\n", 1)[-1]
    request_id = re.search(r'"request_id": "([^"]*)"', record)
    return (role.group(1) if role else "", request_id.group(1) if request_id else "")


def _event(data: Any) -> bytes:
    return b"data: " + json.dumps(data).encode() + b"\n\n"


def _tool_call_events(calls: tuple[tuple[str, str], ...], *, whole: bool) -> list[bytes]:
    """The events of an answer that calls tools (``ToolCalls``)."""
    events = [_event({"choices": [{"index": 0, "delta": {"role": "assistant"}}]})]
    for index, (name, arguments) in enumerate(calls):
        call_id = f"call_{index}_{name}"
        if whole:
            call = {"id": call_id, "type": "function"}
            call["function"] = {"name": name, "arguments": arguments}  # type: ignore[assignment]
            deltas = [{"tool_calls": [call]}]
        else:
            first = {"index": index, "id": call_id, "type": "function"}
            first["function"] = {"name": name, "arguments": ""}  # type: ignore[assignment]
            deltas = [{"tool_calls": [first]}] + [
                {"tool_calls": [{"index": index, "function": {"arguments": piece}}]}
                for piece in _pieces(arguments, 3)
                if piece
            ]
        events += [_event({"choices": [{"index": 0, "delta": delta}]}) for delta in deltas]
    finish = {"index": 0, "delta": {}, "finish_reason": "tool_calls"}
    return [*events, _event({"choices": [finish]})]


def _pieces(text: str, count: int = 4) -> list[str]:
    size = max(len(text) // count, 1)
    return [text[i : i + size] for i in range(0, len(text), size)]


class FakeOpenAIServer:
    """The server; ``then(...)`` scripts the next answers, ``requests`` is what it received."""

    def __init__(
        self, flavour: Flavour = "openai", n_ctx_chars: int | None = None, *, port: int = 0
    ) -> None:
        """A server of ``flavour`` on 127.0.0.1: on ``port``, or a free one (``0``, the
        default: ``port`` says which). Serving once ``start`` is called."""
        self.flavour = flavour
        self.n_ctx_chars = n_ctx_chars  # a longer prompt does not fit the "model's" context
        self.loading = False
        self.limited: dict[str, Behaviour] = {}  # model -> every request for it gets this
        # Reported as usage.prompt_tokens_details.cached_tokens (at most the prompt's tokens)
        # when set: a server with a prompt cache.
        self.cached_tokens: int | None = None
        self.finish_reason: str | None = "stop"
        self.requests: list[SeenRequest] = []
        # Its own endpoints (fake_server_endpoints): what they say, and what they received.
        self.window_tokens = 4096
        self.slots = 1
        self.model_name = "fake-model"
        self.loaded = True
        self.num_ctx: int | None = None
        self.endpoint_behaviours: dict[str, Behaviour] = {}
        self.endpoint_requests: list[SeenRequest] = []
        self.hang_ups = 0  # stalled requests whose client closed the connection
        self.event_seconds = 0.0
        self.interrupt_requests = True  # llama-cpp-python's --interrupt_requests
        self.interrupted = 0
        self.running = 0
        self.most_running = 0
        self._waiting = 0  # llama-cpp-python: requests waiting for the model (its outer lock)
        self._model_lock = threading.Lock()  # llama-cpp-python: one answer at a time
        self._hung_up = threading.Event()
        self._script: deque[Behaviour] = deque()
        self._lock = threading.Lock()
        self.stopping = threading.Event()
        self._port = port
        self._listen()

    def _listen(self) -> None:
        self._server = ThreadingHTTPServer(("127.0.0.1", self._port), _handler_for(self))
        self._server.daemon_threads = True
        self._port = self._server.server_address[1]
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )

    @property
    def port(self) -> int:
        """The port it listens on (the one given, or the free one it found)."""
        return self._port

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._port}/v1"

    def start(self) -> FakeOpenAIServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self.stopping.set()  # stalled handlers return
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=10)

    def down(self) -> None:
        """Stop listening: every connection is refused until ``up``."""
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=10)

    def up(self) -> None:
        """Listen again, on the same port (a server restarted)."""
        self._listen()
        self._thread.start()

    def then(self, *behaviours: Behaviour) -> FakeOpenAIServer:
        with self._lock:
            self._script.extend(behaviours)
        return self

    def hung_up(self) -> None:
        with self._lock:
            self.hang_ups += 1
        self._hung_up.set()

    def wait_for_hang_up(self, timeout: float) -> bool:
        """Wait until a stalled request's client has closed its connection."""
        return self._hung_up.wait(timeout)

    def serving(self, *, chat: bool = True) -> _Serving:
        """One chat request answered (``chat``: counted in ``running``), or one of the
        endpoints that read the model; on llama-cpp-python, it waits for the model (one
        answer at a time), its waiting seen by the one that streams."""
        return _Serving(self, chat=chat)

    def cut_now(self) -> bool:
        """llama-cpp-python with ``interrupt_requests``: whether another request waits for the
        model, so the answer streaming now ends (counted in ``interrupted``)."""
        if self.flavour != "llama-cpp-python" or not self.interrupt_requests:
            return False
        with self._lock:
            if self._waiting:
                self.interrupted += 1
                return True
        return False

    def next_behaviour(self, seen: SeenRequest) -> Behaviour:
        with self._lock:
            self.requests.append(seen)
            if self.limited and (limited := self.limited.get(seen.json().get("model"))):
                return limited
            return self._script.popleft() if self._script else "answer"


class _Serving:
    """The context of one chat request's answer (``FakeOpenAIServer.serving``)."""

    def __init__(self, server: FakeOpenAIServer, *, chat: bool) -> None:
        self.server = server
        self.chat = chat
        self.one_at_a_time = server.flavour == "llama-cpp-python"

    def __enter__(self) -> None:
        server = self.server
        with server._lock:
            server.running += self.chat
            server.most_running = max(server.most_running, server.running)
        if self.one_at_a_time:
            with server._lock:
                server._waiting += 1
            server._model_lock.acquire()
            with server._lock:
                server._waiting -= 1

    def __exit__(self, *exc: object) -> None:
        server = self.server
        if self.one_at_a_time:
            server._model_lock.release()
        with server._lock:
            server.running -= self.chat


def _handler_for(server: FakeOpenAIServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            pass  # quiet: pytest would show it as noise

        def _read_body(self) -> tuple[bytes, bool]:
            if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
                body = bytearray()
                while True:
                    size = int(self.rfile.readline().split(b";")[0].strip(), 16)
                    if size == 0:
                        while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                            pass  # trailers
                        return bytes(body), True
                    body += self.rfile.read(size)
                    self.rfile.readline()  # the CRLF after the chunk
            return self.rfile.read(int(self.headers.get("Content-Length", 0))), False

        def _start_stream(self, content_type: str = "text/event-stream") -> None:
            self.send_response(200)
            self.send_header("Content-Type", content_type)
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()

        def _chunk(self, data: bytes) -> None:
            self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
            self.wfile.flush()

        def _end_stream(self) -> None:
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()

        def _answer_events(self, text: str, prompt: str) -> list[bytes]:
            first: dict[str, Any] = {"role": "assistant"}
            if server.flavour == "llama.cpp":
                first["content"] = None  # llama-server's first delta
            events = [_event({"choices": [{"index": 0, "delta": first}]})]
            for piece in _pieces(text):
                events.append(_event({"choices": [{"index": 0, "delta": {"content": piece}}]}))
            finish = {"index": 0, "delta": {}, "finish_reason": server.finish_reason}
            events.append(_event({"choices": [finish]}))
            usage = {
                "prompt_tokens": len(prompt) // PROMPT_TOKENS_PER_CHAR,
                "completion_tokens": len(text),
                "total_tokens": 0,
            }
            if server.cached_tokens is not None:
                cached = min(server.cached_tokens, usage["prompt_tokens"])
                usage["prompt_tokens_details"] = {"cached_tokens": cached}
            if server.flavour != "llama-cpp-python":  # it reports no usage in streams
                events.append(_event({"choices": [], "usage": usage}))
            return events

        def _send_json(self, code: int, data: Any) -> None:
            body = json.dumps(data).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def _as_the_flavour(self, seen: SeenRequest) -> bool:
            """Answer as the flavour's server does when it would not answer the prompt
            (loading, a response_format it does not take, a prompt past its context);
            whether it did."""
            form = seen.response_format
            kind = form.get("type") if isinstance(form, dict) else None
            if server.loading:
                error = {"code": 503, "message": "Loading model", "type": "unavailable_error"}
                self._send_json(503, {"error": error})
                return True
            if server.flavour == "llama-cpp-python" and kind not in (None, "text", "json_object"):
                message = (
                    "1 validation error for CreateChatCompletionRequest\nresponse_format.type\n"
                    "  Input should be 'text' or 'json_object'"
                )
                error = {"message": message, "type": "internal_server_error", "param": None,
                         "code": None}  # fmt: skip
                self._send_json(500, {"error": error})
                return True
            if server.flavour == "strict-plain" and form is not None:
                message = "Unrecognized request argument supplied: response_format"
                self._send_json(400, {"error": {"message": message, "type": "invalid_request"}})
                return True
            too_long = server.n_ctx_chars is not None and len(seen.prompt) > server.n_ctx_chars
            if too_long and server.flavour == "llama-cpp-python":
                self._start_stream()  # the model refuses the prompt once the stream started
                self._end_stream()
                return True
            if too_long:
                tokens, n_ctx = len(seen.prompt) // 4, server.n_ctx_chars // 4  # type: ignore[operator]
                error = {"code": 400, "type": "exceed_context_size_error",
                         "message": f"request ({tokens} tokens) exceeds the available context "
                                    f"size ({n_ctx} tokens), try increasing it",
                         "n_prompt_tokens": tokens, "n_ctx": n_ctx}  # fmt: skip
                self._send_json(400, {"error": error})
                return True
            return False

        def _stall(self) -> None:
            self.connection.settimeout(0.02)
            while not server.stopping.is_set():
                try:
                    if self.connection.recv(1) == b"":
                        server.hung_up()
                        break
                except TimeoutError:
                    continue
                except OSError:
                    server.hung_up()
                    break
            self.close_connection = True

        def _send_raw(self, code: int, data: bytes, content_type: str) -> None:
            self.send_response(code)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _endpoint(self, seen: SeenRequest) -> bool:
            """Answer one of the server's own endpoints (not a chat completion); whether it
            was one."""
            path = seen.path.split("?", 1)[0]
            behaviour = server.endpoint_behaviours.get(path)
            answer = endpoint_answer(server, self.command, path, seen.body)
            if behaviour is None and answer is None:
                return False
            with server._lock:
                server.endpoint_requests.append(seen)
            match behaviour:
                case "stall":
                    self._stall()
                case Status(code=code, body=text):
                    self._send_raw(code, text.encode(), "application/json")
                case Raw(body=data, content_type=content_type, status=code):
                    self._send_raw(code, data, content_type)
                case None if answer is not None and path in _READ_THE_MODEL:
                    with server.serving(chat=False):  # llama-cpp-python: its model's lock
                        self._send_json(*answer)
                case None if answer is not None:
                    self._send_json(*answer)
                case _:
                    raise AssertionError(f"no endpoint behaviour {behaviour!r}")
            return True

        def _seen(self) -> SeenRequest:
            body, chunked = self._read_body()
            return SeenRequest(
                path=self.path,
                headers={name.lower(): value for name, value in self.headers.items()},
                body=body,
                chunked=chunked,
                arrived=time.monotonic(),
            )

        def do_GET(self) -> None:
            if not self._endpoint(self._seen()):
                self._send_json(404, {"detail": "Not Found"})

        def do_POST(self) -> None:
            seen = self._seen()
            if self._endpoint(seen):
                return
            with server.serving():
                self._answer(seen)

        def _stream_answer(self, text: str, prompt: str) -> None:
            """The answer's events then [DONE]; on llama-cpp-python, cut after any event when
            another request waits (its [DONE] then, without a finish_reason)."""
            self._start_stream()
            events = self._answer_events(text, prompt)
            for number, event in enumerate(events, 1):
                self._chunk(event)
                if server.event_seconds:
                    time.sleep(server.event_seconds)
                if number < len(events) and server.cut_now():  # not once it is all sent
                    break
            self._chunk(b"data: [DONE]\n\n")
            self._end_stream()

        def _answer(self, seen: SeenRequest) -> None:
            behaviour = server.next_behaviour(seen)
            if behaviour == "answer" and self._as_the_flavour(seen):
                return
            prompt = seen.prompt
            role, request_id = _role_and_request(prompt)
            valid = json.dumps(answer_for(role, request_id))
            match behaviour:
                case "answer" | Text():
                    text = behaviour.text if isinstance(behaviour, Text) else valid
                    self._stream_answer(text, prompt)
                case "no_done":
                    self._start_stream()
                    for event in self._answer_events(valid, prompt)[:-2]:  # no finish, usage
                        self._chunk(event)
                    self._end_stream()
                case Whole():
                    usage = {"prompt_tokens": 7, "completion_tokens": 3}
                    message = {"role": "assistant", "content": valid}
                    choice = {"message": message, "finish_reason": server.finish_reason}
                    data = json.dumps({"choices": [choice], "usage": usage}).encode()
                    self.send_response(200)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                case Status(code=code, retry_after=retry_after, body=text, headers=more):
                    data = text.encode()
                    self.send_response(code)
                    if retry_after is not None:
                        self.send_header("Retry-After", retry_after)
                    for name, value in more:
                        self.send_header(name, value)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                case Raw(body=data, content_type=content_type, status=code, reason=reason):
                    self.send_response(code, reason)
                    self.send_header("Content-Type", content_type)
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                case ToolCalls(calls=calls, whole=whole):
                    self._start_stream()
                    for event in _tool_call_events(calls, whole=whole):
                        self._chunk(event)
                    self._chunk(b"data: [DONE]\n\n")
                    self._end_stream()
                case Cut(text=text):
                    self._start_stream()
                    for piece in _pieces(text):
                        self._chunk(
                            _event({"choices": [{"index": 0, "delta": {"content": piece}}]})
                        )
                    self.connection.shutdown(socket.SHUT_RDWR)
                    self.close_connection = True
                case "flood":
                    self._start_stream()
                    try:
                        while not server.stopping.is_set():
                            self._chunk(b"x" * 65536)
                    except OSError:  # the client hung up
                        server.hung_up()
                    self.close_connection = True
                case "stall":
                    self._stall()
                case "drop":
                    self._start_stream()
                    for event in self._answer_events(valid, prompt)[:2]:
                        self._chunk(event)
                    self.connection.shutdown(socket.SHUT_RDWR)
                    self.close_connection = True
                case "garbage":
                    self._start_stream("text/html")
                    self._chunk(b"\xff\xfe<html>502 upstream</html>\n")
                    self._end_stream()
                case "bad_event":
                    self._start_stream()
                    self._chunk(b"data: {not json\n\n")
                    self._end_stream()
                case "stream_error":
                    self._start_stream()
                    self._chunk(_event({"error": {"message": "model crashed", "code": 500}}))
                    self._end_stream()
                case _:
                    raise AssertionError(f"unknown behaviour {behaviour!r}")

    return Handler


def main(argv: list[str] | None = None) -> int:
    """Serve until SIGINT or SIGTERM (see the module's docstring)."""
    parser = argparse.ArgumentParser(description="A fake OpenAI-compatible server on loopback.")
    parser.add_argument("--port", type=int, default=0, help="the port (default: a free one)")
    parser.add_argument("--flavour", default="openai", help="openai, llama.cpp, ...")
    args = parser.parse_args(argv)
    stop = threading.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda *_: stop.set())
    server = FakeOpenAIServer(args.flavour, port=args.port).start()
    print(f"listening on {server.base_url}", flush=True)
    while not stop.wait(0.2):  # a short wait: the signal's handler runs between them
        pass
    server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
