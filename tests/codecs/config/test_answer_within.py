"""``answer_within``, the setting of a person's role (``model.backend: human``): how long its
envelopes wait for an answer before ``on_failure`` handles them (codecs/config/_durations.py)."""

from __future__ import annotations

import re
from typing import Any

import pytest

from teams_runtime.codecs.config import parse_team_config
from teams_runtime.exceptions import ConfigError

PERSON_QA = "roles:\n  qa:\n    model: {backend: human}\n"


def _model(text: str) -> Any:
    return parse_team_config(text, "team_runtime.yaml").model_for("qa")


@pytest.mark.parametrize(
    ("written", "seconds"),
    [
        pytest.param("90", 90.0, id="a-number"),
        pytest.param("2.5", 2.5, id="a-fraction"),
        pytest.param("90s", 90.0, id="seconds"),
        pytest.param("30m", 1800.0, id="minutes"),
        pytest.param("4h", 14_400.0, id="hours"),
        pytest.param("2d", 172_800.0, id="days"),
    ],
)
def test_answer_within_takes_seconds_or_one_unit(written: str, seconds: float) -> None:
    model = _model(f"roles:\n  qa:\n    model: {{backend: human, answer_within: {written}}}\n")
    assert (model.backend, model.answer_within, model.answer_seconds) == (
        "human", seconds, seconds
    )  # fmt: skip
    assert model.structured_output == "off"  # a person gets no response_format


def test_a_person_without_answer_within_waits_without_a_limit() -> None:
    assert _model(PERSON_QA).answer_seconds is None


@pytest.mark.parametrize(
    ("model", "message"),
    [
        pytest.param(
            "{backend: human, answer_within: soon}",
            "team_runtime.yaml roles.qa.model.answer_within must be a duration: seconds as a "
            "number, or a number and one unit (90s, 30m, 4h, 2d).",
            id="not-a-duration",
        ),
        pytest.param(
            "{backend: human, answer_within: 0}",
            "team_runtime.yaml roles.qa.model.answer_within must be greater than 0.",
            id="zero",
        ),
        pytest.param(
            "{backend: human, answer_within: 400d}",
            "team_runtime.yaml roles.qa.model.answer_within must be at most 366d (a year).",
            id="too-long",
        ),
        pytest.param(
            "{backend: human, answer_within: true}",
            "team_runtime.yaml roles.qa.model.answer_within must be a duration: seconds as a "
            "number, or a number and one unit (90s, 30m, 4h, 2d).",
            id="a-boolean",
        ),
        pytest.param(
            "{answer_within: 2h}",
            "team_runtime.yaml roles.qa.model.answer_within is for a person's role: set "
            "model.backend to human with it, or remove it (docs/roles.md).",
            id="not-a-person",
        ),
    ],
)
def test_a_bad_answer_within_is_named_where_it_was_written(model: str, message: str) -> None:
    with pytest.raises(ConfigError, match=f"^{re.escape(message)}$"):
        _model(f"roles:\n  qa:\n    model: {model}\n")
