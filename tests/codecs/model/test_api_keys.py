"""The key taken out of server text: as it is and JSON-escaped, across a cut, at the end of a
text cut short; and which keys a header can carry."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor

import pytest
from hypothesis import given
from hypothesis import strategies as st

from teams_runtime.codecs.model._api_keys import (
    SCRUBBED,
    TAIL_PREFIX_CHARS,
    KeyScrubber,
    header_safe,
)

KEY = "sk-proj/Zq9+x_7f3c9a1e5b-Q"


def _escaped(key: str, which: range | list[int], *, upper: bool = False, times: int = 1) -> str:
    """``key`` inside a JSON string: the characters at ``which`` as \\uXXXX (``upper``: with
    upper-case hex), ``/`` as \\/; ``times`` > 1: that text quoted in a JSON string again."""
    quoted = "".join(
        (f"\\u{ord(char):04X}" if upper else f"\\u{ord(char):04x}")
        if index in which
        else char.replace("/", "\\/")
        for index, char in enumerate(key)
    )
    for _ in range(times - 1):
        quoted = json.dumps(quoted)[1:-1]
    return quoted


@pytest.mark.parametrize(
    ("key", "safe"),
    [
        pytest.param(KEY, True, id="key"),
        pytest.param("sk-abc def", False, id="space"),
        pytest.param("sk-abc\n", False, id="line-break"),
        pytest.param("sk-abc\t", False, id="tab"),
        pytest.param("sk-ключ", False, id="non-ascii"),
        pytest.param("sk-\x7f", False, id="delete"),
    ],
)
def test_only_visible_ascii_keys_can_go_in_a_header(key: str, safe: bool) -> None:
    assert header_safe(key) is safe


@pytest.mark.parametrize(
    "quoted",
    [
        pytest.param(KEY, id="raw"),
        pytest.param(_escaped(KEY, []), id="slash-escaped"),
        pytest.param(_escaped(KEY, range(len(KEY))), id="all-unicode-escaped"),
        pytest.param(_escaped(KEY, [0, 5, 8], upper=True), id="upper-hex"),
        pytest.param(_escaped(KEY, [3, 4], times=2), id="escaped-twice"),
        pytest.param(_escaped(KEY, [1], times=3), id="escaped-three-times"),
    ],
)
def test_the_key_is_replaced_as_it_is_and_json_escaped(quoted: str) -> None:
    text = f'{{"error": "bad key {quoted}", "again": "{quoted}"}}'
    assert (
        KeyScrubber(KEY).scrub(text) == f'{{"error": "bad key {SCRUBBED}", "again": "{SCRUBBED}"}}'
    )


def test_other_keys_and_pieces_of_the_key_are_left_alone() -> None:
    text = f"sk-proj/other {KEY[:-1]}! {KEY[1:]}"
    assert KeyScrubber(KEY).scrub(text) == text
    assert KeyScrubber("").scrub(text) == text


@pytest.mark.parametrize("inside", range(1, len(KEY)))
def test_a_cut_never_splits_the_key(inside: int) -> None:
    pad = "p" * 100
    text = pad + KEY + " and more"
    assert KeyScrubber(KEY).scrub(text, limit=len(pad) + inside) == pad + SCRUBBED
    assert KeyScrubber(KEY).scrub(text, limit=len(pad)) == pad
    assert KeyScrubber("").scrub(text, limit=len(pad) + inside) == text[: len(pad) + inside]


@pytest.mark.parametrize(
    "quoted",
    [pytest.param(KEY, id="raw"), pytest.param(_escaped(KEY, range(0, len(KEY), 2)), id="escaped")],
)
def test_a_text_cut_short_inside_the_key_keeps_none_of_it(quoted: str) -> None:
    for end in range(1, len(quoted)):
        head = quoted[:end]
        scrubbed = KeyScrubber(KEY).scrub("the key: " + head, more=True)
        if _whole_chars(head) >= TAIL_PREFIX_CHARS:
            assert scrubbed == "the key: " + SCRUBBED, head
        else:  # a few characters, as many texts end: kept
            assert scrubbed == "the key: " + head, head
        assert KeyScrubber(KEY).scrub("the key: " + head) == "the key: " + head  # not cut short


def _whole_chars(head: str) -> int:
    """How many characters of the key ``head`` (a start of a quoted key) holds whole."""
    count, position = 0, 0
    while position < len(head):
        if head.startswith("\\u", position):
            if position + 6 > len(head):
                break
            position += 6
        elif head.startswith("\\/", position):
            position += 2
        elif head[position] == "\\":
            break
        else:
            position += 1
        count += 1
    return count


_ALPHABET = st.characters(min_codepoint=0x21, max_codepoint=0x7E)


@given(
    key=st.text(_ALPHABET, min_size=8, max_size=40),
    before=st.text(max_size=30),
    after=st.text(max_size=30),
    data=st.data(),
)
def test_any_key_quoted_in_any_json_form_is_gone(
    key: str, before: str, after: str, data: st.DataObject
) -> None:
    which = data.draw(st.lists(st.integers(0, len(key) - 1), max_size=len(key)))
    twice = data.draw(st.booleans())
    once = "".join(
        f"\\u{ord(char):04x}" if index in which else json.dumps(char)[1:-1]
        for index, char in enumerate(key)
    )
    quoted = json.dumps(once)[1:-1] if twice else once
    scrubbed = KeyScrubber(key).scrub(before + quoted + after)
    assert quoted not in scrubbed and SCRUBBED in scrubbed
    cut = data.draw(st.integers(0, len(before) + len(quoted) + len(after)))
    head = KeyScrubber(key).scrub(before + quoted + after, limit=cut)
    assert quoted not in head
    if cut > len(before):  # the cut falls in or after the key: it is kept whole, replaced
        assert SCRUBBED in head


def test_a_long_run_of_backslashes_is_scrubbed_in_one_pass() -> None:
    # Any answer may hold one (a model writing Windows paths or regexes). With backslashes
    # unbounded before each escape the pattern took minutes on this; bounded it is one pass.
    # The deadline is a hang guard a hundred times what the pass takes, not a measurement.
    text = "\\" * 1_048_576 + KEY
    with ThreadPoolExecutor(1) as pool:
        done = pool.submit(KeyScrubber(KEY).scrub, text, more=True)
        assert done.result(timeout=60) == "\\" * 1_048_576 + SCRUBBED
