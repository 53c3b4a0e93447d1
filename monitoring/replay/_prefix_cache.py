"""What a prompt cache could serve of each prompt: the longest common prefix (in characters)
with any prompt sent before it to the same server within the cache lifetime, from the same role
and from any role.

The longest prefix a text shares with any of a set is the one it shares with a neighbour of
it in the set's sorted order, so each lookup is a binary search and two comparisons, whatever
the number of prompts alive in the cache. A prompt lives ``ttl`` seconds from when it was sent
(a hit does not extend it: the figure errs low against caches that refresh on use).
"""

from __future__ import annotations

from bisect import bisect_left, insort
from collections import deque
from typing import NamedTuple

__all__ = ["PrefixCache", "Served", "common_prefix"]

_BLOCK = 4096  # characters compared at once before the search within the block that differs


def common_prefix(first: str, second: str) -> int:
    """The length of the longest common prefix of two texts, in characters."""
    most = min(len(first), len(second))
    start = 0
    while start < most and first[start : start + _BLOCK] == second[start : start + _BLOCK]:
        start += _BLOCK
    if start >= most:
        return most
    low, high = start, min(start + _BLOCK, most)  # first[:low] == second[:low]; differs by high
    while low < high:
        middle = (low + high + 1) // 2
        if first[low:middle] == second[low:middle]:
            low = middle
        else:
            high = middle - 1
    return low


class _Window:
    """The prompts alive in one cache: in the order sent (to expire them) and sorted (to find
    a text's neighbours)."""

    def __init__(self) -> None:
        self._sent: deque[tuple[float, str, int]] = deque()
        self._sorted: list[tuple[str, int]] = []

    def expire(self, before: float) -> None:
        while self._sent and self._sent[0][0] < before:
            _, text, number = self._sent.popleft()
            del self._sorted[bisect_left(self._sorted, (text, number))]

    def longest(self, text: str) -> int:
        position = bisect_left(self._sorted, (text, -1))
        best = 0
        for neighbour in self._sorted[max(position - 1, 0) : position + 1]:
            best = max(best, common_prefix(text, neighbour[0]))
        return best

    def add(self, when: float, text: str, number: int) -> None:
        self._sent.append((when, text, number))
        insort(self._sorted, (text, number))


class Served(NamedTuple):
    """The characters of a prompt a cache could serve: from any earlier prompt, and from the
    same role's alone."""

    any_role: int
    same_role: int


class PrefixCache:
    """Prompt caches, one per model server, with a lifetime of ``ttl`` seconds."""

    def __init__(self, ttl: float) -> None:
        self.ttl = ttl
        self._servers: dict[str, _Window] = {}
        self._roles: dict[tuple[str, str], _Window] = {}
        self._sent = 0

    def send(self, server: str, role: str, when: float, text: str) -> Served:
        """What the caches could serve of ``text`` sent by ``role`` to ``server`` at ``when``
        (seconds); then it is kept for the prompts after it. Prompts come in the order sent."""
        every = self._servers.setdefault(server, _Window())
        own = self._roles.setdefault((server, role), _Window())
        for window in (every, own):
            window.expire(when - self.ttl)
        same = own.longest(text)
        served = Served(max(every.longest(text), same), same)
        self._sent += 1
        every.add(when, text, self._sent)
        own.add(when, text, self._sent)
        return served
