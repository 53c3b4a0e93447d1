"""The chat-completions wire: the streamed request body, server-sent events split at any byte,
chunks reduced to text, finish and usage, and Retry-After."""

from __future__ import annotations

import itertools
import json
from datetime import UTC, datetime

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from teams_runtime.codecs.model_replies import TokenUsage
from teams_runtime.codecs.openai_wire import (
    REQUEST_TAIL,
    EventStreamDecoder,
    decode_chunk,
    json_string_fragment,
    request_head,
    retry_after_seconds,
)


@given(st.lists(st.text(), max_size=8))
def test_the_body_streamed_in_fragments_is_the_request_json(chunks: list[str]) -> None:
    body = request_head('m "q"') + b"".join(map(json_string_fragment, chunks)) + REQUEST_TAIL
    assert json.loads(body) == {
        "model": 'm "q"',
        "stream": True,
        "stream_options": {"include_usage": True},
        "messages": [{"role": "user", "content": "".join(chunks)}],
    }


STREAM = (
    b": keep-alive comment\r\n\r\n"
    b'data: {"choices": [{"delta": {"content": "Hel"}}]}\r\n\r\n'
    b"event: ignored\n"
    b'data: {"choices": [{"delta": {"content": "lo"},\n'
    b'data:  "finish_reason": "stop"}]}\n\n'
    b'data: {"choices": [], "usage": {"prompt_tokens": 12, "completion_tokens": 2}}\n\n'
    b"data: [DONE]"  # the last blank line missing: close() still gives it
)


@given(st.lists(st.integers(0, len(STREAM)), max_size=6))
def test_events_are_the_same_however_the_bytes_are_split(cuts: list[int]) -> None:
    decoder = EventStreamDecoder()
    events: list[bytes] = []
    edges = [0, *sorted(cuts), len(STREAM)]
    for start, end in itertools.pairwise(edges):
        events += decoder.feed(STREAM[start:end])
    events += decoder.close()
    assert events[-1] == b"[DONE]" and len(events) == 4
    chunks = [decode_chunk(data) for data in events[:-1]]
    assert "".join(chunk.text() for chunk in chunks) == "Hello"
    assert [chunk.finished() for chunk in chunks] == [False, True, False]
    assert chunks[2].token_usage() == TokenUsage(prompt_tokens=12, completion_tokens=2)
    assert chunks[0].token_usage() is None


@pytest.mark.parametrize(
    "data",
    [
        pytest.param(b"{not json", id="not-json"),
        pytest.param(b"[1, 2]", id="not-an-object"),
        pytest.param(b'{"choices": [{"delta": {"content": 5}}]}', id="content-not-text"),
        pytest.param(b'{"usage": {"prompt_tokens": -1, "completion_tokens": 1}}', id="negative"),
    ],
)
def test_a_chunk_of_the_wrong_shape_is_refused(data: bytes) -> None:
    with pytest.raises(msgspec.DecodeError):
        decode_chunk(data)


def test_an_error_in_the_stream_is_seen_and_null_is_none() -> None:
    assert decode_chunk(b'{"error": {"message": "boom"}}').error_text() == '{"message": "boom"}'
    assert decode_chunk(b'{"error": null, "choices": []}').error_text() is None
    assert decode_chunk(b"{}").error_text() is None


NOW = datetime(2026, 11, 30, 12, 0, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("value", "seconds"),
    [
        pytest.param("7", 7.0, id="seconds"),
        pytest.param(" 0 ", 0.0, id="zero"),
        pytest.param("Mon, 30 Nov 2026 12:00:30 GMT", 30.0, id="http-date"),
        pytest.param("Mon, 30 Nov 2026 11:00:00 GMT", 0.0, id="date-past"),
        pytest.param("soon", None, id="garbage"),
        pytest.param("-3", None, id="negative"),
        pytest.param(None, None, id="absent"),
    ],
)
def test_retry_after(value: str | None, seconds: float | None) -> None:
    assert retry_after_seconds(value, NOW) == seconds
