"""The console's JSON, under ``/api/...``: each the ``--json`` of its command, made by the same
code (``status``, ``inbox``, ``inbox show``, ``export``, ``prompt``, ``explain``, ``metrics``)."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from teams_runtime.cli.console._metrics_page import BY
from teams_runtime.cli.console._state import console_of
from teams_runtime.codecs.request_ids import check_request_id

__all__ = ["API_ROUTES"]


def _request_id(request: Request) -> str:
    return check_request_id(request.path_params["request_id"])


async def _status(request: Request) -> Response:
    return JSONResponse(await console_of(request).reads.status())


async def _inbox(request: Request) -> Response:
    return JSONResponse(await console_of(request).reads.inbox())


async def _waiting(request: Request) -> Response:
    role = request.query_params.get("role") or None
    shown, _ = await console_of(request).reads.waiting(_request_id(request), role)
    return JSONResponse(shown)


async def _record(request: Request) -> Response:
    """The record as its canonical file holds it: ``export``'s bytes, as they are."""
    data = await console_of(request).reads.export(_request_id(request))
    return Response(data, media_type="application/json")


async def _prompt(request: Request) -> Response:
    role = request.query_params.get("role", "")
    return JSONResponse(await console_of(request).reads.prompt(_request_id(request), role))


async def _explain(request: Request) -> Response:
    role = request.query_params.get("role") or None
    return JSONResponse(await console_of(request).reads.explained(_request_id(request), role))


async def _metrics(request: Request) -> Response:
    by = request.query_params.getlist("by") or BY
    return JSONResponse(await console_of(request).reads.metrics(by))


API_ROUTES = [
    Route("/api/status", _status),
    Route("/api/inbox", _inbox),
    Route("/api/inbox/{request_id}", _waiting),
    Route("/api/requests/{request_id}", _record),
    Route("/api/requests/{request_id}/prompt", _prompt),
    Route("/api/requests/{request_id}/explain", _explain),
    Route("/api/metrics", _metrics),
]
