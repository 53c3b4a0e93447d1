"""Request ids: which ids are safe (spec section 2) and the path a notice names for one."""

from __future__ import annotations

import re

from teams_runtime.exceptions import UnsafeRequestIdError

__all__ = [
    "MAX_REQUEST_ID_LENGTH",
    "REQUESTS_FOLDER",
    "canonical_request_ref",
    "check_request_id",
    "notice_request_id",
]

MAX_REQUEST_ID_LENGTH = 200
# Where records live inside a workspace: a notice names it, the file store lays files out by it.
REQUESTS_FOLDER = ".teams_runtime/requests"
_SAFE_ID = re.compile(r"[A-Za-z0-9._:-]+")


def check_request_id(value: object) -> str:
    """Return ``value`` if it is a safe request id, else raise ``UnsafeRequestIdError``.

    Safe: 1-200 ASCII letters, digits, ``-``, ``_``, ``.``, ``:``; never ``..`` (spec section 2).
    """
    if not isinstance(value, str) or not value:
        raise UnsafeRequestIdError("request id must be a non-empty string.")
    if len(value) > MAX_REQUEST_ID_LENGTH:
        raise UnsafeRequestIdError(
            f"request id is {len(value)} characters long; at most {MAX_REQUEST_ID_LENGTH} allowed."
        )
    # fullmatch, not match + `$`: `$` also matches before a trailing newline.
    if _SAFE_ID.fullmatch(value) is None or ".." in value or value == ".":
        raise UnsafeRequestIdError(
            f"request id {value!r} is not a safe file name; use only letters, digits, "
            "'-', '_', '.' and ':' (no '/', no '..')."
        )
    return value


def notice_request_id(value: object) -> str:
    """The request id a notice may name: a safe id, else ``""`` (no path outside the store)."""
    try:
        return check_request_id(value)
    except UnsafeRequestIdError:
        return ""


def canonical_request_ref(request_id: str) -> str:
    """The workspace-relative path a notice gives for the full record (spec section 5)."""
    return f"./{REQUESTS_FOLDER}/{request_id}.json" if request_id else ""
