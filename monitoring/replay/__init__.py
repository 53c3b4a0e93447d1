"""``teams-runtime replay``: recorded model calls replayed under other policies and layouts,
no model called (``engine`` rebuilds each prompt and adds up a row per (policy, layout):
tokens, cost, the prefix a prompt cache could serve, evidence kept, budget overflows;
``policies`` names them, ``request_views`` reads a request once for every hop, ``prefix_cache``
finds what a cache could serve, ``layouts`` renders, ``drawing`` prints)."""

from __future__ import annotations

from teams_runtime.monitoring.replay._drawing import (
    APPROXIMATE,
    render_replay_chart,
    render_replay_table,
    replay_json,
)
from teams_runtime.monitoring.replay._engine import (
    DEFAULT_CACHE_TTL,
    Observer,
    ReplayedPrompt,
    ReplayReport,
    ReplaySetup,
    replay,
)
from teams_runtime.monitoring.replay._layouts import LAYOUTS, Layout, asked_layouts
from teams_runtime.monitoring.replay._policies import (
    DEFAULT_POLICIES,
    POLICY_FORMS,
    Policy,
    asked_policies,
    parse_policy,
)
from teams_runtime.monitoring.replay._prefix_cache import PrefixCache, common_prefix
from teams_runtime.monitoring.replay._request_views import RequestView, envelope_from
from teams_runtime.monitoring.replay._rows import ReplayRow

__all__ = [
    "APPROXIMATE",
    "DEFAULT_CACHE_TTL",
    "DEFAULT_POLICIES",
    "LAYOUTS",
    "POLICY_FORMS",
    "Layout",
    "Observer",
    "Policy",
    "PrefixCache",
    "ReplayReport",
    "ReplayRow",
    "ReplaySetup",
    "ReplayedPrompt",
    "RequestView",
    "asked_layouts",
    "asked_policies",
    "common_prefix",
    "envelope_from",
    "parse_policy",
    "render_replay_chart",
    "render_replay_table",
    "replay",
    "replay_json",
]
