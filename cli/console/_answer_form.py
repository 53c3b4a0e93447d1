"""The answer form of a waiting envelope: what it asks (nothing chosen for the person), the
envelope it answers (a hidden field: an answer is recorded on that question only), and how
its fields become ``answer``'s result (each bound checked, with why)."""

from __future__ import annotations

from typing import Any

import msgspec

from teams_runtime.cli._inbox import ANSWER_FILE_BYTES, result_object
from teams_runtime.cli._output import UserError
from teams_runtime.cli.console._html import Html, esc, options
from teams_runtime.cli.console._state import Console
from teams_runtime.codecs.model import MAX_OUTPUT_BYTES, OUTPUT_KEY
from teams_runtime.codecs.statuses import RESULT_STATUSES

__all__ = ["NOBODY", "SUMMARY_CHARS", "answer_form", "given_result"]

# The form's value for "nobody": the request ends (a role name starts with a letter or digit).
NOBODY = "(nobody)"
# A summary is one or two sentences (the next roles read it in every prompt); the work itself
# goes in output, which the contract bounds (MAX_OUTPUT_BYTES).
SUMMARY_CHARS = 2000


def _counter(name: str, unit: str, most: int) -> Html:
    """A live count under a text box (the page's script keeps it), in place of a hard cut
    that would drop a long paste's end unseen: past ``most`` it says so, and the answer is
    refused with why."""
    return Html(
        f'<small class="count" data-count="{esc(name)}" data-unit="{esc(unit)}" '
        f'data-most="{most}">at most {most:,} {esc(unit)}</small>'
    )


def answer_form(console: Console, item: Any, role: str, given: dict[str, str]) -> Html:
    """The answer's form for ``item``: nothing chosen for the person (``answer`` asks for
    --status too); ``given``, a refused answer's fields, filled in again."""
    nexts = console.reads.config().cast.next_roles(role)  # the role's hands_to, as `answer`'s
    hands_to = [("", "choose...")] + [
        (name or NOBODY, name or "nobody: the request ends with the status")
        for name in nexts.values
    ]
    statuses = [("", "choose...")] + [(status, status) for status in RESULT_STATUSES]
    envelope = esc(item.envelope_id)
    return Html(
        f'<form method="post" action="/inbox/{esc(item.request_id)}/answer" class="answer" '
        f'data-envelope="{envelope}">'
        f'<input type="hidden" name="csrf" value="{esc(console.guard.csrf)}">'
        f'<input type="hidden" name="role" value="{esc(role)}">'
        f'<input type="hidden" name="envelope_id" value="{envelope}">'
        f'<label>status <select name="status" required>{options(statuses, given.get("status", ""))}'
        "</select></label>"
        f'<label>summary <textarea name="summary" required rows="3">'
        f"{esc(given.get('summary', ''))}</textarea>"
        f"{_counter('summary', 'characters', SUMMARY_CHARS)}</label>"
        f'<label>next role <select name="next_role" required>'
        f"{options(hands_to, given.get('next_role', ''))}</select></label>"
        "<label><span>output (optional: the work itself, a draft or a decision, as "
        f'<code>answer --output</code>)</span> <textarea name="output" rows="6">'
        f"{esc(given.get('output', ''))}</textarea>"
        f"{_counter('output', 'bytes as JSON', MAX_OUTPUT_BYTES)}</label>"
        "<label><span>more of the result (optional: a JSON object, as <code>answer --from</code> "
        f'takes; the fields above override it)</span> <textarea name="result" rows="4">'
        f"{esc(given.get('result', ''))}</textarea></label>"
        "<button>Answer</button></form>"
    )


def given_result(form: dict[str, str]) -> dict[str, Any]:
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
