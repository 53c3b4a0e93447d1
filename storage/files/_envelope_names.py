"""The names the file queue gives envelope files: ``<20-digit ns>-<6 hex>-<request id>.json``
(``FileWorkQueue.put``), kept through every move (claimed, deferred). A deferred folder holds
only envelopes the runtime moved there, so a file of any other name in it is another
program's: a stray, never listed as deferred work nor restored."""

from __future__ import annotations

import re

from teams_runtime.codecs.request_ids import check_request_id
from teams_runtime.exceptions import UnsafeRequestIdError

__all__ = ["QUEUED_NAME", "queued_request_id"]

QUEUED_NAME = re.compile(r"\d{20}-[0-9a-f]{6}-(?P<request_id>.+)\.json")


def queued_request_id(name: str) -> str | None:
    """The request id in a queued envelope's file name; ``None`` for a name the queue never
    gives (``zz-bin.json``, ``garbage.json``, an id that is not safe or not in NFC form)."""
    named = QUEUED_NAME.fullmatch(name)
    if named is None:
        return None
    try:
        return (
            named["request_id"]
            if check_request_id(named["request_id"]) == named["request_id"]
            else None
        )
    except UnsafeRequestIdError:
        return None
