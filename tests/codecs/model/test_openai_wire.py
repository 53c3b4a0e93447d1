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

from teams_runtime.codecs.model._openai_wire import (
    REQUEST_TAIL,
    EventStreamDecoder,
    EventTooLong,
    decode_chunk,
    event_line_limit,
    json_string_fragment,
    request_head,
    retry_after_seconds,
)
from teams_runtime.codecs.model._replies import TokenUsage


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
    b"\xef\xbb\xbf"  # a byte order mark: ignored, once, at the very start
    b": keep-alive comment\r\n\r\n"
    b'data: {"choices": [{"delta": {"content": "Hel"}}]}\r\n\r\n'
    b"event: ignored\n"
    b'data: {"choices": [{"delta": {"content": "lo"},\r'  # a bare CR ends a line too
    b'data:  "finish_reason": "stop"}]}\r\r'
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
    assert [chunk.finish_reason() for chunk in chunks] == [None, "stop", None]
    assert chunks[2].token_usage() == TokenUsage(prompt_tokens=12, completion_tokens=2)
    assert chunks[0].token_usage() is None


@pytest.mark.parametrize(
    "data",
    [
        pytest.param(b"{not json", id="not-json"),
        pytest.param(b"[1, 2]", id="not-an-object"),
        pytest.param(b'{"choices": [{"delta": {"content": 5}}]}', id="content-not-text"),
    ],
)
def test_a_chunk_of_the_wrong_shape_is_refused(data: bytes) -> None:
    with pytest.raises(msgspec.DecodeError):
        decode_chunk(data)


def test_an_error_in_the_stream_is_seen_and_null_is_none() -> None:
    assert decode_chunk(b'{"error": {"message": "boom"}}').error_text() == '{"message": "boom"}'
    assert decode_chunk(b'{"error": null, "choices": []}').error_text() is None
    assert decode_chunk(b"{}").error_text() is None


def test_a_byte_order_mark_counts_only_at_the_start() -> None:
    decoder = EventStreamDecoder()
    events = decoder.feed(b"\xef\xbb") + decoder.feed(b"\xbfdata: 1\n\n")  # split: still one
    events += decoder.feed(b"\xef\xbb\xbfdata: 2\n\ndata: 3\n\n")  # later: a field "\ufeffdata"
    assert events == [b"1", b"3"]


@pytest.mark.parametrize(
    "stream",
    [
        pytest.param(b"data: " + b"x" * 95, id="one-line"),
        pytest.param((b"data: " + b"x" * 40 + b"\n") * 3, id="lines-of-one-event"),
        pytest.param(b": " + b"x" * 100, id="comment"),
    ],
)
@pytest.mark.parametrize("step", [1, 7, 1000])
def test_a_line_or_event_longer_than_the_limit_is_refused_as_it_comes(
    stream: bytes, step: int
) -> None:
    decoder = EventStreamDecoder(max_line_bytes=90)
    with pytest.raises(EventTooLong):
        for start in range(0, len(stream), step):
            decoder.feed(stream[start : start + step])
    # Short events one after another, however many, are fine.
    decoder = EventStreamDecoder(max_line_bytes=90)
    event = b"data: " + b"x" * 80 + b"\r\n\r\n"
    assert [data for _ in range(1000) for data in decoder.feed(event)] == [b"x" * 80] * 1000


def test_the_line_limit_leaves_room_for_an_escaped_answer() -> None:
    text = "\x01" * 100_000  # the answer with the longest escapes JSON has
    line = b"data: " + msgspec.json.encode({"choices": [{"delta": {"content": text}}]})
    assert len(line) <= event_line_limit(100_000)


@pytest.mark.parametrize(
    ("data", "usage"),
    [
        pytest.param(
            b'{"usage": {"prompt_tokens": 10.0, "completion_tokens": 2}}', (10, 2), id="10.0"
        ),
        pytest.param(
            b'{"usage": {"prompt_tokens": -1, "completion_tokens": 2}}', None, id="negative"
        ),
        pytest.param(
            b'{"usage": {"prompt_tokens": "10", "completion_tokens": 2}}', None, id="text"
        ),
        pytest.param(
            b'{"usage": {"prompt_tokens": 1e300, "completion_tokens": 2}}', None, id="huge"
        ),
        pytest.param(
            b'{"usage": {"prompt_tokens": false, "completion_tokens": 2}}', None, id="bool"
        ),
        pytest.param(b'{"usage": {"prompt_tokens": 3}}', None, id="half"),
        pytest.param(b'{"usage": [3, 4]}', None, id="a-list"),
        pytest.param(b'{"usage": null, "choices": null}', None, id="nulls"),
    ],
)
def test_usage_that_cannot_be_used_is_none_and_the_chunk_still_read(
    data: bytes, usage: tuple[int, int] | None
) -> None:
    chunk = decode_chunk(data)
    assert chunk.text() == "" and chunk.finish_reason() is None
    expected = (
        None if usage is None else TokenUsage(prompt_tokens=usage[0], completion_tokens=usage[1])
    )
    assert chunk.token_usage() == expected


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
        pytest.param("\u00b2", None, id="superscript-two"),
        pytest.param("\u0661\u0662", None, id="arabic-indic-digits"),
        pytest.param("99999999999999999999999999", 1e26, id="huge"),
        pytest.param(None, None, id="absent"),
    ],
)
def test_retry_after(value: str | None, seconds: float | None) -> None:
    assert retry_after_seconds(value, NOW) == seconds
