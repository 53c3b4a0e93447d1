"""The inbox pages: what waits for whom, and one waiting envelope with the prompt its person
answers and the form that answers it, with ``answer``'s checks and messages; an answer
recorded redirects (POST, redirect, GET), so a reload never posts it again."""

from __future__ import annotations

import time

import msgspec
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response

from teams_runtime.actors.roles import Answered, answer
from teams_runtime.cli._inbox import answered_text, person_role
from teams_runtime.cli._output import UserError
from teams_runtime.cli.console._answer_form import answer_form, given_result
from teams_runtime.cli.console._guard import checked_form
from teams_runtime.cli.console._html import Html, due_in, esc, page, table, when
from teams_runtime.cli.console._live import drawn_note, live_attributes, live_events
from teams_runtime.cli.console._state import Console, Flash, console_of
from teams_runtime.codecs.formats import JsonObject, count_of, pretty_json
from teams_runtime.codecs.request_ids import check_request_id
from teams_runtime.exceptions import AnswerRefused, TeamsRuntimeError

__all__ = [
    "answer_api",
    "answer_post",
    "inbox_events",
    "inbox_fragment",
    "inbox_page",
    "tidy_post",
    "waiting_page",
]


def _tidy_form(console: Console, overdue: int) -> Html:
    """The **Apply on_failure** button, and what it does, when ``overdue`` answers wait."""
    if not overdue:
        return Html("")
    return Html(
        f'<form method="post" action="/inbox" class="filters"><p class="note">'
        f"{esc(count_of(overdue, 'answer'))} waited past answer_within: the role's on_failure "
        "applies when a worker or <code>inbox</code> next looks, or now:</p>"
        f'<input type="hidden" name="csrf" value="{esc(console.guard.csrf)}">'
        "<button>Apply on_failure</button></form>"
    )


def inbox_fragment(console: Console, waiting: list[JsonObject]) -> Html:
    """What waits, as ``/inbox`` shows it (and redraws it live): oldest first."""
    now = time.time()
    rows = [
        [Html(f'<a href="/inbox/{esc(w["request_id"])}?role={esc(w["role"])}" '
              f'data-envelope="{esc(w["envelope_id"])}">{esc(w["request_id"])}</a>'),
         w["role"], w["from_role"], when(w["since"], now, "{}"), due_in(w["due_at"], now)]
        for w in waiting
    ]  # fmt: skip
    overdue = sum(1 for w in waiting if w["overdue"])
    listing = table(["request", "role", "from", "waiting", "due"], rows, empty="No answer waits.")
    return Html(_tidy_form(console, overdue) + listing)


def _inbox_body(console: Console, looked: JsonObject) -> Html:
    ran_out = "".join(
        f'<p class="hint">No answer to {esc(r["request_id"])} ({esc(r["role"])}) within its '
        f"answer_within: {'the request failed' if r['outcome'] == 'failed' else 'it waits again'}"
        ".</p>"
        for r in looked["ran_out"]
    )
    fragment = inbox_fragment(console, looked["waiting"])
    live = f'<div id="inbox" {live_attributes("inbox")}>{fragment}</div>'
    return Html(ran_out + live + drawn_note())


async def inbox_page(request: Request) -> Response:
    """``/inbox``: every answer waiting, oldest first; looking writes nothing."""
    console = console_of(request)
    body = _inbox_body(console, await console.reads.inbox())
    return page("Inbox", body, guard=console.guard, here="/inbox")


async def _waiting_fragment(console: Console) -> Html:
    return inbox_fragment(console, (await console.reads.inbox())["waiting"])


async def inbox_events(request: Request) -> Response:
    """``/events/inbox``: what waits, each time it changes (the inbox page redrawn live)."""
    return live_events(request, "inbox", _waiting_fragment)


async def tidy_post(request: Request) -> Response:
    """``POST /inbox``: the inbox tidied as ``inbox`` tidies it (the overdue answers' role's
    ``on_failure`` applied), then shown with what ran out."""
    console = console_of(request)
    await checked_form(request, console.guard)
    body = _inbox_body(console, await console.reads.tidy_inbox())
    return page("Inbox", body, guard=console.guard, here="/inbox")


def _overdue(console: Console, shown: JsonObject) -> tuple[Html, bool]:
    """An overdue answer's mark, what its role's ``on_failure`` does (now, with the button,
    or with this answer), and whether an answer could still be recorded (``requeue``)."""
    on_failure = console.reads.config().model_for(shown["role"]).on_failure
    if on_failure == "requeue":
        what = ("on_failure is requeue: it waits again for another answer_within, so an answer "
                "now is recorded (the requeue is applied first).")  # fmt: skip
    else:
        what = ("on_failure is fail: the request fails, so an answer now is refused (`teams-"
                f"runtime retry {shown['request_id']}` puts it in the inbox again).")  # fmt: skip
    mark = Html(
        f'<p class="error" role="alert">Overdue: no answer came within its answer_within (due '
        f"{esc(shown['due_at'])}). {esc(what)}</p>{_tidy_form(console, 1)}"
    )
    return mark, on_failure == "requeue"


def _nothing_waits(console: Console, wanted: str, said: str = "", status: int = 404) -> Response:
    """An inbox address with nothing waiting under it now (answered, here or elsewhere; its
    request moved on or ended), with where to go from here; ``said``: why an answer to it
    was refused (409)."""
    refused = f'<p class="error" role="alert">{esc(said)}</p>' if said else ""
    body = Html(
        f'{refused}<p class="note">No answer waits under {esc(wanted)} now: it was answered '
        "(in this console or with <code>teams-runtime answer</code>), or its request moved on "
        f'or ended.</p><p><a href="/requests/{esc(wanted)}">the request</a> · '
        '<a href="/inbox">the inbox</a></p>'
    )
    title = "Not answered" if said else "Nothing waits"
    return page(title, body, guard=console.guard, here="/inbox", status=status)


async def waiting_page(
    request: Request, *, said: str = "", given: dict[str, str] | None = None, status: int = 200
) -> Response:
    """``/inbox/ID?role=R``: the waiting envelope, its prompt and the form that answers it
    (an overdue one's state, and the form only where an answer can still be recorded).
    ``given``, a refused answer's fields, fill the form again if it is the same question."""
    console = console_of(request)
    wanted = check_request_id(request.path_params["request_id"])
    try:
        shown, item = await console.reads.waiting(wanted, request.query_params.get("role") or None)
    except HTTPException as exc:  # nothing waits there now
        if exc.status_code != 404:
            raise
        return _nothing_waits(console, wanted, said, 409 if said else 404)
    envelope = {
        key: getattr(item.envelope, key)
        for key in ("sender", "target", "intent", "urgency", "scope", "body", "artifacts")
    }
    now = time.time()
    facts = table(
        ["request", "role", "from", "waiting", "due"],
        [[shown["request_id"], shown["role"], shown["from_role"],
          when(shown["since"], now, "{}"), due_in(shown["due_at"], now)]],
    )  # fmt: skip
    refused = f'<p class="error" role="alert">{esc(said)}</p>' if said else ""
    mark, open_form = _overdue(console, shown) if shown["overdue"] else (Html(""), True)
    if given and given.get("envelope_id", item.envelope_id) != item.envelope_id:
        given = None  # typed for the question before: not laid over a new one
    form = (f"<section><h2>Answer</h2>{answer_form(console, item, shown['role'], given or {})}"
            "</section>" if open_form else "")  # fmt: skip
    body = Html(
        f"{refused}{mark}{facts}{form}"
        f"<section><h2>Envelope</h2><pre>{esc(pretty_json(envelope))}</pre></section>"
        f"<section><h2>Prompt ({esc(shown['kind'])})</h2><pre>{esc(shown['prompt'])}</pre>"
        f"</section>{drawn_note(live=False)}"
    )
    title = f"Waiting: {shown['request_id']} for {shown['role']}"
    return page(title, body, guard=console.guard, here="/inbox", status=status)


async def _answered(request: Request, console: Console, form: dict[str, str]) -> Answered:
    """The form's answer recorded, as ``answer`` records it: on the envelope the form showed
    (its ``envelope_id``) when it names one. ``UserError`` for a form not filled in,
    ``TeamsRuntimeError`` for an answer refused; nothing written either way."""
    wanted = check_request_id(request.path_params["request_id"])
    config = console.reads.config()
    role = person_role(config, form.get("role") or None)
    given = given_result(form)
    envelope_id = form.get("envelope_id") or None
    return await answer(console.reads.workspace, config, wanted, given, role=role,
                        envelope_id=envelope_id)  # fmt: skip


async def answer_post(request: Request) -> Response:
    """``POST /inbox/ID/answer``: record the person's answer (``answer``'s checks: a second
    answer, an answer past its deadline, one to a question replaced meanwhile and one
    breaking the contract are refused, 409, nothing written, with its message; a form not
    filled in, 400), then on to the request's page (303: a reload posts nothing again)."""
    console = console_of(request)
    form = await checked_form(request, console.guard)  # first: a refusal changes nothing
    wanted = check_request_id(request.path_params["request_id"])
    try:
        done = await _answered(request, console, form)
    except UserError as exc:  # the form itself: nothing was asked of the request yet
        return await waiting_page(request, said=str(exc), given=form, status=400)
    except TeamsRuntimeError as exc:
        try:
            return await waiting_page(request, said=str(exc), given=form, status=409)
        except AnswerRefused:  # several wait, or its role left the team: say why on its own
            body = Html(f'<p class="error" role="alert">{esc(exc)}</p>'
                        f'<p><a href="/requests/{esc(wanted)}">the request</a> · '
                        '<a href="/inbox">the inbox</a></p>')  # fmt: skip
            return page("Not answered", body, guard=console.guard, here="/inbox", status=409)
    key = console.flash(Flash(answered_text(done), done.envelope_id))
    return RedirectResponse(f"/requests/{done.request_id}?answered={key}", 303)


async def answer_api(request: Request) -> Response:
    """``POST /api/inbox/ID/answer``: ``answer ID ... --json``, the form's fields (and an
    optional ``envelope_id``: the question answered, refused if another waits now); a
    refusal is ``{"error": ...}``, 400 for the fields, 409 for the answer."""
    console = console_of(request)
    form = await checked_form(request, console.guard)
    try:
        done = await _answered(request, console, form)
    except UserError as exc:
        return JSONResponse({"error": str(exc)}, 400)
    except AnswerRefused as exc:
        return JSONResponse({"error": str(exc)}, 409)
    return JSONResponse(msgspec.structs.asdict(done))
