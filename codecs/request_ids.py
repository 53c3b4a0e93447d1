"""Request ids: which ids are safe (spec section 2) and the path a notice names for one."""

from __future__ import annotations

import re
import unicodedata
from typing import Protocol, TypeVar

import msgspec

from teams_runtime.exceptions import UnsafeRequestIdError

__all__ = [
    "MAX_REQUEST_ID_BYTES",
    "REQUESTS_FOLDER",
    "canonical_request_ref",
    "check_request_id",
    "notice_request_id",
    "with_checked_request_id",
]

# At most 200 bytes of UTF-8 once NFC-normalised: an ASCII id may have 200 characters (the
# spec's bound), and the longest file made from an id (`<id>.json.lock`, 210 bytes) stays under
# the 255-byte name limit of common file systems whatever the script (a Hangul syllable is 3
# bytes, so 66 of them).
MAX_REQUEST_ID_BYTES = 200
# Where records live inside a workspace: a notice names it, the file store lays files out by it.
REQUESTS_FOLDER = ".teams_runtime/requests"
# The common case, checked fast (asks check the id on every call): ASCII is its own NFC form.
# fullmatch, not match + `$`: `$` also matches before a trailing newline.
_ASCII_ID = re.compile(r"[A-Za-z0-9._:-]+")
_PUNCTUATION = frozenset("-_.:")
# Letters (L*) and decimal digits (Nd) of any script, as the spec says; combining marks (Mn,
# Mc) too, as many scripts (Devanagari, Thai, ...) cannot write a word without them even after
# NFC, but never first: a mark there has nothing to sit on.
_LETTERS_AND_DIGITS = frozenset({"Lu", "Ll", "Lt", "Lm", "Lo", "Nd"})
_MARKS = frozenset({"Mn", "Mc"})
_ID_CATEGORIES = _LETTERS_AND_DIGITS | _MARKS


def _is_id_character(char: str) -> bool:
    return char in _PUNCTUATION or unicodedata.category(char) in _ID_CATEGORIES


def _is_id(normal: str) -> bool:
    return unicodedata.category(normal[0]) not in _MARKS and all(map(_is_id_character, normal))


def check_request_id(value: object) -> str:
    """Return the NFC form of ``value`` if it is a safe request id, else raise
    ``UnsafeRequestIdError``.

    Safe: letters and digits of any script, ``-``, ``_``, ``.``, ``:`` (a combining mark
    only after another character); never ``..`` (spec section 2); at most 200 bytes of UTF-8
    (the spec's 200 characters, counted in bytes: ``<id>.json.lock`` must fit a file name).
    Use the returned form: it is the one files are named by, so ids typed in NFC or NFD reach
    the same record.
    """
    if not isinstance(value, str) or not value:
        raise UnsafeRequestIdError("request id must be a non-empty string.")
    if value.isascii():
        normal, size = value, len(value)
        allowed = _ASCII_ID.fullmatch(value) is not None
    else:
        normal = unicodedata.normalize("NFC", value)
        size = len(normal.encode("utf-8", "surrogatepass"))  # a lone surrogate is refused below
        allowed = _is_id(normal)
    if size > MAX_REQUEST_ID_BYTES:
        raise UnsafeRequestIdError(
            f"request id is {size} bytes long in UTF-8; at most {MAX_REQUEST_ID_BYTES} allowed "
            "(200 ASCII characters, fewer in other scripts)."
        )
    if not allowed or ".." in normal or normal == ".":
        raise UnsafeRequestIdError(
            f"request id {value!r} is not a safe file name; use only letters and digits (of "
            "any script), '-', '_', '.' and ':' (no '/', no '..', no spaces or control "
            "characters, no combining mark first)."
        )
    return normal


class _NamesARequest(Protocol):
    @property
    def request_id(self) -> str: ...


_Message = TypeVar("_Message", bound=_NamesARequest)


def with_checked_request_id(message: _Message) -> _Message:
    """``message`` (a struct with a ``request_id``) with its id checked and in NFC: the same
    struct when it already was, so one NFC key names each record in files, subjects and
    caches. Raises ``UnsafeRequestIdError``."""
    request_id = check_request_id(message.request_id)
    if request_id == message.request_id:
        return message
    return msgspec.structs.replace(message, request_id=request_id)  # type: ignore[type-var]


def notice_request_id(value: object) -> str:
    """The request id a notice may name: a safe id (NFC), else ``""`` (no path outside the
    store)."""
    try:
        return check_request_id(value)
    except UnsafeRequestIdError:
        return ""


def canonical_request_ref(request_id: str) -> str:
    """The workspace-relative path a notice gives for the full record (spec section 5)."""
    return f"./{REQUESTS_FOLDER}/{request_id}.json" if request_id else ""
