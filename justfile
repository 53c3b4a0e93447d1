set quiet

# list the recipes
default:
    just --list

# run the test suite (arguments go to pytest, e.g. `just test -k config -x`)
test *args:
    python -m pytest {{args}}

# ruff and mypy over the package
lint:
    ruff check .
    ruff format --check .
    mypy --config-file pyproject.toml -p teams_runtime

# the main job: a demo workspace projected as prompts would see it
demo *args:
    teams-runtime demo {{args}}

# the benchmark suite (arguments go to the suite, e.g. `just bench --quick`)
bench *args:
    python tests/benchmarks/run.py {{args}}
