"""How long the command line takes to start, against ``python -c pass`` on the same machine.

    python tests/benchmarks/startup.py             # medians of 20 runs each, and their ratios
    python tests/benchmarks/startup.py --check     # exit 1 when a ratio is over 3
    python tests/benchmarks/startup.py --compile   # without a bytecode cache of its own

``--version`` and ``status`` (in a new file workspace) each run 20 times as new processes from
both entry points, the ``teams-runtime`` console script and ``python -m teams_runtime``,
interleaved with ``python -c pass`` so a change in the machine's load falls on all of them
alike. The headline is the ratio of each command's median to the median of ``python -c pass``:
the interpreter's own start-up is the floor no command goes under. All run with the
interpreter running this script: from a checkout, that of its editable install, whose finder
(imported by a ``.pth`` file at every start) is in the floor too.

Every process gets a bytecode cache folder of its own (``PYTHONPYCACHEPREFIX``), filled by one
untimed run of each: an installed package runs from compiled bytecode. ``--compile`` leaves the
environment as it is instead: where it sets ``PYTHONDONTWRITEBYTECODE`` (this machine does) an
editable install compiles every module of the package it imports, and its finder, at every
start.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

RUNS = 20
TARGET = 3.0  # at most this many times python -c pass


def _script() -> list[str]:
    """``teams-runtime`` as a user runs it: the console script beside this interpreter."""
    script = Path(sys.executable).with_name("teams-runtime")
    if script.exists():
        return [str(script)]
    found = shutil.which("teams-runtime")
    if found is None:
        raise SystemExit("no teams-runtime console script: install the package (pip install -e .)")
    return [found]


def _elapsed(argv: list[str], cwd: Path, env: dict[str, str]) -> float:
    start = time.perf_counter()
    subprocess.run(argv, cwd=cwd, env=env, stdout=subprocess.DEVNULL, check=True)
    return time.perf_counter() - start


def startup_medians(runs: int = RUNS, *, compile_each_time: bool = False) -> dict[str, float]:
    """The median seconds of ``python -c pass`` and of ``--version`` and ``status`` from each
    entry point (by the commands' names)."""
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        env = dict(os.environ)
        if not compile_each_time:
            env["PYTHONPYCACHEPREFIX"] = str(root / "bytecode")
            env.pop("PYTHONDONTWRITEBYTECODE", None)
        script, module = _script(), [sys.executable, "-m", "teams_runtime"]
        subprocess.run([*script, "init", str(root / "ws")], env=env, check=True,
                       stdout=subprocess.DEVNULL)  # fmt: skip
        cases = {
            "python -c pass": [sys.executable, "-c", "pass"],
            "teams-runtime --version": [*script, "--version"],
            "teams-runtime status": [*script, "status"],
            "python -m teams_runtime --version": [*module, "--version"],
            "python -m teams_runtime status": [*module, "status"],
        }
        samples: dict[str, list[float]] = {name: [] for name in cases}
        for argv in cases.values():  # untimed: fills the bytecode cache
            _elapsed(argv, root / "ws", env)
        for _ in range(runs):
            for name, argv in cases.items():
                samples[name].append(_elapsed(argv, root / "ws", env))
    return {name: statistics.median(times) for name, times in samples.items()}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--check", action="store_true", help=f"exit 1 if a ratio is over {TARGET}")
    parser.add_argument(
        "--compile", action="store_true", help="no bytecode cache of its own (see above)"
    )
    args = parser.parse_args()
    medians = startup_medians(compile_each_time=args.compile)
    floor = medians.pop("python -c pass")
    print(f"python -c pass: {floor * 1e3:.1f} ms (median of {RUNS})")
    over = False
    for name, seconds in medians.items():
        ratio = seconds / floor
        over = over or ratio > TARGET
        print(f"{name}: {seconds * 1e3:.1f} ms, {ratio:.2f}x (target <= {TARGET:g}x)")
    return 1 if args.check and over else 0


if __name__ == "__main__":
    raise SystemExit(main())
