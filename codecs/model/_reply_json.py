"""Reading a model's reply text as the one JSON value it holds: tolerant of what local models
add around it, never of the value itself.

An answer is read, in this order:

1. the whole text (stripped) as JSON: ``as_is``, whatever value it is (the contract then says
   whether it is an object);
2. else the one JSON object it holds, bare or in a ``` / ```json fence, with text around it:
   ``extracted``. None, or more than one, is no answer (``found`` 0 or 2+);
3. an object that is valid JSON but for raw control characters (a line break, a tab) inside its
   strings, as a small model held to a schema writes, is read with them escaped: ``repaired``
   (``extracted_repaired`` when it was also found inside text).

How it was read (``how``) is content-free and goes into the prompt record and the attempt file.
The value is decoded with the contract's own decoder (msgspec: no ``NaN``, no ``Infinity``),
Python's ``json`` only finds where an object ends.
"""

from __future__ import annotations

import json
import re
from typing import Any, Literal

import msgspec

__all__ = ["MAX_TRIED_STARTS", "ReplyRead", "ReplyReading", "read_reply"]

ReplyRead = Literal["as_is", "extracted", "repaired", "extracted_repaired"]

# How many `{` that start no JSON object are tried before the search gives up: prose full of
# braces must not cost a decode attempt per brace of a 1 MiB answer.
MAX_TRIED_STARTS = 64

_DECODER = msgspec.json.Decoder()
_FINDER = json.JSONDecoder(strict=False)  # strict=False: raw control characters in strings
_CONTROL = re.compile(r"[\x00-\x1f]")
_ESCAPES = {"\n": "\\n", "\r": "\\r", "\t": "\\t", "\b": "\\b", "\f": "\\f"}


class ReplyReading(msgspec.Struct, frozen=True, kw_only=True):
    """What an reply text holds: ``value`` when ``how`` is set; else ``found`` says how many
    objects it held (0: none could be read; 2 or more: several), and ``too_deep`` that JSON
    was nested past what can be decoded."""

    value: Any = None
    how: ReplyRead | None = None
    found: int = 0
    too_deep: bool = False


def _escape_controls(span: str) -> str:
    """``span`` (one JSON text whose strings may hold raw control characters) with those
    characters escaped inside its strings; whitespace between tokens is kept as it is."""
    out: list[str] = []
    in_string = escaped = False
    start = 0
    for index, char in enumerate(span):
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
            elif char < " ":
                out.append(span[start:index])
                out.append(_ESCAPES.get(char, f"\\u{ord(char):04x}"))
                start = index + 1
        elif char == '"':
            in_string = True
    out.append(span[start:])
    return "".join(out)


def _decode(text: str) -> tuple[Any, bool]:
    """``text`` decoded by the contract's decoder, repaired if only raw control characters in
    its strings stood in the way; and whether it was. Raises ``msgspec.DecodeError``."""
    try:
        return _DECODER.decode(text.encode()), False
    except msgspec.DecodeError:
        if not _CONTROL.search(text):
            raise
    return _DECODER.decode(_escape_controls(text).encode()), True


def _objects(text: str) -> list[tuple[Any, bool]]:
    """Every top-level JSON object in ``text`` (the ones inside another are part of it), each
    decoded, with whether it needed repair."""
    found: list[tuple[Any, bool]] = []
    position, failed = 0, 0
    while failed < MAX_TRIED_STARTS:
        start = text.find("{", position)
        if start < 0:
            break
        try:
            _, end = _FINDER.raw_decode(text, start)
            value, repaired = _decode(text[start:end])
        except (ValueError, msgspec.DecodeError):  # json.JSONDecodeError is a ValueError
            failed += 1
            position = start + 1
            continue
        if isinstance(value, dict):
            found.append((value, repaired))
        position = end
    return found


def read_reply(text: str) -> ReplyReading:
    """Read ``text`` as the JSON value it holds (see the module's doc for how)."""
    stripped = text.strip()
    try:
        value, repaired = _decode(stripped)
    except msgspec.DecodeError:
        pass
    except RecursionError:
        return ReplyReading(too_deep=True)
    else:
        return ReplyReading(value=value, how="repaired" if repaired else "as_is", found=1)
    try:
        objects = _objects(stripped)
    except RecursionError:
        return ReplyReading(too_deep=True)
    if len(objects) != 1:
        return ReplyReading(found=len(objects))
    value, repaired = objects[0]
    return ReplyReading(value=value, how="extracted_repaired" if repaired else "extracted", found=1)
