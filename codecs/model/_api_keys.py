"""A model server's API key in the text that server sends back.

Servers quote what they were sent: an error body that names the key it refused, a proxy's
HTML page, an answer that repeats the prompt's headers. Everything the ``openai`` backend keeps
of a server's text (the answer, what came before a failure, error bodies) goes through
``KeyScrubber`` first, which replaces the key wherever it is quoted: as it is, or JSON-escaped
(any of its characters as ``\\uXXXX`` in either case of hex, ``/`` as ``\\/``, escaped once
or again by a JSON text quoted inside another).
"""

from __future__ import annotations

import re

__all__ = ["SCRUBBED", "TAIL_PREFIX_CHARS", "KeyScrubber", "header_safe"]

SCRUBBED = "[api key]"
# A text cut short that ends with at least this many of the key's first characters has that
# tail replaced too: the rest of the key was in what was not kept.
TAIL_PREFIX_CHARS = 4

_HEADER_SAFE = re.compile(r"[\x21-\x7e]+")
# The escapes JSON has for a character besides \uXXXX.
_SHORT_ESCAPES = {
    '"': '"',
    "\\": "\\",
    "/": "/",
    "\b": "b",
    "\f": "f",
    "\n": "n",
    "\r": "r",
    "\t": "t",
}
# The backslashes before an escape: 1 for JSON, 2 or 3 when that JSON is quoted in JSON again,
# up to 15 when it is quoted four times. Bounded, so a long run of backslashes costs a scan, not
# a scan per backslash.
_BACKSLASHES = r"\\{1,15}"
# What an escape cut short looks like: backslashes, perhaps a `u` and up to three hex digits.
_PARTIAL_ESCAPE = re.compile(_BACKSLASHES + r"(?:u[0-9a-fA-F]{0,3})?")


def header_safe(key: str) -> bool:
    """Whether ``key`` can be sent in a header as it is: visible ASCII only, no space, no line
    break (no API key has other characters; a key that does was pasted with something else)."""
    return _HEADER_SAFE.fullmatch(key) is not None


def _hex(code: int) -> str:
    """A pattern for the 4 hex digits of ``code``, in either case."""
    return "".join(f"[{d}{d.upper()}]" if d.isalpha() else d for d in f"{code:04x}")


def _char_pattern(char: str) -> str:
    """A pattern for ``char`` as it is or JSON-escaped, once or more (each escaping of a
    backslash doubles it: 1 to 15 backslashes stand for an escape)."""
    code = ord(char)
    if code > 0xFFFF:  # a surrogate pair
        high, low = 0xD800 + ((code - 0x10000) >> 10), 0xDC00 + ((code - 0x10000) & 0x3FF)
        unicode = f"{_BACKSLASHES}u{_hex(high)}{_BACKSLASHES}u{_hex(low)}"
    else:
        unicode = f"{_BACKSLASHES}u{_hex(code)}"
    forms = [re.escape(char), unicode]
    if char in _SHORT_ESCAPES:
        forms.append(_BACKSLASHES + re.escape(_SHORT_ESCAPES[char]))
    return "(?:" + "|".join(forms) + ")"


class KeyScrubber:
    """Take one key out of server text; ``KeyScrubber("")`` (no key) changes nothing."""

    def __init__(self, key: str) -> None:
        self._chars = [_char_pattern(char) for char in key]
        self._key = re.compile("".join(self._chars)) if key else None
        self._char_res: list[re.Pattern[str]] = []  # compiled when a tail is first checked
        # How far back from the end of a cut text a start of the key is looked for: the longest
        # its quote can be (15 backslashes, u and 4 hex digits a character; two for a pair).
        self._window = sum(40 if ord(char) > 0xFFFF else 20 for char in key) + 20

    def scrub(self, text: str, *, limit: int | None = None, more: bool = False) -> str:
        """``text`` with the key replaced by ``[api key]`` wherever it is quoted.

        ``limit``: keep about the first ``limit`` characters, cut where no quote of the key is
        split (one that begins before the cut is kept whole, and so replaced). ``more``:
        ``text`` is only the beginning of what the server sent (the rest was not read, or never
        came), so a tail that reads as the key's first characters is replaced as well.
        """
        key = self._key
        if limit is not None and len(text) > limit:
            cut = limit
            for found in key.finditer(text) if key is not None else ():
                if found.start() >= limit:
                    break
                if found.end() > limit:
                    cut = found.end()
                    break
            text = text[:cut]
        if key is None:
            return text
        text = key.sub(SCRUBBED, text)
        if more:
            start = self._tail_start(text)
            if start is not None:
                text = text[:start] + SCRUBBED
        return text

    def _tail_start(self, text: str) -> int | None:
        """Where the tail of ``text`` that reads as the key's first characters (at least
        ``TAIL_PREFIX_CHARS`` of them, an escape cut short included) begins; ``None``."""
        if not self._char_res:
            self._char_res = [re.compile(pattern) for pattern in self._chars]
        chars = self._char_res
        needed = min(TAIL_PREFIX_CHARS, len(chars))
        end = len(text)
        for start in range(max(0, end - self._window), end):
            position, count = start, 0
            while count < len(chars) and position < end:
                found = chars[count].match(text, position)
                if found is None:
                    break
                position, count = found.end(), count + 1
            if count >= needed and (
                position == end or _PARTIAL_ESCAPE.fullmatch(text, position) is not None
            ):
                return start
        return None
