"""The console's JSON, under ``/api/...``: each the ``--json`` of its command, made by the same
code (``status``, ``inbox``, ``inbox show``, ``export``, ``prompt``, ``explain``, ``metrics``);
a GET writes nothing (the inbox's tidy, which ``inbox`` does as it looks, is a POST); a query
parameter is checked as the command's flag is (an unknown one, a value not of its choices:
400)."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from teams_runtime.cli._output import UserError
from teams_runtime.cli.console._guard import checked_form
from teams_runtime.cli.console._inbox_pages import answer_api
from teams_runtime.cli.console._metrics_page import BY
from teams_runtime.cli.console._state import console_of
from teams_runtime.codecs.prompt_names import GROUP_KEYS
from teams_runtime.codecs.request_ids import check_request_id

__all__ = ["API_ROUTES"]


def _request_id(request: Request) -> str:
    return check_request_id(request.path_params["request_id"])


def _params(request: Request, *known: str) -> None:
    """Refuse a query parameter the command has no flag for, as its parser would (400)."""
    unknown = sorted(set(request.query_params) - set(known))
    if unknown:
        takes = f"it takes {', '.join(known)}" if known else "it takes none"
        raise UserError(f"unknown query parameter {unknown[0]!r} for {request.url.path}: {takes}.")


def _one(request: Request, name: str) -> str | None:
    """The query parameter ``name``, given once at most (``None``: not given)."""
    values = request.query_params.getlist(name)
    if len(values) > 1:
        raise UserError(f"{name} is given {len(values)} times; give it once.")
    return values[0] if values else None


async def _status(request: Request) -> Response:
    _params(request)
    return JSONResponse(await console_of(request).reads.status())


async def _inbox(request: Request) -> Response:
    _params(request)
    return JSONResponse(await console_of(request).reads.inbox())


async def _tidy(request: Request) -> Response:
    """``POST /api/inbox``: the inbox tidied (overdue answers' ``on_failure`` applied), as
    ``inbox --json`` tidies it; a write, so a POST with the CSRF field (or a bearer token)."""
    console = console_of(request)
    await checked_form(request, console.guard)
    return JSONResponse(await console.reads.tidy_inbox())


async def _waiting(request: Request) -> Response:
    _params(request, "role")
    role = _one(request, "role") or None
    shown, _ = await console_of(request).reads.waiting(_request_id(request), role)
    return JSONResponse(shown)


async def _record(request: Request) -> Response:
    """The record as its canonical file holds it: ``export``'s bytes, as they are."""
    _params(request)
    data = await console_of(request).reads.export(_request_id(request))
    return Response(data, media_type="application/json")


# The flags of `prompt` and `explain` that override prompt_context, as query parameters.
OVERRIDES = ("recent_events", "max_events", "disable", "layout", "step", "max_prompt_tokens")
# `metrics`'s filters (`by` is taken apart: it may be repeated).
METRICS_FILTERS = ("hours", "since", "role", "purpose", "request_id")


def _flags(request: Request, names: tuple[str, ...]) -> list[str]:
    """The query parameters ``names`` as the command's flags (``request_id`` is
    ``--request-id=...``), each given once at most; ``disable``, a switch, is ``true`` or
    ``false``. Their values are then checked by the command's own parser."""
    flags = []
    for name in names:
        value = _one(request, name)
        flag = "--" + name.replace("_", "-")
        if value is None:
            continue
        if name == "disable":
            if value.lower() not in ("true", "false", "1", "0", ""):
                raise UserError(f"disable is a switch: give true or false, not {value!r}.")
            flags += [flag] if value.lower() in ("true", "1", "") else []
        else:
            flags.append(f"{flag}={value}")
    return flags


async def _prompt(request: Request) -> Response:
    _params(request, "role", "kind", *OVERRIDES)
    role = _one(request, "role")
    request_id = _request_id(request)
    if not role:  # as `prompt` refuses it without --role
        raise UserError("role is required (?role=ROLE): the prompt of which role.")
    flags = _flags(request, ("kind", *OVERRIDES))
    return JSONResponse(await console_of(request).reads.prompt(request_id, role, *flags))


async def _explain(request: Request) -> Response:
    _params(request, "role", *OVERRIDES)
    role = _one(request, "role") or None
    flags = _flags(request, OVERRIDES)
    explained = await console_of(request).reads.explained(_request_id(request), role, *flags)
    return JSONResponse(explained)


async def _metrics(request: Request) -> Response:
    _params(request, "by", *METRICS_FILTERS)
    by = request.query_params.getlist("by") or BY
    for key in by:  # as `metrics --by` refuses it
        if key not in GROUP_KEYS:
            raise UserError(f"by: invalid choice: {key!r} (choose from {', '.join(GROUP_KEYS)}).")
    flags = _flags(request, METRICS_FILTERS)
    return JSONResponse(await console_of(request).reads.metrics(by, *flags))


API_ROUTES = [
    Route("/api/status", _status),
    Route("/api/inbox", _inbox),
    Route("/api/inbox", _tidy, methods=["POST"]),
    Route("/api/inbox/{request_id}", _waiting),
    Route("/api/inbox/{request_id}/answer", answer_api, methods=["POST"]),
    Route("/api/requests/{request_id}", _record),
    Route("/api/requests/{request_id}/prompt", _prompt),
    Route("/api/requests/{request_id}/explain", _explain),
    Route("/api/metrics", _metrics),
]
