"""The inbox pages: what waits for whom, and one waiting envelope with the prompt its person
answers and the form that answers it, with ``answer``'s checks and messages."""

from __future__ import annotations

import time
from typing import Any

import msgspec
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response

from teams_runtime.actors.roles import answer
from teams_runtime.cli._inbox import ANSWER_FILE_BYTES, answered_text, person_role, result_object
from teams_runtime.cli._output import UserError
from teams_runtime.cli.console._guard import checked_form
from teams_runtime.cli.console._html import Html, due_in, esc, options, page, table, when
from teams_runtime.cli.console._live import drawn_note, live_attributes, live_events
from teams_runtime.cli.console._state import Console, console_of
from teams_runtime.codecs.formats import JsonObject, count_of, pretty_json
from teams_runtime.codecs.model import MAX_OUTPUT_BYTES, OUTPUT_KEY
from teams_runtime.codecs.request_ids import check_request_id
from teams_runtime.codecs.statuses import RESULT_STATUSES
from teams_runtime.exceptions import AnswerRefused, TeamsRuntimeError

__all__ = [
    "answer_post",
    "inbox_events",
    "inbox_fragment",
    "inbox_page",
    "tidy_post",
    "waiting_page",
]

# The form's value for "nobody": the request ends (a role name starts with a letter or digit).
NOBODY = "(nobody)"
# A summary is one or two sentences (the next roles read it in every prompt); the work itself
# goes in output, which the contract bounds (MAX_OUTPUT_BYTES).
SUMMARY_CHARS = 2000


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
        [Html(f'<a href="/inbox/{esc(w["request_id"])}?role={esc(w["role"])}">'
              f'{esc(w["request_id"])}</a>'),
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


def _form(console: Console, item: Any, role: str, given: dict[str, str]) -> Html:
    """The answer's form: nothing chosen for the person (``answer`` asks for --status too)."""
    nexts = console.reads.config().cast.next_roles(role)  # the role's hands_to, as `answer`'s
    hands_to = [("", "choose...")] + [
        (name or NOBODY, name or "nobody: the request ends with the status")
        for name in nexts.values
    ]
    statuses = [("", "choose...")] + [(status, status) for status in RESULT_STATUSES]
    return Html(
        f'<form method="post" action="/inbox/{esc(item.request_id)}/answer" class="answer">'
        f'<input type="hidden" name="csrf" value="{esc(console.guard.csrf)}">'
        f'<input type="hidden" name="role" value="{esc(role)}">'
        f'<label>status <select name="status" required>{options(statuses, given.get("status", ""))}'
        "</select></label>"
        f'<label>summary <textarea name="summary" required rows="3" maxlength="{SUMMARY_CHARS}">'
        f"{esc(given.get('summary', ''))}</textarea></label>"
        f'<label>next role <select name="next_role" required>'
        f"{options(hands_to, given.get('next_role', ''))}</select></label>"
        "<label><span>output (optional: the work itself, a draft or a decision, as "
        f'<code>answer --output</code>)</span> <textarea name="output" rows="6" '
        f'maxlength="{MAX_OUTPUT_BYTES}">{esc(given.get("output", ""))}</textarea></label>'
        "<label><span>more of the result (optional: a JSON object, as <code>answer --from</code> "
        f'takes; the fields above override it)</span> <textarea name="result" rows="4">'
        f"{esc(given.get('result', ''))}</textarea></label>"
        "<button>Answer</button></form>"
    )


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


async def waiting_page(
    request: Request, *, said: str = "", given: dict[str, str] | None = None, status: int = 200
) -> Response:
    """``/inbox/ID?role=R``: the waiting envelope, its prompt and the form that answers it
    (an overdue one's state, and the form only where an answer can still be recorded)."""
    console = console_of(request)
    wanted = check_request_id(request.path_params["request_id"])
    shown, item = await console.reads.waiting(wanted, request.query_params.get("role") or None)
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
    form = _form(console, item, shown["role"], given or {}) if open_form else ""
    body = Html(
        f"{refused}{mark}{facts}<section><h2>Answer</h2>{form}</section>"
        f"<section><h2>Envelope</h2><pre>{esc(pretty_json(envelope))}</pre></section>"
        f"<section><h2>Prompt ({esc(shown['kind'])})</h2><pre>{esc(shown['prompt'])}</pre>"
        "</section>"
    )
    title = f"Waiting: {shown['request_id']} for {shown['role']}"
    return page(title, body, guard=console.guard, here="/inbox", status=status)


def _given(form: dict[str, str]) -> dict[str, Any]:
    """The result's fields, as ``answer`` takes them: ``--from``'s object (the form's
    ``result``) with status, summary, next role and output laid over it. Each chosen, none
    past its bound (``UserError``: the form again, nothing written)."""
    extra = form.get("result", "").strip()
    if len(extra.encode()) > ANSWER_FILE_BYTES:
        raise UserError(f"the result field is longer than {ANSWER_FILE_BYTES:,} bytes.")
    given = result_object(extra.encode(), "the result field") if extra else {}
    summary, output = form.get("summary", ""), form.get("output", "")
    if form.get("status", "") not in RESULT_STATUSES:
        raise UserError(f"choose a status: {', '.join(RESULT_STATUSES)}. Nothing was recorded.")
    if not summary.strip():
        raise UserError("the answer needs a summary: one or two sentences.")
    if len(summary) > SUMMARY_CHARS:
        raise UserError(
            f"the summary is {len(summary):,} characters, over the form's {SUMMARY_CHARS:,}: say "
            "it in one or two sentences, and put the work itself in output. Nothing was recorded."
        )
    if not form.get("next_role"):
        raise UserError("choose the next role, or nobody (the request ends with the status). "
                        "Nothing was recorded.")  # fmt: skip
    size = len(msgspec.json.encode(output))
    if size > MAX_OUTPUT_BYTES:
        raise UserError(
            f"the output is {size:,} bytes as JSON, over the contract's {MAX_OUTPUT_BYTES:,}: "
            "shorten it, or write the work to files and name them in the result's artifacts. "
            "Nothing was recorded."
        )
    given.update(status=form["status"], summary=summary)
    given["next_role"] = "" if form["next_role"] == NOBODY else form["next_role"]
    if output.strip():
        given[OUTPUT_KEY] = output
    return given


async def answer_post(request: Request) -> Response:
    """``POST /inbox/ID/answer``: record the person's answer (``answer``'s checks: a second
    answer, an answer past its deadline and one breaking the contract are refused, 409,
    nothing written, with its message; a form not filled in, 400)."""
    console = console_of(request)
    form = await checked_form(request, console.guard)  # first: a refusal changes nothing
    wanted = check_request_id(request.path_params["request_id"])
    config = console.reads.config()
    try:
        role = person_role(config, form.get("role") or None)
        given = _given(form)
    except UserError as exc:  # the form itself: nothing was asked of the request yet
        return await waiting_page(request, said=str(exc), given=form, status=400)
    try:
        done = await answer(console.reads.workspace, config, wanted, given, role=role)
    except TeamsRuntimeError as exc:
        try:
            return await waiting_page(request, said=str(exc), given=form, status=409)
        except (AnswerRefused, HTTPException):  # nothing waits any more: say why on its own
            body = Html(f'<p class="error" role="alert">{esc(exc)}</p>'
                        f'<p><a href="/requests/{esc(wanted)}">the request</a></p>')  # fmt: skip
            return page("Not answered", body, guard=console.guard, here="/inbox", status=409)
    body = Html(
        f'<p class="done" role="status">{esc(answered_text(done))}</p>'
        f'<p><a href="/requests/{esc(done.request_id)}">the request</a> · '
        '<a href="/inbox">the inbox</a></p>'
    )
    return page("Answered", body, guard=console.guard, here="/inbox")
