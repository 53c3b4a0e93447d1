"""Selection under a token budget: the projection as it is when it fits, else the same events
less those the budget leaves out, by written priorities (docs/compaction.md).

Pure: token counts come in as numbers (the fixed parts', and one per selected event), counted
by whoever knows how (``token_counts``, or a server's tokenizer); nothing here calls a server.

The priorities, first to go first: the oldest backfilled evidence, then the rest of the
backfill, then the tail from its oldest end; the newest event goes last. (Backfill is older
than the tail, so this is the selection's chronological order.) Events stay whole: never cut,
summarised or re-keyed. An event that alone takes more than the budget leaves for events is
left out wherever it stands and named in the notice (index and tokens); it does not take the
older ones with it. Only when the prompt cannot fit even with no event at all does it fail,
before anything is sent, with ``PromptTooLarge``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import msgspec

from teams_runtime.codecs.projection_reply import BudgetNote, OversizedEvent, Projection
from teams_runtime.codecs.request_records import EVENTS_KEY, encode_json, split_raw_list
from teams_runtime.exceptions import PromptTooLarge
from teams_runtime.policy.projection import notice_text
from teams_runtime.policy.prompts import PromptBundle
from teams_runtime.policy.token_counts import TokenRate

__all__ = [
    "Budget",
    "FittedPrompt",
    "FixedTokens",
    "PromptTokens",
    "exceeded_advice",
    "fit_projection",
    "fit_prompt",
    "prompt_too_large",
    "rate_tokens",
]


class Budget(msgspec.Struct, frozen=True, kw_only=True):
    """A budget in force: its tokens, the setting it is written in (named in errors), and the
    model server's window when one is known (named in the advice)."""

    tokens: int
    setting: str = "prompt_context.max_prompt_tokens"
    window: int | None = None


class FixedTokens(msgspec.Struct, frozen=True, kw_only=True):
    """The tokens of a prompt's parts that are not events (nor the notice, which the fit
    measures itself): the brief (the role's template, contract and rules; the chat template
    around them), the request's other fields, and the envelope."""

    brief: int
    record: int
    envelope: int = 0
    # Whether the brief is a role's (its instructions and contract), or only the lines around
    # the record (the record alone, as ``project`` shows it): named so in ``PromptTooLarge``.
    instructions: bool = True

    @property
    def total(self) -> int:
        return self.brief + self.record + self.envelope


class PromptTokens(msgspec.Struct, frozen=True, kw_only=True):
    """A prompt's tokens as counted: its fixed parts, each selected event (its separator
    included), and the rate its notice is measured at (a notice is a few lines of counts)."""

    fixed: FixedTokens
    events: tuple[int, ...]
    notice_rate: TokenRate


def rate_tokens(bundle: PromptBundle, rate: TokenRate) -> PromptTokens:
    """The prompt's tokens at ``rate``, from its parts' sizes (``PromptBundle.sizes``)."""
    sizes = bundle.sizes()
    fixed = FixedTokens(
        brief=rate.tokens(sizes.brief),
        record=rate.tokens(sizes.record),
        envelope=rate.tokens(sizes.envelope),
        instructions=bool(bundle.head),
    )
    return PromptTokens(
        fixed=fixed, events=tuple(rate.tokens(size) for size in sizes.events), notice_rate=rate
    )


@dataclass(frozen=True, slots=True)
class FittedPrompt:
    """A prompt as its budget leaves it, and the tokens it is estimated to take."""

    bundle: PromptBundle
    estimate: int


def fit_prompt(bundle: PromptBundle, budget: Budget, counted: PromptTokens) -> FittedPrompt:
    """``bundle`` itself when it fits ``budget``, else the same prompt on the projection the
    budget leaves; raises ``PromptTooLarge`` when no event can go and it still does not fit."""
    rate = counted.notice_rate
    fitted, estimate = fit_projection(
        bundle.projection,
        budget=budget.tokens,
        fixed=counted.fixed,
        event_tokens=counted.events,
        notice_tokens=lambda candidate: _notice_tokens(candidate, rate),
        setting=budget.setting,
        window=budget.window,
    )
    if fitted is not bundle.projection:
        bundle = bundle.with_projection(fitted)
    return FittedPrompt(bundle, estimate)


def _notice_tokens(projection: Projection, rate: TokenRate) -> int:
    notice = notice_text(projection)
    return rate.tokens(len(notice.encode("utf-8")) + 2) if notice else 0


class _Fit(msgspec.Struct, frozen=True):
    kept: tuple[int, ...]  # positions in the selection, ascending
    oversized: tuple[int, ...]  # positions too large alone, ascending
    used: int  # the kept events' tokens


def _greedy(event_tokens: Sequence[int], room: int, alone: int) -> _Fit:
    """Keep events newest first while they fit in ``room``; one over ``alone`` is oversized
    (left out, named) and the walk goes on; the first that does not fit stops it."""
    kept: list[int] = []
    oversized: list[int] = []
    used = 0
    for position in range(len(event_tokens) - 1, -1, -1):
        tokens = event_tokens[position]
        if tokens > alone:
            oversized.append(position)
            continue
        if used + tokens > room:
            break
        kept.append(position)
        used += tokens
    return _Fit(tuple(reversed(kept)), tuple(reversed(oversized)), used)


def _subset(projection: Projection, fit: _Fit, note: BudgetNote) -> Projection:
    """``projection`` with only the kept events (their bytes as they were) and the note."""
    events = split_raw_list(projection.fields[EVENTS_KEY]) if fit.kept else []
    indices = projection.selected_indices
    kept_indices = {indices[position] for position in fit.kept}
    fields = dict(projection.fields)
    fields[EVENTS_KEY] = encode_json([events[position] for position in fit.kept])
    return msgspec.structs.replace(
        projection,
        selected_indices=tuple(indices[position] for position in fit.kept),
        backfilled=tuple(item for item in projection.backfilled if item.index in kept_indices),
        fields=fields,
        event_sizes=tuple(projection.event_sizes[position] for position in fit.kept),
        budget=note,
    )


def _note(
    projection: Projection, fit: _Fit, event_tokens: Sequence[int], budget: int, estimate: int
) -> BudgetNote:
    indices = projection.selected_indices
    return BudgetNote(
        max_prompt_tokens=budget,
        prompt_tokens_estimate=estimate,
        oversized=tuple(
            OversizedEvent(indices[position], event_tokens[position]) for position in fit.oversized
        ),
    )


def fit_projection(
    projection: Projection,
    *,
    budget: int,
    fixed: FixedTokens,
    event_tokens: Sequence[int],
    notice_tokens: Callable[[Projection], int],
    setting: str = "prompt_context.max_prompt_tokens",
    window: int | None = None,
) -> tuple[Projection, int]:
    """``projection`` itself when its prompt fits ``budget`` tokens, else the projection the
    budget leaves (its notice says so: ``Projection.budget``); with the tokens its prompt is
    estimated to take.

    ``event_tokens`` are the tokens of each selected event (``projection.selected_indices``'
    order, separators included), ``notice_tokens`` measures a candidate's notice. Raises
    ``PromptTooLarge`` when even the prompt without any event is over the budget (naming
    ``setting``, where the budget is written).
    """
    if len(event_tokens) != len(projection.selected_indices):
        raise ValueError("event_tokens must hold one count per selected event")
    whole = fixed.total + notice_tokens(projection) + sum(event_tokens)
    if whole <= budget:
        return projection, whole  # the selection as it is: byte for byte today's
    # The smallest notice (every event left out, none named): an event that does not fit
    # beside it alone is too large for this budget wherever it stands.
    nothing = _Fit((), (), 0)
    reserve = notice_tokens(
        _subset(projection, nothing, _note(projection, nothing, event_tokens, budget, budget))
    )
    alone = budget - fixed.total - reserve
    if alone < 0:  # not even the prompt without any event fits
        raise PromptTooLarge(prompt_too_large(fixed, reserve, budget, setting, window))
    while True:  # the notice grows as events go (counts, oversized ones): a few rounds
        fit = _greedy(event_tokens, budget - fixed.total - reserve, alone)
        # Measured with the estimate at its widest (the budget), so the real one is no longer.
        widest = _subset(projection, fit, _note(projection, fit, event_tokens, budget, budget))
        notice = notice_tokens(widest)
        if notice <= reserve:
            break
        reserve = notice  # grows every round, and no notice is longer than one naming all
    estimate = fixed.total + reserve + fit.used
    if estimate > budget and fit.oversized:
        # Their names took the last of the room: the events too large alone are left out
        # unnamed (the counts still say events were omitted) rather than fail a prompt that fits.
        fit = _Fit(fit.kept, (), fit.used)
        reserve = notice_tokens(
            _subset(projection, fit, _note(projection, fit, event_tokens, budget, budget))
        )
        estimate = fixed.total + reserve + fit.used
    if estimate > budget:
        raise PromptTooLarge(prompt_too_large(fixed, reserve, budget, setting, window))
    note = _note(projection, fit, event_tokens, budget, estimate)
    return _subset(projection, fit, note), estimate


def prompt_too_large(
    fixed: FixedTokens, notice: int, budget: int, setting: str, window: int | None = None
) -> str:
    """Why a prompt cannot fit its budget even without events, each part's size, and what
    would help (content-free: sizes and setting names only). A budget the server's window
    set (``auto``) grows with the window; one written down grows where it is written."""
    brief = (
        f"its brief (the role's instructions and contract) takes about {_tokens(fixed.brief)}"
        if fixed.instructions
        else f"the lines around the record take about {_tokens(fixed.brief)}"
    )
    parts = [brief, f"the request's other fields {fixed.record}"]
    if fixed.envelope:
        parts.append(f"the envelope {fixed.envelope}")
    parts.append(f"the notice {notice}")
    if window is not None:
        larger = (
            f"a model server with a larger context (its window is {_tokens(window)}, less the "
            "answer's reserve; llama.cpp: --ctx-size, llama-cpp-python: --n_ctx)"
        )
    else:
        larger = f"a larger budget ({setting})"
    return (
        f"the prompt cannot fit its budget of {_tokens(budget)} ({setting}) even without any "
        f"event: {', '.join(parts)} ({fixed.total + notice} in all). What would help: "
        f"{larger}, or a shorter request (its result, scope or body)."
    )


def _tokens(count: int) -> str:
    return "1 token" if count == 1 else f"{count} tokens"


def exceeded_advice(projection: Projection) -> str:
    """What would help a prompt a model server said is past its context: a token budget,
    fewer events when ``max_events`` is what bounded them, a larger context."""
    fewer = ", lower prompt_context.max_events" if projection.compacted else ""
    return (
        "give the role a token budget (prompt_context.max_prompt_tokens, a number or auto) so "
        f"events are left out until the prompt fits{fewer}, or start the server with a larger "
        "context (llama.cpp: --ctx-size; llama-cpp-python: --n_ctx)"
    )
