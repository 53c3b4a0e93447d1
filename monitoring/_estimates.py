"""How far a token budget's estimates were from the model servers' counts, per model: what
``metrics`` adds when prompt records carry ``prompt_tokens_estimate`` (and nothing otherwise)."""

from __future__ import annotations

import msgspec

from teams_runtime.codecs.prompt_records import PromptRecord

__all__ = ["EstimateAccuracy", "Estimates", "estimates_lines"]


class EstimateAccuracy(msgspec.Struct, frozen=True, kw_only=True):
    """One model's calls whose prompt was estimated and counted by its server: how far the
    estimate was from the count, in percent of the count (p50 and p95 of the distance), and
    how many estimates were under the count (a prompt that may not have fitted)."""

    model: str
    calls: int
    error_p50_pct: float
    error_p95_pct: float
    under: int


def _percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


class Estimates:
    """The estimated-and-counted calls of a report, per model."""

    def __init__(self) -> None:
        self._seen: dict[str, list[tuple[int, int]]] = {}

    def add(self, record: PromptRecord) -> None:
        """Take ``record`` if it has both an estimate and the server's count."""
        estimate, counted = record.prompt_tokens_estimate, record.prompt_tokens
        if estimate is None or not counted:
            return
        self._seen.setdefault(record.model or "unknown", []).append((estimate, counted))

    def accuracy(self) -> list[EstimateAccuracy]:
        """Each model's figures, by model name; empty when no record had an estimate."""
        shown = []
        for model, pairs in sorted(self._seen.items()):
            errors = [abs(estimate - counted) / counted * 100 for estimate, counted in pairs]
            shown.append(
                EstimateAccuracy(
                    model=model,
                    calls=len(pairs),
                    error_p50_pct=round(_percentile(errors, 0.5), 1),
                    error_p95_pct=round(_percentile(errors, 0.95), 1),
                    under=sum(1 for estimate, counted in pairs if estimate < counted),
                )
            )
        return shown


def estimates_lines(accuracy: list[EstimateAccuracy]) -> list[str]:
    """The table's lines for the estimates (none without any)."""
    if not accuracy:
        return []
    lines = ["", "Token estimates against the servers' counts (max_prompt_tokens):"]
    for item in accuracy:
        lines.append(
            f"  {item.model}: {item.calls:,} calls, off by {item.error_p50_pct:g}% (p50), "
            f"{item.error_p95_pct:g}% (p95); {item.under:,} under the count"
        )
    return lines
