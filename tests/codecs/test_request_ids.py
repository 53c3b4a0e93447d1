"""Request ids: any script's letters and digits, NFC, and nothing a path could escape with."""

from __future__ import annotations

import os
import re
import tempfile
import unicodedata
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from teams_runtime.codecs.request_ids import (
    MAX_REQUEST_ID_BYTES,
    check_request_id,
    notice_request_id,
)
from teams_runtime.exceptions import UnsafeRequestIdError
from teams_runtime.storage import Workspace
from teams_runtime.storage.files._writes import create_record

KOREAN = "요청-1"  # NFC: two precomposed Hangul syllables
KOREAN_NFD = unicodedata.normalize("NFD", KOREAN)  # the same id as six conjoining jamo


@pytest.mark.parametrize(
    "request_id",
    [
        pytest.param(KOREAN, id="hangul"),
        pytest.param("заявка_7", id="cyrillic"),
        pytest.param("طلب.3", id="arabic"),
        pytest.param("依頼:2026", id="cjk"),
        pytest.param("नमस्ते-1", id="devanagari-with-marks"),
        pytest.param("req-١٢٣", id="arabic-indic-digits"),
        pytest.param("Ünïcödé", id="latin-accents"),
    ],
)
def test_letters_and_digits_of_any_script_are_ids(request_id: str) -> None:
    assert check_request_id(request_id) == request_id


def test_nfd_input_becomes_the_nfc_id() -> None:
    assert KOREAN_NFD != KOREAN
    assert check_request_id(KOREAN_NFD) == KOREAN
    assert notice_request_id(KOREAN_NFD) == KOREAN


@pytest.mark.parametrize(
    "request_id",
    [
        pytest.param("a\u2044b", id="fraction-slash"),
        pytest.param("a\u2215b", id="division-slash"),
        pytest.param("a\u200bb", id="zero-width-space"),
        pytest.param("a\u202eb", id="right-to-left-override"),
        pytest.param("a\u0085b", id="next-line-control"),
        pytest.param("a\u3000b", id="ideographic-space"),
        pytest.param("a\ud800b", id="lone-surrogate"),
        pytest.param("½", id="vulgar-fraction"),
        pytest.param("a~b", id="tilde"),
        pytest.param("요청..1", id="dotdot-in-any-script"),
    ],
)
def test_what_is_not_a_letter_or_digit_is_refused(request_id: str) -> None:
    with pytest.raises(UnsafeRequestIdError, match=r"^request id .* is not a safe file name"):
        check_request_id(request_id)
    assert notice_request_id(request_id) == ""


def test_length_is_counted_in_bytes_of_the_nfc_form() -> None:
    assert check_request_id("x" * MAX_REQUEST_ID_BYTES) == "x" * MAX_REQUEST_ID_BYTES
    assert check_request_id("요" * 66) == "요" * 66  # 198 bytes
    with pytest.raises(
        UnsafeRequestIdError, match=r"^request id is 201 bytes long in UTF-8; at most 200"
    ):
        check_request_id("요" * 67)
    # 66 syllables typed in NFD are 198 jamo (594 bytes) but the id is their NFC form.
    assert check_request_id(unicodedata.normalize("NFD", "요" * 66)) == "요" * 66


@pytest.mark.parametrize(
    "request_id",
    [
        pytest.param("x" * 200, id="ascii-200"),
        pytest.param("요" * 66, id="hangul-66"),
        pytest.param("\U00020000" * 50, id="cjk-ext-b-50-four-byte"),
        pytest.param("न" * 65 + "\u094d", id="devanagari-with-a-mark-198-bytes"),
    ],
)
def test_the_longest_ids_name_real_files(tmp_path: Path, request_id: str) -> None:
    paths = Workspace(tmp_path).record_paths(request_id)
    assert create_record(paths, {"request_id": request_id, "events": []}) is not None
    assert paths.record.is_file() and paths.lock.exists()
    paths.index.parent.mkdir(parents=True, exist_ok=True)
    paths.index.write_bytes(b"")
    Workspace(tmp_path).attempts_folder(request_id).mkdir(parents=True)


_ID_LETTERS = st.characters(categories=["Lu", "Ll", "Lo", "Nd"]) | st.sampled_from("-_.:")


@settings(max_examples=400)
@given(st.text(max_size=80))
def test_any_accepted_id_is_nfc_bounded_and_cannot_leave_the_folder(value: str) -> None:
    try:
        request_id = check_request_id(value)
    except UnsafeRequestIdError:
        return
    assert unicodedata.is_normalized("NFC", request_id)
    assert len(request_id.encode("utf-8")) <= MAX_REQUEST_ID_BYTES
    assert "/" not in request_id and "\\" not in request_id and ".." not in request_id
    assert request_id not in {".", ""}
    assert all(unicodedata.category(char)[0] not in "CZ" for char in request_id)
    assert check_request_id(request_id) == request_id  # idempotent


@settings(max_examples=300)
@given(st.text(_ID_LETTERS, min_size=1, max_size=60))
def test_nfc_and_nfd_spellings_are_one_id(value: str) -> None:
    try:
        request_id = check_request_id(value)
    except UnsafeRequestIdError as exc:
        # Only these refuse these letters: the spec's `..`, `.` and length bound, and a
        # combining mark first.
        assert (
            ".." in value
            or value == "."
            or unicodedata.category(unicodedata.normalize("NFC", value)[0]) in ("Mn", "Mc")
            or re.search("bytes long", str(exc))
        )
        return
    for form in ("NFC", "NFD", "NFKC"):
        spelled = unicodedata.normalize(form, value)
        if unicodedata.normalize("NFC", spelled) == request_id:
            assert check_request_id(spelled) == request_id


@settings(max_examples=60, deadline=None)
@given(st.text(st.characters(categories=["Lo", "Ll", "Mn", "Nd"]), min_size=1, max_size=200))
def test_an_accepted_id_names_real_files_in_any_script(value: str) -> None:
    # The byte bound is chosen so the longest file made from an id fits a file-name limit.
    try:
        request_id = check_request_id(value)
    except UnsafeRequestIdError:
        return
    with tempfile.TemporaryDirectory() as folder:
        workspace = Workspace(folder)
        paths = workspace.record_paths(value)
        assert create_record(paths, {"request_id": request_id, "events": []}) is not None
        assert sorted(os.listdir(workspace.requests_dir)) == [
            f"{request_id}.json",
            f"{request_id}.json.lock",  # the longest name made from an id
        ]
        Path(workspace.attempts_folder(value)).mkdir(parents=True)


@pytest.mark.parametrize(
    "request_id",
    [
        pytest.param("\u0301abc", id="combining-mark-with-nothing-to-sit-on"),
        pytest.param("\u093fabc", id="devanagari-vowel-sign-first"),
    ],
)
def test_a_combining_mark_never_comes_first(request_id: str) -> None:
    with pytest.raises(UnsafeRequestIdError, match=r"^request id .* no combining mark first"):
        check_request_id(request_id)
    assert notice_request_id(request_id) == ""


@pytest.mark.parametrize("request_id", ["-rf", ".hidden", "_draft", ":x", "x."])
def test_the_spec_punctuation_may_come_first_or_last(request_id: str) -> None:
    assert check_request_id(request_id) == request_id  # spec section 2: `-`, `_`, `.`, `:`


@pytest.mark.parametrize(
    "request_id",
    [
        pytest.param("e\u0301x", id="a-mark-after-a-letter"),
        pytest.param("\u0915\u093f-1", id="devanagari-letter-then-vowel-sign"),
        pytest.param("7-a", id="a-digit-first"),
        pytest.param("\u0663-a", id="an-arabic-indic-digit-first"),
    ],
)
def test_marks_and_punctuation_after_the_first_character_are_fine(request_id: str) -> None:
    assert check_request_id(request_id) == unicodedata.normalize("NFC", request_id)
