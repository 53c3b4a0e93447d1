set quiet
# Recipe arguments reach the shell as "$@" too: pytest gets `-k "a and b"` as one argument.
set positional-arguments

# list the recipes
default:
    just --list

# run the test suite on every core (arguments go to pytest, e.g. `just test -k config -x`;
# `just test -n 0 ...` runs in one process, for print or pdb)
test *args:
    python -P -m pytest -n auto "$@"

# the console in a real browser: Debian's chromium, headless, by Playwright (tests/browser/;
# `apt-get install -y chromium`; $TEAMS_RUNTIME_CHROMIUM names another); fails without one
test-browser *args:
    python -P -m pytest --browser tests/browser -n 0 "$@"

# ruff, mypy (strict) and the import contract (layers) over the package
lint:
    #!/usr/bin/env bash
    set -euo pipefail
    ruff check .
    ruff format --check .
    lint-imports --no-cache
    # The repository root is the package: give mypy a folder where it is named teams_runtime.
    shim=$(mktemp -d); trap 'rm -rf "$shim"' EXIT
    ln -s "$PWD" "$shim/teams_runtime"
    cd "$shim" && MYPYPATH="$shim" mypy --config-file "$OLDPWD/pyproject.toml" -p teams_runtime

# the main job: a dry-run team on long request histories (`just demo --keep DIR`)
demo *args:
    teams-runtime demo {{args}}

# the benchmark suite (arguments go to the suite, e.g. `just bench --quick`)
bench *args:
    python tests/benchmarks/run.py {{args}}

# a long decoder fuzz run (EXAMPLES per test, default 20000)
fuzz examples="20000":
    TEAMS_RUNTIME_FUZZ_EXAMPLES={{examples}} python -P -m pytest tests/codecs/test_fuzz.py tests/storage/files/test_store_trust.py -q

# write docs/architecture.md's file map anew from the modules' docstrings
docs:
    python tests/support/file_map.py --write

# a real llama.cpp-based server checked: window, tokenizer, auto budget; `--team`, `--roles`
real-model-check *args:
    python tests/real/real_model_check.py "$@"

# the prompt layouts side by side on a real server: first token, cached tokens (`--python PY`)
real-layout-check *args:
    python tests/real/real_layout_check.py "$@"

# a soak of request epochs with real processes and kill -9 (`just soak --backend nats --seconds 300`)
soak *args:
    python tests/soak/epoch_soak.py {{args}}
