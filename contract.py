"""The strict-JSON contracts of role results and research decisions (spec section 6)."""

from __future__ import annotations

from typing import Any, Literal

import msgspec

from teams_runtime.roles import PUBLIC_ROLES

__all__ = [
    "COMMIT_STATUSES",
    "RESULT_STATUSES",
    "AnswerKind",
    "contract_shape",
    "validate_answer",
]

AnswerKind = Literal["task", "research_decision", "version_control"]

RESULT_STATUSES = ("completed", "blocked", "failed")
COMMIT_STATUSES = ("committed", "no_changes", "failed", "no_repo")
_NEXT_ROLES = (*PUBLIC_ROLES, "version_controller")
_DECODER = msgspec.json.Decoder()


def contract_shape(kind: AnswerKind, request_id: str, role: str) -> dict[str, Any]:
    """An example answer of the right shape, shown to the model in every prompt."""
    if kind == "research_decision":
        return {
            "request_id": request_id,
            "role": role,
            "needed": False,
            "subject": "what would be researched",
            "research_query": "the query to run, or empty when not needed",
            "reason_code": "local_context_sufficient | missing_facts | outdated_facts",
            "summary": "one sentence on the decision",
            "next_role": "planner",
        }
    shape: dict[str, Any] = {
        "request_id": request_id,
        "role": role,
        "status": " | ".join(RESULT_STATUSES),
        "summary": "one or two sentences on what you did and found",
        "insights": ["facts the next role needs"],
        "proposals": {},
        "artifacts": ["paths you created or changed"],
        "next_role": f"one of {', '.join(_NEXT_ROLES)}, or empty to finish",
        "error": "",
    }
    if kind == "version_control":
        shape |= {
            "commit_status": " | ".join(COMMIT_STATUSES),
            "commit_sha": "",
            "commit_message": "",
            "commit_paths": [],
            "change_detected": False,
        }
    return shape


def _check_type(
    answer: dict[str, Any], key: str, kind: type, label: str, issues: list[str]
) -> None:
    if key in answer and not isinstance(answer[key], kind):
        issues.append(f"`{key}` must be {label}.")


def validate_answer(
    text: str, *, kind: AnswerKind, request_id: str, role: str
) -> tuple[dict[str, Any] | None, list[str]]:
    """Decode and check a model's answer; returns the answer (defaults filled) and the issues.

    The answer is ``None`` when there are issues. Issue texts name keys, never echo values.
    """
    try:
        answer = _DECODER.decode(text.strip().encode())
    except msgspec.DecodeError:
        return None, ["The answer is not valid JSON: send one JSON object and nothing else."]
    if not isinstance(answer, dict):
        return None, [f"The answer must be a JSON object, not a {type(answer).__name__}."]
    issues: list[str] = []
    if answer.get("request_id") != request_id:
        issues.append(f'`request_id` must be "{request_id}".')
    if answer.get("role") != role:
        issues.append(f'`role` must be "{role}".')
    next_role = answer.get("next_role") or ""
    if not isinstance(next_role, str) or next_role not in ("", *_NEXT_ROLES):
        issues.append(f"`next_role` must be empty or one of: {', '.join(_NEXT_ROLES)}.")
    if kind == "research_decision":
        _check_type(answer, "needed", bool, "true or false", issues)
        if "needed" not in answer:
            issues.append("`needed` is missing (true or false).")
        for key in ("subject", "research_query", "summary"):
            _check_type(answer, key, str, "a string", issues)
        reason = answer.get("reason_code")
        if not isinstance(reason, str) or not reason.strip():
            issues.append("`reason_code` must be a non-empty string.")
        defaults: dict[str, Any] = {"subject": "", "research_query": "", "summary": ""}
    else:
        if answer.get("status") not in RESULT_STATUSES:
            issues.append(f"`status` must be one of: {', '.join(RESULT_STATUSES)}.")
        summary = answer.get("summary")
        if not isinstance(summary, str) or not summary.strip():
            issues.append("`summary` is missing or empty.")
        _check_type(answer, "insights", list, "a list", issues)
        _check_type(answer, "proposals", dict, "an object", issues)
        _check_type(answer, "artifacts", list, "a list of paths", issues)
        if answer.get("error") is not None:
            _check_type(answer, "error", str, "a string", issues)
        defaults = {"insights": [], "proposals": {}, "artifacts": [], "error": ""}
        if kind == "version_control":
            if answer.get("commit_status") not in COMMIT_STATUSES:
                issues.append(f"`commit_status` must be one of: {', '.join(COMMIT_STATUSES)}.")
            for key in ("commit_sha", "commit_message"):
                _check_type(answer, key, str, "a string", issues)
            _check_type(answer, "commit_paths", list, "a list of paths", issues)
            _check_type(answer, "change_detected", bool, "true or false", issues)
            defaults |= {
                "commit_sha": "",
                "commit_message": "",
                "commit_paths": [],
                "change_detected": False,
            }
    if issues:
        return None, issues
    return {**defaults, **answer, "next_role": next_role}, []
