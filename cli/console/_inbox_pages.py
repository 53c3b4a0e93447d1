"""The inbox pages: what waits for whom, and one waiting envelope with the prompt its person
answers and the form that answers it, with ``answer``'s checks and messages."""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from teams_runtime.actors.roles import answer
from teams_runtime.cli._inbox import ANSWER_FILE_BYTES, answered_text, person_role, result_object
from teams_runtime.cli._output import UserError
from teams_runtime.cli.console._guard import checked_form
from teams_runtime.cli.console._html import Html, esc, options, page, table
from teams_runtime.cli.console._state import Console, console_of
from teams_runtime.codecs.formats import pretty_json
from teams_runtime.codecs.request_ids import check_request_id
from teams_runtime.codecs.statuses import RESULT_STATUSES
from teams_runtime.exceptions import TeamsRuntimeError

__all__ = ["answer_post", "inbox_page", "waiting_page"]


async def inbox_page(request: Request) -> Response:
    """``/inbox``: every answer waiting, oldest first."""
    console = console_of(request)
    looked = await console.reads.inbox()
    rows = [
        [Html(f'<a href="/inbox/{esc(w["request_id"])}?role={esc(w["role"])}">'
              f'{esc(w["request_id"])}</a>'),
         w["role"], w["from_role"], w["since"], w["due_at"] or "-",
         "overdue" if w["overdue"] else ""]
        for w in looked["waiting"]
    ]  # fmt: skip
    ran_out = "".join(
        f'<p class="hint">No answer to {esc(r["request_id"])} ({esc(r["role"])}) within its '
        f"answer_within: {'the request failed' if r['outcome'] == 'failed' else 'it waits again'}"
        ".</p>"
        for r in looked["ran_out"]
    )
    listing = table(["request", "role", "from", "since", "due", ""], rows, empty="No answer waits.")
    return page("Inbox", Html(ran_out + listing), csrf=console.guard.csrf, here="/inbox")


def _form(console: Console, item: Any, role: str, given: dict[str, str]) -> Html:
    config = console.reads.config()
    nexts = config.cast.next_roles(role)  # the role's hands_to, as `answer` checks it
    hands_to = [(name, name or "nobody: it ends with the status") for name in nexts.values]
    statuses = [(status, status) for status in RESULT_STATUSES]
    return Html(
        f'<form method="post" action="/inbox/{esc(item.request_id)}/answer" class="answer">'
        f'<input type="hidden" name="csrf" value="{esc(console.guard.csrf)}">'
        f'<input type="hidden" name="role" value="{esc(role)}">'
        f'<label>status <select name="status">{options(statuses, given.get("status", "completed"))}'
        "</select></label>"
        f'<label>summary <textarea name="summary" required rows="3">{esc(given.get("summary", ""))}'
        "</textarea></label>"
        f'<label>next role <select name="next_role">'
        f"{options(hands_to, given.get('next_role', ''))}</select></label>"
        "<label>more of the result (optional: a JSON object, as <code>answer --from</code> takes; "
        f'the fields above override it) <textarea name="result" rows="4">'
        f"{esc(given.get('result', ''))}</textarea></label>"
        "<button>Answer</button></form>"
    )


async def waiting_page(
    request: Request, *, said: str = "", given: dict[str, str] | None = None, status: int = 200
) -> Response:
    """``/inbox/ID?role=R``: the waiting envelope, its prompt and the form that answers it."""
    console = console_of(request)
    wanted = check_request_id(request.path_params["request_id"])
    shown, item = await console.reads.waiting(wanted, request.query_params.get("role") or None)
    envelope = {
        key: getattr(item.envelope, key)
        for key in ("sender", "target", "intent", "urgency", "scope", "body", "artifacts")
    }
    facts = table(
        ["request", "role", "from", "since", "due"],
        [[shown["request_id"], shown["role"], shown["from_role"], shown["since"],
          shown["due_at"] or "-"]],
    )  # fmt: skip
    refused = f'<p class="error" role="alert">{esc(said)}</p>' if said else ""
    body = Html(
        f"{refused}{facts}<section><h2>Answer</h2>"
        f"{_form(console, item, shown['role'], given or {})}</section>"
        f"<section><h2>Envelope</h2><pre>{esc(pretty_json(envelope))}</pre></section>"
        f"<section><h2>Prompt ({esc(shown['kind'])})</h2><pre>{esc(shown['prompt'])}</pre>"
        "</section>"
    )
    title = f"Waiting: {shown['request_id']} for {shown['role']}"
    return page(title, body, csrf=console.guard.csrf, here="/inbox", status=status)


def _given(form: dict[str, str]) -> dict[str, Any]:
    """The result's fields, as ``answer`` takes them: ``--from``'s object (the form's
    ``result``) with status, summary and next role laid over it."""
    extra = form.get("result", "").strip()
    given = result_object(extra.encode(), "the result field") if extra else {}
    if len(extra.encode()) > ANSWER_FILE_BYTES:
        raise UserError(f"the result field is longer than {ANSWER_FILE_BYTES:,} bytes.")
    if not form.get("summary", "").strip():
        raise UserError("the answer needs a summary: one or two sentences.")
    given.update(status=form.get("status", ""), summary=form["summary"])
    given["next_role"] = form.get("next_role", "")
    return given


async def answer_post(request: Request) -> Response:
    """``POST /inbox/ID/answer``: record the person's answer (``answer``'s checks: a second
    answer, an answer past its deadline and one breaking the contract are refused, nothing
    written, with its message)."""
    console = console_of(request)
    form = await checked_form(request, console.guard)  # first: a refusal changes nothing
    wanted = check_request_id(request.path_params["request_id"])
    config = console.reads.config()
    try:
        role = person_role(config, form.get("role") or None)
        done = await answer(console.reads.workspace, config, wanted, _given(form), role=role)
    except TeamsRuntimeError as exc:
        try:
            return await waiting_page(request, said=str(exc), given=form, status=409)
        except TeamsRuntimeError:  # nothing waits any more: say why on a page of its own
            body = Html(f'<p class="error" role="alert">{esc(exc)}</p>'
                        f'<p><a href="/requests/{esc(wanted)}">the request</a></p>')  # fmt: skip
            return page("Not answered", body, csrf=console.guard.csrf, here="/inbox", status=409)
    body = Html(
        f'<p class="done" role="status">{esc(answered_text(done))}</p>'
        f'<p><a href="/requests/{esc(done.request_id)}">the request</a> · '
        '<a href="/inbox">the inbox</a></p>'
    )
    return page("Answered", body, csrf=console.guard.csrf, here="/inbox")
