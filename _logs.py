"""The package's logger: loguru's, with the package's lines off until an application turns them on.

Every module of the package that logs takes ``logger`` from here. Importing this module switches
the package's lines off (``logger.disable("teams_runtime")``), as loguru's docs ask of a
library; the package adds no sink. An application turns them on with
``logger.enable("teams_runtime")`` after importing the parts of the package it uses, and adds
its own sinks (the CLI's are ``monitoring``'s ``configure_logging``).

loguru takes tens of milliseconds to import (it brings asyncio), so only the modules that log
import this one: the package itself, ``teams-runtime --version`` and ``status`` (on the file
backend) never do.
"""

from __future__ import annotations

from loguru import logger

__all__ = ["PACKAGE", "logger"]

PACKAGE = "teams_runtime"  # the name loguru matches the package's lines by (their __name__)

logger.disable(PACKAGE)
