"""A run's learned token ratios seeded from the workspace's prompt log: the newest records
only, within a bound, whole lines, rotated files too (``monitoring._learned``)."""

from __future__ import annotations

from pathlib import Path

from teams_runtime.codecs.prompt_records import encode_prompt_record
from teams_runtime.monitoring import PROMPT_LOG_NAME, seeded_ratios
from teams_runtime.policy.token_counts import DEFAULT_RATE, LEARNED_MARGIN

from ..support.prompt_records import prompt_record

MODEL = "openai/fake-coder"


def _line(prompt_tokens: int | None, *, model: str = MODEL, chars: int = 1000) -> str:
    record = prompt_record(
        backfilled_roles=[], prompt_chars=chars, model=model, prompt_tokens=prompt_tokens
    )
    return encode_prompt_record(record) + "\n"


def _ratio(logs: Path, **limit: int) -> float:
    return seeded_ratios(logs, {MODEL}, **limit).rate(MODEL).tokens_per_byte


def test_the_models_ratio_is_learned_from_its_records_and_no_others(tmp_path: Path) -> None:
    (tmp_path / PROMPT_LOG_NAME).write_text(
        _line(300) * 4 + _line(900, model="openai/other") * 4 + _line(None) * 4
    )
    ratios = seeded_ratios(tmp_path, {MODEL})
    assert ratios.rate(MODEL).method == "learned"
    assert ratios.rate(MODEL).tokens_per_byte == 0.3 * (1 + LEARNED_MARGIN)
    assert ratios.rate("openai/other") == DEFAULT_RATE  # not asked for: not read into it


def test_only_the_newest_bytes_are_read_from_a_whole_line_on(tmp_path: Path) -> None:
    old, new = _line(500), _line(250)
    (tmp_path / PROMPT_LOG_NAME).write_text(old * 50 + new * 5)
    assert _ratio(tmp_path) == 0.5 * (1 + LEARNED_MARGIN)  # the median of the whole log
    # The bound falls inside the last old line: it is passed over, not read torn.
    assert _ratio(tmp_path, limit=len(new) * 5 + 10) == 0.25 * (1 + LEARNED_MARGIN)
    assert _ratio(tmp_path, limit=len(new) * 2) == DEFAULT_RATE.tokens_per_byte  # too few


def test_rotated_logs_fill_the_bound_the_live_one_leaves(tmp_path: Path) -> None:
    stem, suffix = PROMPT_LOG_NAME.rsplit(".", 1)
    line = _line(200)
    (tmp_path / f"{stem}.2026-11-29_08-00-00_000000.{suffix}").write_text(_line(900) * 9 + line * 3)
    (tmp_path / PROMPT_LOG_NAME).write_text(line * 2)
    assert _ratio(tmp_path, limit=len(line) * 5) == 0.2 * (1 + LEARNED_MARGIN)
    assert _ratio(tmp_path) == 0.9 * (1 + LEARNED_MARGIN)  # the rotated one whole


def test_no_log_and_no_model_read_nothing(tmp_path: Path) -> None:
    assert _ratio(tmp_path / "absent") == DEFAULT_RATE.tokens_per_byte
    (tmp_path / PROMPT_LOG_NAME).write_text(_line(300) * 4)
    assert seeded_ratios(tmp_path, set()).rate(MODEL) == DEFAULT_RATE
