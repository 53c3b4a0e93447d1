"""A role's token budget at run time: resolved (``auto``: the server's window less the
answer's reserve), each prompt counted (the server's tokenizer, else the model's learned ratio,
else the default) and fitted to it before it is sent (``policy.budget``).

Counts are cached so a warm ask stays flat in history length: at a rate, an event's tokens are
its size times the rate (sizes travel with the projection); by a server's tokenizer, each
event's count is kept per request, position and size, and each fixed part's per text.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Hashable
from dataclasses import dataclass

import anyio
import msgspec

from teams_runtime._logs import logger
from teams_runtime.actors.models import ServerFacts, ServerTokenizer, auto_budget
from teams_runtime.codecs.config import ModelConfig, PromptBudget
from teams_runtime.codecs.request_records import EVENTS_KEY, format_event, split_raw_list
from teams_runtime.exceptions import ConfigError
from teams_runtime.policy.budget import (
    Budget,
    FittedPrompt,
    FixedTokens,
    PromptTokens,
    fit_prompt,
    rate_tokens,
)
from teams_runtime.policy.prompts import PromptBundle
from teams_runtime.policy.token_counts import (
    DEFAULT_RATE,
    SERVER_ALLOWANCE,
    LearnedRatios,
    TokenCountMethod,
    TokenRate,
)

__all__ = ["BudgetFacts", "PromptBudgeter"]

_CACHED = 4096  # event counts kept per role (a request's selection is at most max_events)
_FITS = 256  # prompts' fits kept per role


@dataclass(frozen=True, slots=True)
class BudgetFacts:
    """What a prompt record says of the budget: the one in force, the prompt's estimate, and
    how it was counted (all ``None`` without a budget)."""

    max_prompt_tokens: int | None = None
    prompt_tokens_estimate: int | None = None
    token_count_method: TokenCountMethod | None = None


class PromptBudgeter:
    """One role's budget: ``fit`` a prompt to it, ``observe`` the server's counts."""

    def __init__(
        self,
        role: str,
        budget: PromptBudget,
        model: ModelConfig,
        model_key: str,
        *,
        ratios: LearnedRatios | None = None,
        facts: ServerFacts | None = None,
        tokenizer: ServerTokenizer | None = None,
    ) -> None:
        """``facts`` are the run's model servers' windows and tokenizers (``auto``, and the
        ``server`` count); ``tokenizer`` one to count with whatever the server."""
        self._role = role
        self._written = budget
        self._model = model
        self._key = model_key
        self._ratios = ratios if ratios is not None else LearnedRatios()
        self._tokenizer = tokenizer
        self._facts = facts
        self._answer_tokens: int | None = None  # an auto budget's reserve, to send
        self._budget: Budget | None = None
        self._resolved = budget.max_prompt_tokens is None
        # Concurrent first prompts wait for one resolution of `auto` (none goes out unbudgeted
        # while the server is asked its window).
        self._resolving = anyio.Lock()
        if isinstance(budget.max_prompt_tokens, int):
            self._budget = Budget(tokens=budget.max_prompt_tokens, setting=self._setting())
            self._resolved = True
        self._events: OrderedDict[Hashable, int] = OrderedDict()
        self._texts: OrderedDict[str, int] = OrderedDict()
        # The fit of a prompt seen before (a warm ask builds the same prompt anew): by the
        # projection (kept here, so its id stays its own), the head, the envelope, the budget.
        self._fits: OrderedDict[Hashable, tuple[object, FittedPrompt, TokenCountMethod]] = (
            OrderedDict()
        )

    @property
    def budget(self) -> Budget | None:
        """The budget in force (``None``: none, or ``auto`` not resolved yet)."""
        return self._budget

    def _setting(self) -> str:
        if self._written.source == "role":
            return f"roles.{self._role}.prompt_context.max_prompt_tokens"
        return "prompt_context.max_prompt_tokens"

    async def _resolve(self) -> None:
        """``auto``: the server's window less the answer's reserve (``auto_budget``), once;
        without a window known, no budget (said once). Resolved only once it is known."""
        await self._resolve_auto()  # a resolution cut short (a stop) is made again next time
        self._resolved = True

    async def _resolve_auto(self) -> None:
        openai = self._model.openai
        window = None
        if self._facts is not None and openai is not None:
            window = (await self._facts.window(openai)).context_tokens
        problem = "its server's context is not known (set model.openai.context_tokens)"
        if window is not None and openai is not None:
            try:
                auto = auto_budget(window, openai.max_tokens)
            except ConfigError as exc:
                problem = str(exc)
            else:
                self._budget = Budget(
                    tokens=auto.prompt_tokens, setting=self._setting(), window=window
                )
                self._answer_tokens = auto.max_tokens if openai.max_tokens is None else None
                return
        logger.bind(role=self._role).warning(
            "{}: {} is auto, but {}; its prompts are sent without a budget",
            self._role,
            self._setting(),
            problem,
        )

    async def _tokenizer_now(self) -> ServerTokenizer | None:
        if self._tokenizer is not None:
            return self._tokenizer
        openai = self._model.openai
        if self._facts is None or openai is None:
            return None
        return await self._facts.tokenizer(openai)

    def rate(self) -> TokenRate:
        """The rate prompts are counted at when no server counts them."""
        return self._ratios.rate(self._key)

    async def fit(self, bundle: PromptBundle, *, less: int = 0) -> tuple[PromptBundle, BudgetFacts]:
        """``bundle`` fitted to the budget (``less`` tokens under it: a second try after the
        server said it was over). Raises ``PromptTooLarge`` when it cannot fit; without a
        budget, ``bundle`` itself and empty facts."""
        if not self._resolved:
            async with self._resolving:
                if not self._resolved:
                    await self._resolve()
        budget = self._budget
        if budget is None:
            return bundle, BudgetFacts()
        if less:
            budget = msgspec.structs.replace(budget, tokens=max(budget.tokens - less, 1))
        fitted, method = await self._fit(bundle, budget)
        facts = BudgetFacts(
            max_prompt_tokens=budget.tokens,
            prompt_tokens_estimate=fitted.estimate,
            token_count_method=method,
        )
        sent = fitted.bundle
        if self._answer_tokens is not None:  # the reserve the budget left, asked for
            sent = sent.with_projection(sent.projection, sent.notice, self._answer_tokens)
        return sent, facts

    async def _fit(
        self, bundle: PromptBundle, budget: Budget
    ) -> tuple[FittedPrompt, TokenCountMethod]:
        """The fit, from the cache when this very prompt was fitted at this budget and rate."""
        tokenizer = await self._tokenizer_now()
        rate = self.rate() if tokenizer is None else None
        key = (
            id(bundle.projection),
            bundle.head,
            bundle.envelope_text(),
            budget.tokens,
            rate.tokens_per_byte if rate else None,
        )
        cached = self._fits.get(key)
        if cached is not None and cached[0] is bundle.projection:
            _, known, method = cached
            if known.bundle.projection is bundle.projection:
                return FittedPrompt(bundle, known.estimate), method
            notice = known.bundle.notice
            again = bundle.with_projection(known.bundle.projection, notice=notice)
            return FittedPrompt(again, known.estimate), method
        counted, method = await self._count(bundle, tokenizer)
        fitted = fit_prompt(bundle, budget, counted)
        self._fits[key] = (bundle.projection, fitted, method)
        while len(self._fits) > _FITS:
            self._fits.popitem(last=False)
        return fitted, method

    async def _count(
        self, bundle: PromptBundle, tokenizer: ServerTokenizer | None
    ) -> tuple[PromptTokens, TokenCountMethod]:
        if tokenizer is not None:
            try:
                return await self._server_tokens(bundle, tokenizer), "server"
            except Exception as exc:  # the server could not count: the rate does instead
                logger.bind(role=self._role).debug(
                    "{}: the tokenizer did not count ({})", self._role, type(exc).__name__
                )
                if self._facts is not None and self._model.openai is not None:
                    self._facts.forget_tokenizer(self._model.openai)  # looked for again
        rate = self.rate()
        return rate_tokens(bundle, rate), rate.method

    def observe(self, prompt_tokens: int | None, prompt_chars: int) -> None:
        """The server reported ``prompt_tokens`` for a prompt of ``prompt_chars``: learned."""
        if prompt_tokens is not None:
            self._ratios.observe(self._key, prompt_tokens, prompt_chars)

    def correct(self, prompt_tokens: int, prompt_size: int) -> None:
        """The server counted ``prompt_tokens`` for a prompt estimated lower: corrected."""
        self._ratios.correct(self._key, prompt_tokens, prompt_size)

    async def _text_tokens(self, tokenizer: ServerTokenizer, text: str) -> int:
        tokens = self._texts.get(text)
        if tokens is None:
            tokens = await tokenizer.count(text) if text else 0
            self._texts[text] = tokens
            while len(self._texts) > _CACHED:
                self._texts.popitem(last=False)
        return tokens

    async def _server_tokens(
        self, bundle: PromptBundle, tokenizer: ServerTokenizer
    ) -> PromptTokens:
        projection = bundle.projection
        fixed = FixedTokens(
            brief=await self._text_tokens(tokenizer, bundle.brief_text()) + SERVER_ALLOWANCE,
            record=await self._text_tokens(tokenizer, bundle.record_frame_text()),
            envelope=await self._text_tokens(tokenizer, bundle.envelope_text()),
        )
        keys = [
            (projection.request_id, index, size)
            for index, size in zip(projection.selected_indices, projection.event_sizes, strict=True)
        ]
        raws = None
        events = []
        for position, key in enumerate(keys):
            tokens = self._events.get(key)
            if tokens is None:
                if raws is None:  # only for an event not counted yet
                    raws = split_raw_list(projection.fields[EVENTS_KEY])
                text = format_event(raws[position]).decode("utf-8")
                tokens = await tokenizer.count(text) + 1  # its separator
                self._events[key] = tokens
                while len(self._events) > _CACHED:
                    self._events.popitem(last=False)
            events.append(tokens)
        return PromptTokens(fixed=fixed, events=tuple(events), notice_rate=DEFAULT_RATE)
