"""The benchmark suite: our paths against the naive baseline, measured in the same run.

    python tests/benchmarks/run.py            # the full table (about two minutes on 2 cores)
    python tests/benchmarks/run.py --quick    # without the 100,000-event sizes

Every row times our path and the plain way (json.load of the record, the five steps on dicts,
json.dump for writes) on the same generated files, and reports medians and their ratio. The
machine is shared and noisy: the ratios are the headline, not the absolute times.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio

from teams_runtime import PromptContextConfig, open_context
from teams_runtime.actors.store import create_record
from teams_runtime.codecs.records import encode_record
from teams_runtime.samples import sample_record
from teams_runtime.workspace import Workspace


def _load_reference() -> Callable[..., list[int] | None]:
    # The plain five steps the tests compare against. Loaded by path: putting the repository
    # root on sys.path would let its `codecs/` shadow the standard library.
    path = Path(__file__).resolve().parents[1] / "reference.py"
    spec = importlib.util.spec_from_file_location("teams_runtime_reference", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    select: Callable[..., list[int] | None] = module.reference_select
    return select


reference_select = _load_reference()

CONFIG = PromptContextConfig()


@dataclass
class Row:
    name: str
    ours: str
    naive: str
    ratio: str
    target: str
    met: bool | None


def _median(samples: list[float]) -> float:
    return statistics.median(samples)


def _time(call: Callable[[], Any], repeat: int) -> float:
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        call()
        samples.append(time.perf_counter() - start)
    return _median(samples)


async def _atime(call: Callable[[], Awaitable[Any]], repeat: int) -> float:
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        await call()
        samples.append(time.perf_counter() - start)
    return _median(samples)


def _fmt(seconds: float) -> str:
    if seconds >= 1:
        return f"{seconds:.2f} s"
    if seconds >= 1e-3:
        return f"{seconds * 1e3:.2f} ms"
    return f"{seconds * 1e6:.1f} us"


# --- the naive baseline ------------------------------------------------------------------


def naive_project(path: Path) -> dict[str, Any]:
    """The plain way: load the whole record, run the five steps on dicts."""
    with open(path, encoding="utf-8") as handle:
        record: dict[str, Any] = json.load(handle)
    events = record["events"]
    selected = reference_select(events, CONFIG.enabled, CONFIG.recent_events, CONFIG.max_events)
    assert selected is not None
    return {**record, "events": [events[i] for i in selected]}


def naive_append(path: Path, event: dict[str, Any]) -> None:
    """The plain way: load, append, dump the whole file (temp + fsync + replace)."""
    with open(path, encoding="utf-8") as handle:
        record = json.load(handle)
    record["events"].append(event)
    temp = path.with_suffix(".naive.tmp")
    with open(temp, "w", encoding="utf-8") as handle:
        json.dump(record, handle, indent=2, ensure_ascii=False)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(temp, path)


# --- the rows ----------------------------------------------------------------------------


def _make_workspace(root: Path, sizes: list[int]) -> Workspace:
    """Records as teams-runtime writes them (with an index), plus copies without one."""
    workspace = Workspace(root)
    for size in sizes:
        record = sample_record(size, f"req-{size}")
        create_record(workspace.record_paths(f"req-{size}"), record)
        record["request_id"] = f"plain-{size}"
        workspace.request_path(f"plain-{size}").write_bytes(encode_record(record))
    return workspace


def _repeat(size: int, base: int) -> int:
    return max(3, min(base, base * 10_000 // max(size, 1)))


async def projection_rows(workspace: Workspace, sizes: list[int]) -> list[Row]:
    rows: list[Row] = []
    warm: dict[int, float] = {}
    for size in sizes:
        request_id = f"req-{size}"
        path = workspace.request_path(request_id)
        naive = _time(lambda path=path: naive_project(path), _repeat(size, 15))

        async def cold(request_id: str = request_id) -> None:
            async with open_context(workspace.root, CONFIG) as ctx:
                await ctx.project(request_id, role="qa")

        # A fresh actor per sample: nothing is cached in memory.
        cold_time = await _atime(cold, _repeat(size, 15))
        parse_time = await _atime(
            lambda size=size: cold(f"plain-{size}"), _repeat(size, 15)
        )  # a record another program wrote: no index, the whole file is parsed
        async with open_context(workspace.root, CONFIG) as ctx:
            await ctx.project(request_id, role="qa")
            warm[size] = await _atime(
                lambda ctx=ctx, request_id=request_id: ctx.project(request_id, role="qa"), 2000
            )
        cold_ratio = naive / cold_time
        cold_target = "cold >= 5x naive" if size == 10_000 else ""
        rows.append(Row(f"cold projection from file, {size:,} events", _fmt(cold_time),
                        _fmt(naive), f"{cold_ratio:.1f}x", cold_target,
                        cold_ratio >= 5 if cold_target else None))  # fmt: skip
        parse_ratio = f"{naive / parse_time:.1f}x"
        rows.append(Row(f"cold, record without index (parsed), {size:,} events",
                        _fmt(parse_time), _fmt(naive), parse_ratio, "", None))  # fmt: skip
        warm_ratio = naive / warm[size]
        warm_target = "warm >= 100x naive" if size == 10_000 else ""
        rows.append(Row(f"warm ask (unchanged record), {size:,} events", _fmt(warm[size]),
                        _fmt(naive), f"{warm_ratio:.0f}x", warm_target,
                        warm_ratio >= 100 if warm_target else None))  # fmt: skip
    largest = max(sizes)
    flat = warm[largest] / warm[min(sizes)]
    rows.append(Row(f"warm ask at {largest:,} vs at {min(sizes):,} events", _fmt(warm[largest]),
                    _fmt(warm[min(sizes)]), f"{flat:.2f}x", "<= 3x (flat in history length)",
                    flat <= 3))  # fmt: skip
    return rows


async def append_row(workspace: Workspace, size: int) -> Row:
    request_id = f"req-{size}"
    ours_path = workspace.request_path(request_id)
    naive_path = ours_path.with_name("naive-copy.json")
    naive_path.write_bytes(ours_path.read_bytes())
    event = {"type": "note", "actor": "qa", "summary": "benchmark append", "payload": {"n": 1}}
    naive = _time(lambda: naive_append(naive_path, dict(event)), 10)
    async with open_context(workspace.root, CONFIG) as ctx:
        await ctx.project(request_id, role="qa")
        ours = await _atime(lambda: ctx.append_event(request_id, dict(event)), 10)
    ratio = naive / ours
    return Row(f"append to a {size:,}-event record", _fmt(ours), _fmt(naive), f"{ratio:.1f}x",
               "append >= 3x naive", ratio >= 3)  # fmt: skip


# --- the table ---------------------------------------------------------------------------


def print_table(rows: list[Row]) -> None:
    headers = ("row", "ours", "naive", "ratio", "target", "met")
    verdicts = {None: "", True: "yes", False: "NO"}
    cells = [(r.name, r.ours, r.naive, r.ratio, r.target, verdicts[r.met]) for r in rows]
    widths = [max(len(str(c[i])) for c in [headers, *cells]) for i in range(len(headers))]
    line = " | ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True))
    print(f"| {line} |")
    print("|" + "|".join("-" * (w + 2) for w in widths) + "|")
    for cell in cells:
        print("| " + " | ".join(str(c).ljust(w) for c, w in zip(cell, widths, strict=True)) + " |")


async def main(quick: bool) -> int:
    sizes = [100, 10_000] if quick else [100, 10_000, 100_000]
    with tempfile.TemporaryDirectory(prefix="teams-runtime-bench-") as folder:
        workspace = _make_workspace(Path(folder), sizes)
        rows = await projection_rows(workspace, sizes)
        rows.append(await append_row(workspace, 10_000))
    print_table(rows)
    missed = [row.name for row in rows if row.met is False]
    if missed:
        print(f"\nmissed targets: {len(missed)}")
    return 0


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="skip the 100,000-event sizes")
    args = parser.parse_args()
    raise SystemExit(anyio.run(main, args.quick))
