"""The replay: every model call the prompt records show, its prompt rebuilt under each policy
and layout asked for (no model called), and the figures added up per (policy, layout).

Approximate by nature: a prompt record keeps counts, not text, so a hop's prompt is rebuilt
from the events up to it (``total_events``, still in the record), the record's other fields as
they are now (``result``, ``status``, ``updated_at`` at that hop are gone) and the envelope
``prompt`` would rebuild from them (a repair's errors as an empty reply's).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import NamedTuple

from teams_runtime.codecs.config import PromptContextConfig, RateCard, TeamConfig
from teams_runtime.codecs.prompt_names import KIND_NAMES, PromptKind
from teams_runtime.codecs.prompt_records import PromptRecord
from teams_runtime.exceptions import PromptTooLarge, RecordError
from teams_runtime.monitoring.replay._layouts import Layout
from teams_runtime.monitoring.replay._policies import Policy, configured_budget
from teams_runtime.monitoring.replay._prefix_cache import PrefixCache
from teams_runtime.monitoring.replay._request_views import RequestView, envelope_from
from teams_runtime.monitoring.replay._rows import ReplayRow, RowSums
from teams_runtime.policy.budget import fit_prompt, rate_tokens
from teams_runtime.policy.pricing import input_cost, rate_key
from teams_runtime.policy.prompt_previews import preview_prompt
from teams_runtime.policy.prompts import PromptBundle
from teams_runtime.policy.token_counts import LearnedRatios, TokenRate

__all__ = [
    "DEFAULT_CACHE_TTL",
    "Observer",
    "ReplayReport",
    "ReplaySetup",
    "ReplayedPrompt",
    "replay",
]

# Five minutes: the lifetime of Anthropic's default prompt cache and about OpenAI's (5-10
# minutes idle); a local server keeps its last prompt until the next one replaces it.
DEFAULT_CACHE_TTL = 300.0


@dataclass(frozen=True)
class ReplaySetup:
    """What a replay prices and counts by: the team's config, the rate cards, each model's
    learned token ratio (the budget's ``learned`` rate; the default without one), the cache
    lifetime in seconds."""

    config: TeamConfig
    cards: Mapping[str, RateCard]
    ratios: LearnedRatios
    ttl: float = DEFAULT_CACHE_TTL


@dataclass
class ReplayReport:
    """The rows, and what was read: calls, those replayed, and those left out and why."""

    rows: list[ReplayRow]
    calls: int = 0
    replayed: int = 0
    without_record: int = 0  # the request's record is gone (or was not given)
    past_record: int = 0  # the record holds fewer events than the call saw
    recorded_chars: int = 0  # the replayed calls' prompt_chars, as their records say
    other_layout: int = 0  # calls laid out in a layout not asked for (not in `recorded` rows)
    rates: dict[str, TokenRate] = field(default_factory=dict)  # by model: how tokens counted
    step: int | None = None  # the shared_prefix rows' step (None: no such row)


@dataclass
class _Call:
    """One recorded call as the rows share it: its request, prompt kind, model and time."""

    record: PromptRecord
    view: RequestView
    kind: PromptKind
    model: str
    server: str
    when: float
    rate: TokenRate
    card: RateCard | None


def _seconds(timestamp: str, before: float) -> float:
    try:
        return datetime.fromisoformat(timestamp).timestamp()
    except ValueError:  # not a record we wrote: taken as sent with the call before it
        return before


def _server_of(config: TeamConfig, role: str, model: str) -> str:
    """The cache a call reads: its model server (``base_url``) and model when the role's
    config still names that model, else the model's rate card key alone."""
    configured = config.model_for(role)
    if configured.openai is not None and rate_key(configured) == model:
        return f"{configured.openai.base_url} {model}"
    return model


class _Calls:
    """The calls of the records, each request's record read once (``load``: its bytes, or
    ``None`` when it has none)."""

    def __init__(self, setup: ReplaySetup, load: Callable[[str], bytes | None]) -> None:
        self._setup = setup
        self._load = load
        self._views: dict[str, RequestView | None] = {}

    def view(self, request_id: str) -> RequestView | None:
        if request_id not in self._views:
            data = self._load(request_id) if request_id else None
            try:
                self._views[request_id] = RequestView(request_id, data) if data else None
            except RecordError:
                self._views[request_id] = None
        return self._views[request_id]

    def calls(self, records: Iterable[PromptRecord], report: ReplayReport) -> list[_Call]:
        config, when = self._setup.config, 0.0
        calls = []
        for record in records:
            report.calls += 1
            when = _seconds(record.timestamp, when)
            view = self.view(record.request_id)
            kind = KIND_NAMES.get(record.purpose)
            if view is None or kind is None:
                report.without_record += 1
                continue
            if record.total_events > view.event_count:
                report.past_record += 1
                continue
            model = record.model or rate_key(config.model_for(record.role))
            rate = report.rates.setdefault(model, self._setup.ratios.rate(model))
            card = self._setup.cards.get(model) if config.telemetry.enabled else None
            server = _server_of(config, record.role, model)
            calls.append(_Call(record, view, kind, model, server, when, rate, card))
            report.recorded_chars += record.prompt_chars
        calls.sort(key=lambda call: call.when)  # stable: the logs' order among equal times
        report.replayed = len(calls)
        return calls


def _base_bundle(call: _Call, config: TeamConfig) -> PromptBundle:
    """The call's prompt under the config's own projection: its head and envelope, which
    every policy's and layout's prompt shares."""
    projection = call.view.projection(call.record.total_events, config.prompt_context)
    role, cast = call.record.role, config.cast
    request_id = projection.request_id or call.record.request_id
    envelope = envelope_from(projection, request_id, role)
    return preview_prompt(call.kind, role=role, projection=projection, envelope=envelope, cast=cast)


def _estimate(bundle: PromptBundle, rate: TokenRate) -> int:
    """The prompt's tokens as the budget counts them: each part at ``rate``, rounded up."""
    sizes = bundle.sizes()
    parts = (sizes.brief, sizes.record, sizes.envelope, sizes.notice, *sizes.events)
    return sum(rate.tokens(size) for size in parts)


class ReplayedPrompt(NamedTuple):
    """One prompt a replay rebuilt: the call it stands for, its policy and layout, its text."""

    record: PromptRecord
    policy: str
    layout: str
    text: str


Observer = Callable[[ReplayedPrompt], None]


@dataclass
class _Row:
    policy: Policy
    layout: Layout
    cache: PrefixCache
    sums: RowSums = field(default_factory=RowSums)

    def context(self, call: _Call, config: TeamConfig) -> PromptContextConfig | None:
        """The ``prompt_context`` the call's prompt is projected under in this row; ``None``
        when the row does not replay it (``recorded``: a call laid out otherwise)."""
        context = self.policy.context_for(config, call.record)
        if self.policy.kind == "recorded":  # the call's own layout and step, as it was sent
            return context if context.layout == self.layout.name else None
        return self.layout.context(context, config.prompt_context.step)

    def replay(
        self, call: _Call, base: PromptBundle, config: TeamConfig, observe: Observer | None
    ) -> None:
        record, sums = call.record, self.sums
        context = self.context(call, config)
        if context is None:
            return
        bundle = base.with_projection(call.view.projection(record.total_events, context))
        estimate = _estimate(bundle, call.rate)
        budget = self.policy.budget_for(config, record)
        over = budget or configured_budget(config, record.role)  # a budget set, if not applied
        sums.prompts += 1
        if over is not None:
            sums.budgeted += 1
            sums.overflows += estimate > over.tokens
        if budget is not None and estimate > budget.tokens:
            try:
                fitted = fit_prompt(bundle, budget, rate_tokens(bundle, call.rate))
            except PromptTooLarge:  # never sent: a run fails the call before sending it
                sums.too_large += 1
                return
            bundle, estimate = fitted.bundle, fitted.estimate
        text = bundle.text()
        if observe is not None:
            observe(ReplayedPrompt(record, self.policy.name, self.layout.name, text))
        served = self.cache.send(call.server, record.role, call.when, _known(text, bundle))
        cached = min(_prefix_tokens(text, served.any_role, call.rate), estimate)
        same = min(_prefix_tokens(text, served.same_role, call.rate), cached)
        sums.add_prompt(len(text), estimate, cached, same, bundle.projection.included_events)
        if self.policy.kind == "recorded":
            sums.add_measured(record, estimate, cached)
        newest = call.view.newest_evidence(record.total_events)
        selected = set(bundle.projection.selected_indices)
        sums.evidence_pairs += len(newest)
        sums.evidence_kept += sum(index in selected for index in newest.values())
        if call.card is not None and call.card.input_per_million_usd is not None:
            sums.priced += 1
            sums.cost += input_cost(call.card, estimate, cached)


# Where a repair prompt shows the answer it repairs: replay does not have that answer (it
# rebuilds the repair of an empty one), so what follows is not what the server saw.
_REJECTED = "Previous invalid payload:\n"


def _known(text: str, bundle: PromptBundle) -> str:
    """``text`` as far as replay knows it was sent: a repair up to the rejected answer it
    shows (another prompt could share no more with the one sent), any other whole."""
    head, marker, _ = bundle.head.partition(_REJECTED)
    if bundle.kind != "repair" or not marker:
        return text
    start = text.find(head)
    return text if start < 0 else text[: start + len(head) + len(marker)]


def _prefix_tokens(text: str, chars: int, rate: TokenRate) -> int:
    """The tokens of ``text``'s first ``chars`` characters at ``rate`` (by their UTF-8 size)."""
    size = chars if text.isascii() else len(text[:chars].encode("utf-8"))
    return rate.tokens(size)


def _rows(policies: Sequence[Policy], layouts: Sequence[Layout], ttl: float) -> list[_Row]:
    """A row per (policy, layout). The ``recorded`` rows share one cache: each call is in the
    row of its own layout, so together they are the calls as they were sent."""
    sent = PrefixCache(ttl)
    return [
        _Row(policy, layout, sent if policy.kind == "recorded" else PrefixCache(ttl))
        for policy in policies
        for layout in layouts
    ]


def replay(
    records: Iterable[PromptRecord],
    load: Callable[[str], bytes | None],
    policies: Sequence[Policy],
    layouts: Sequence[Layout],
    setup: ReplaySetup,
    observe: Observer | None = None,
) -> ReplayReport:
    """Replay the calls of ``records`` under every (policy, layout) pair; ``load`` gives a
    request's record bytes (``None``: it has none); ``observe``, if given, sees every prompt
    rebuilt. No model is called, nothing is written."""
    report = ReplayReport(rows=[])
    calls = _Calls(setup, load).calls(records, report)
    rows = _rows(policies, layouts, setup.ttl)
    config = setup.config
    if any(policy.kind == "recorded" for policy in policies):
        asked = {layout.name for layout in layouts}
        report.other_layout = sum((call.record.layout or "upstream") not in asked for call in calls)
    for call in calls:
        base = _base_bundle(call, config)
        for row in rows:
            row.replay(call, base, config, observe)
    report.rows = [row.sums.row(row.policy.name, row.layout.name) for row in rows]
    shared = [layout for layout in layouts if layout.name == "shared_prefix"]
    report.step = (shared[0].step or config.prompt_context.step) if shared else None
    return report
