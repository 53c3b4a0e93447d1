"""A checked cache of the parsed ``team_runtime.yaml``, so reading an unchanged one loads no PyYAML.

``.teams_runtime/config_cache.json`` holds the file's text exactly as last parsed, the config
that parse gave (msgspec JSON of the ``TeamConfig``), and the size and mtime of every module the
parse ran (codecs, PyYAML's and msgspec's own). It is used only when the text is the same to
the byte and no such module changed; anything else (no cache, a stale or unreadable one, a
config that does not read back equal to itself) parses the text as before and rewrites the
cache atomically. It is never trusted for anything else: the YAML file stays the only source,
and errors are never cached, so every message stays the parser's.
"""

from __future__ import annotations

import contextlib
import os
import sys
from pathlib import Path

import msgspec

from teams_runtime.codecs.config import TeamConfig
from teams_runtime.exceptions import TeamsRuntimeError
from teams_runtime.storage.local_files import write_atomic

__all__ = ["CACHE_NAME", "cached_config", "remember_config"]

CACHE_NAME = "config_cache.json"


_OURS = ("teams_runtime.codecs", "teams_runtime.exceptions")


class _Cached(msgspec.Struct, frozen=True):
    text: str  # the YAML file's text, compared whole: no hash to collide
    code: list[tuple[str, int, int]]  # (module file, mtime_ns, size)
    config: TeamConfig


_DECODER = msgspec.json.Decoder(_Cached)


def _stamp(path: str) -> tuple[str, int, int] | None:
    try:
        result = os.stat(path)
    except OSError:
        return None
    return (path, result.st_mtime_ns, result.st_size)


def cached_config(runtime: Path, text: str) -> TeamConfig | None:
    """The config the cache in ``runtime`` holds for ``text``, if it is for exactly that text
    and the same parser code; otherwise None (parse it)."""
    try:
        with open(runtime / CACHE_NAME, "rb") as handle:
            cached = _DECODER.decode(handle.read())
    except (OSError, ValueError):  # missing, unreadable, or not a cache (msgspec's errors)
        return None
    if cached.text != text or not cached.code:
        return None
    if any(_stamp(path) != (path, mtime, size) for path, mtime, size in cached.code):
        return None
    return cached.config


def _parser_code() -> list[tuple[str, int, int]] | None:
    """The stamps of every loaded module of the parser's code (None if one has no file)."""
    stamps = []
    for name, module in sorted(sys.modules.items()):
        # The code a parse depends on: a changed module (an edit, an upgrade) makes a cache stale.
        # PyYAML's and msgspec's own files: an upgrade rewrites their __init__ too.
        if name not in ("yaml", "msgspec") and not name.startswith(_OURS):
            continue
        path = getattr(module, "__file__", None)
        stamp = _stamp(path) if isinstance(path, str) else None
        if stamp is None:
            return None
        stamps.append(stamp)
    return stamps


def remember_config(runtime: Path, text: str, config: TeamConfig) -> None:
    """Write the cache of ``config`` parsed from ``text`` into ``runtime`` (an existing
    folder), if it reads back exactly; any failure leaves things as they were, silently."""
    if not runtime.is_dir():  # a workspace not made yet: `init` makes the folder, not a read
        return
    code = _parser_code()
    if not code:
        return
    try:
        data = msgspec.json.encode(_Cached(text=text, code=code, config=config))
        again = _DECODER.decode(data).config
    except (TypeError, ValueError, OverflowError):  # a value JSON cannot carry
        return
    # Equal, and in the same order (dicts compare equal in any order; the cast's order counts).
    if again != config or msgspec.json.encode(again) != msgspec.json.encode(config):
        return
    with contextlib.suppress(TeamsRuntimeError, OSError):
        write_atomic(runtime / CACHE_NAME, data, runtime=runtime, durable=False)
