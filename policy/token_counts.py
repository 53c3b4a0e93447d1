"""How many tokens a prompt's parts take when no server counts them: a conservative default
rate, or each model's own rate learned from its prompt records (pure: numbers in, numbers out).

Every size here is UTF-8 bytes: a character outside ASCII counts as its bytes, which errs on
the safe side (tokenizers split rare scripts into byte tokens), and lets a prompt be measured
from the event sizes a projection carries, without a decode.

- ``default`` (``DEFAULT_CHARS_PER_TOKEN``, 2.5): the rate of a model nothing is known of yet.
  Tokenizers take about 4 characters a token of English prose and about 3 of pretty-printed
  JSON and code (a prompt is mostly the latter), and counts differ by up to 1.6x between
  tokenizers (tiktoken undercounts Claude by 1.63x); 2.5 over-counts every one we know of, so a
  prompt it lets through fits, at the price of events left out that would have fitted.
- ``learned``: a model's own ratio of the ``prompt_tokens`` its server reported to the
  ``prompt_chars`` the role sent, over its last ``LEARNED_WINDOW`` answered calls (at least
  ``LEARNED_AFTER``): their median plus ``LEARNED_MARGIN`` (5%). The template a server wraps a
  prompt in is inside the ratio. A server that still says "context exceeded" corrects it: the
  ratio it showed becomes the model's floor.
- ``server``: the server's own tokenizer (``actors.models.find_tokenizer``) counts each part;
  ``SERVER_ALLOWANCE`` tokens are added for the chat template around the prompt.
"""

from __future__ import annotations

import math
import re
import statistics
from collections import deque

import msgspec

from teams_runtime.codecs.prompt_records import TokenCountMethod

__all__ = [
    "DEFAULT_CHARS_PER_TOKEN",
    "DEFAULT_RATE",
    "LEARNED_AFTER",
    "LEARNED_MARGIN",
    "LEARNED_WINDOW",
    "SERVER_ALLOWANCE",
    "TOKEN_COUNT_METHODS",
    "LearnedRatios",
    "TokenCountMethod",
    "TokenRate",
    "server_overshoot",
    "server_prompt_tokens",
]

TOKEN_COUNT_METHODS: tuple[TokenCountMethod, ...] = ("server", "learned", "default")

DEFAULT_CHARS_PER_TOKEN = 2.5
LEARNED_MARGIN = 0.05
LEARNED_WINDOW = 64
LEARNED_AFTER = 3
SERVER_ALLOWANCE = 32


class TokenRate(msgspec.Struct, frozen=True):
    """Tokens per byte of prompt, and how that figure was come by."""

    tokens_per_byte: float
    method: TokenCountMethod

    def tokens(self, size: int) -> int:
        """The tokens ``size`` bytes are taken to be (rounded up: never under)."""
        return math.ceil(size * self.tokens_per_byte) if size > 0 else 0


DEFAULT_RATE = TokenRate(1 / DEFAULT_CHARS_PER_TOKEN, "default")


class LearnedRatios:
    """Each model's ratio of reported prompt tokens to prompt characters, from its calls (a
    model is named by its rate card key, ``provider/model``)."""

    def __init__(self) -> None:
        self._seen: dict[str, deque[float]] = {}
        self._floor: dict[str, float] = {}

    def observe(self, model: str, prompt_tokens: int, prompt_chars: int) -> None:
        """Take one answered call's counts (``prompt_tokens`` as its server reported them)."""
        if prompt_tokens <= 0 or prompt_chars <= 0:
            return
        seen = self._seen.setdefault(model, deque(maxlen=LEARNED_WINDOW))
        seen.append(prompt_tokens / prompt_chars)

    def correct(self, model: str, prompt_tokens: int, prompt_size: int) -> None:
        """A prompt of ``prompt_size`` bytes took ``prompt_tokens`` by its server's count, more
        than it was estimated to: no estimate of the model's goes under that ratio again."""
        if prompt_tokens <= 0 or prompt_size <= 0:
            return
        ratio = prompt_tokens / prompt_size
        self._floor[model] = max(self._floor.get(model, 0.0), ratio)
        self.observe(model, prompt_tokens, prompt_size)

    def rate(self, model: str) -> TokenRate:
        """The model's learned rate with its margin, else the default (too few calls yet)."""
        seen = self._seen.get(model)
        floor = self._floor.get(model, 0.0)
        if seen is None or len(seen) < LEARNED_AFTER:
            if floor:
                return TokenRate(max(floor, DEFAULT_RATE.tokens_per_byte), "default")
            return DEFAULT_RATE
        learned = statistics.median(seen) * (1 + LEARNED_MARGIN)
        return TokenRate(max(learned, floor), "learned")


# How servers say how many tokens a prompt took when it was over their context: llama.cpp's
# `"n_prompt_tokens": 5000`, its message `request (5000 tokens) exceeds`, OpenAI's and vLLM's
# `your messages resulted in 5000 tokens` or `you requested 5000 tokens (4000 in the messages`.
_SAID_TOKENS = (
    re.compile(r'"n_prompt_tokens"\s*:\s*(\d+)'),
    re.compile(r"request \((\d+) tokens\) exceeds"),
    re.compile(r"(\d+) in the messages"),
    re.compile(r"messages resulted in (\d+) tokens"),
    re.compile(r"you requested (\d+) tokens"),
)


def server_prompt_tokens(said: str) -> int | None:
    """The prompt's tokens as a server's "context exceeded" answer counts them, if it says."""
    for pattern in _SAID_TOKENS:
        found = pattern.search(said)
        if found:
            return int(found.group(1))
    return None


# How far over its context a server says a prompt was: llama.cpp's `n_prompt_tokens` and
# `n_ctx`, OpenAI's and vLLM's `maximum context length is C tokens. However, you requested R
# tokens` (prompt and answer) or `your messages resulted in P tokens`.
_SAID_WINDOW = (
    re.compile(r'"n_ctx"\s*:\s*(\d+)'),
    re.compile(r"maximum context length is (\d+) tokens"),
)
_SAID_ASKED = (
    re.compile(r'"n_prompt_tokens"\s*:\s*(\d+)'),
    re.compile(r"you requested (\d+) tokens"),
    re.compile(r"messages resulted in (\d+) tokens"),
)


def server_overshoot(said: str) -> int | None:
    """The tokens a server's "context exceeded" answer says the request was over its context
    by, if it says both figures."""
    window = next((int(m.group(1)) for p in _SAID_WINDOW if (m := p.search(said))), None)
    asked = next((int(m.group(1)) for p in _SAID_ASKED if (m := p.search(said))), None)
    if window is None or asked is None or asked <= window:
        return None
    return asked - window
