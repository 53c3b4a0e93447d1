"""``python -m teams_runtime``: the same as the ``teams-runtime`` command."""

from __future__ import annotations

from teams_runtime.cli import main

raise SystemExit(main())
