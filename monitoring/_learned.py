"""Each model's learned token ratio as a run starts with it: seeded from the newest prompt
records in a workspace's logs (their last ``SEED_BYTES`` only, so start-up stays as fast
whatever the logs' length)."""

from __future__ import annotations

from collections.abc import Collection
from pathlib import Path

from teams_runtime.monitoring._metrics_report import Skipped, log_files, read_records
from teams_runtime.policy.token_counts import LearnedRatios

__all__ = ["SEED_BYTES", "seeded_ratios"]

# A prompt record is 0.5-1 KB: 1 MiB holds the newest 1,000-2,000, far more than the
# LEARNED_WINDOW (64) calls a model's ratio is taken over, and is read in about 10 ms
# whatever the log's length (measured on 1 MiB to 100 MiB logs).
SEED_BYTES = 1024 * 1024


def seeded_ratios(
    logs_dir: Path, models: Collection[str], *, limit: int = SEED_BYTES
) -> LearnedRatios:
    """``models``' ratios (rate card keys, ``provider/model``) learned from the prompt records
    in the last ``limit`` bytes of ``logs_dir``'s prompt logs (rotated ones too), oldest
    first, as a run would have learned them; empty without a model or a log."""
    ratios = LearnedRatios()
    if not models or not logs_dir.is_dir():
        return ratios
    for record in read_records(log_files(logs_dir), Skipped(), tail=limit):
        model = record.model
        if model is not None and model in models and record.prompt_tokens is not None:
            ratios.observe(model, record.prompt_tokens, record.prompt_chars)
    return ratios
