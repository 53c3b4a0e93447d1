"""A role's deliverable (``output``) and the contract's own placeholders echoed back.

``output`` is the one optional contract field a role fills with its work itself (a draft, a
plan, a JSON object): text, or an object, at most ``MAX_OUTPUT_BYTES`` as JSON. Every answer
may carry it; only a role whose team asks for it (``roles.<role>.output: true``) is shown it in
the contract's example shape, so the default team's prompts are unchanged. A record's
``result`` keeps the last non-empty one (``policy.outcomes``), so the next role and the
request's reader find it there.

The example shape's texts ("one or two sentences on what you did and found") are what a model
must replace: an answer that gives one of them back as its value says nothing, and the
contract rejects it (a repair names the field).
"""

from __future__ import annotations

from typing import Any

import msgspec

from teams_runtime.codecs.formats import JsonObject

__all__ = [
    "EXAMPLES",
    "MAX_OUTPUT_BYTES",
    "OUTPUT_EXAMPLE",
    "OUTPUT_KEY",
    "RESEARCH_EXAMPLES",
    "echo_issues",
    "has_output",
    "output_issues",
]

OUTPUT_KEY = "output"
# An output's largest size, as UTF-8 JSON: a long draft fits (about 10,000 words), a whole
# repository pasted in does not (it belongs in files, named by `artifacts`).
MAX_OUTPUT_BYTES = 64 * 1024
OUTPUT_EXAMPLE = "your work itself: the text (or JSON object) the next role takes up"

# What the prompt's example shape says for a field; a Literal field lists its values.
EXAMPLES: dict[str, str | list[str]] = {
    "summary": "one or two sentences on what you did and found",
    "output": OUTPUT_EXAMPLE,
    "insights": ["facts the next role needs"],
    "artifacts": ["paths you created or changed"],
    "subject": "what would be researched",
    "research_query": "the query to run, or empty when not needed",
    "reason_code": "local_context_sufficient | missing_facts | outdated_facts",
}
RESEARCH_EXAMPLES: JsonObject = {
    "needed": False,
    "summary": "one sentence on the decision",
}


def has_output(value: object) -> bool:
    """Whether ``value`` is a deliverable worth keeping: text with more than whitespace in it,
    or an object with a key."""
    return (isinstance(value, str) and bool(value.strip())) or (
        isinstance(value, dict) and bool(value)
    )


def output_issues(answer: JsonObject) -> list[str]:
    """What is wrong with ``answer``'s ``output``: not text, an object or null, or larger than
    ``MAX_OUTPUT_BYTES`` (nothing when it has none)."""
    value = answer.get(OUTPUT_KEY)
    if value is None:
        return []
    if not isinstance(value, str | dict):
        return [f"`{OUTPUT_KEY}` must be a string or an object."]
    size = len(msgspec.json.encode(value))
    if size > MAX_OUTPUT_BYTES:
        return [
            f"`{OUTPUT_KEY}` is {size} bytes as JSON, over the limit of {MAX_OUTPUT_BYTES}: "
            "shorten it, or write the work to files and name them in `artifacts`."
        ]
    return []


def _said(text: str) -> str:
    """``text`` as compared with a placeholder: spaces, case and a final full stop aside."""
    return " ".join(text.split()).casefold().rstrip(".")


_KNOWN = {
    _said(text): text
    for examples in (EXAMPLES, RESEARCH_EXAMPLES)
    for value in examples.values()
    for text in (value if isinstance(value, list) else [value])
    if isinstance(text, str)
}


# How alike a value and a placeholder are (difflib's ratio) for the value to be the
# placeholder with a word changed ("one sentence on what you did and found").
_NEAR_COPY = 0.9
_LEAST_QUOTED = 20  # characters of a placeholder that, at the start of a value, are a copy


def _copy_of(said: str) -> str | None:
    """The placeholder ``said`` (as ``_said`` makes it) is, begins with, or nearly is."""
    found = _KNOWN.get(said)
    if found is not None:
        return found
    from difflib import SequenceMatcher  # here: `status` reads contracts, never compares them

    for known, text in _KNOWN.items():
        if len(known) >= _LEAST_QUOTED and said.startswith(known):
            return text  # the placeholder, then a few words of its own
        if len(said) <= 1.3 * len(known) and SequenceMatcher(None, said, known).ratio() >= (
            _NEAR_COPY
        ):
            return text
    return None


def _echoed(value: Any) -> str | None:
    """The placeholder ``value`` repeats, if it is one (or a list holding one): the same text,
    the text with words of its own after it, or the text with a word or two changed."""
    if isinstance(value, str):
        return _copy_of(_said(value))
    if isinstance(value, list):
        return next((found for item in value if (found := _echoed(item)) is not None), None)
    return None


def echo_issues(answer: JsonObject, names: tuple[str, ...]) -> list[str]:
    """An issue for each of the fields ``names`` whose value gives back the example shape's
    placeholder text instead of the role's own (the quoted text is the contract's, never the
    answer's)."""
    issues = []
    for name in names:
        found = _echoed(answer.get(name))
        if found is not None:
            issues.append(
                f'`{name}` repeats the example\'s placeholder "{found}": write your own '
                "content there."
            )
    return issues
