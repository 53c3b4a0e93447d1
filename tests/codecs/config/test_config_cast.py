"""A team of one's own: ``team.roles`` lists the cast, ``roles.<name>`` gives each role its
rules, hand-offs, prompt kind and concurrency; every bad value is refused naming where it was
written (docs/configuration.md, docs/roles.md)."""

from __future__ import annotations

import re

import pytest

from teams_runtime import ConfigError
from teams_runtime.codecs.config import DEFAULT_CAST, TeamConfig, parse_team_config
from teams_runtime.codecs.roles import BUILT_IN_RULES, ROLES, NextRoles

TEAM = """\
team:
  roles: [writer, reviewer, editor]
roles:
  writer:
    rules: [Write the draft the scope asks for., Hand it to the reviewer.]
    hands_to: [reviewer]
  reviewer:
    hands_to: [writer, editor, ""]
    concurrency: 2
  editor:
    hands_to: [""]
"""


def _parse(text: str) -> TeamConfig:
    return parse_team_config(text, "team_runtime.yaml")


def _fails(text: str, message: str) -> None:
    with pytest.raises(ConfigError, match=f"^{re.escape(message)}$"):
        _parse(text)


def test_without_a_team_the_cast_is_the_eight_built_in_roles() -> None:
    for text in ("", "roles: {qa: {model: {attempts: 1}}}\n", "team: {max_hops: 5}\n"):
        cast = _parse(text).cast
        assert cast.names == ROLES
        assert {name: cast.rules_of(name) for name in ROLES} == BUILT_IN_RULES
        assert cast.prompt_kind_of("research") == "research_decision"
        assert cast.prompt_kind_of("version_controller") == "version_control"
        assert cast.prompt_kind_of("qa") == "task"
        assert cast.next_roles("qa") == NextRoles(roles=ROLES)
        assert "version_controller" not in cast.takes_new_work
    assert TeamConfig().cast == DEFAULT_CAST  # a config built in code


def test_a_team_of_its_own() -> None:
    config = _parse(TEAM)
    cast = config.cast
    assert cast.names == ("writer", "reviewer", "editor")
    assert set(config.roles) == set(cast.names)  # only the team's roles are configured
    assert cast.rules_of("writer") == ("Write the draft the scope asks for.",
                                       "Hand it to the reviewer.")  # fmt: skip
    assert cast.rules_of("reviewer") == ()  # a role of its own has no rules until given some
    assert cast.prompt_kind_of("editor") == "task"
    assert cast.next_roles("writer") == NextRoles(roles=("reviewer",), finish=False, limited=True)
    assert cast.next_roles("reviewer") == NextRoles(roles=("writer", "editor"), limited=True)
    assert cast.next_roles("editor") == NextRoles(roles=(), limited=True)
    assert cast.concurrency_of("reviewer", 4) == 2
    assert cast.concurrency_of("writer", 4) == 4
    with pytest.raises(ValueError, match=r"^unknown role 'qa'; roles are: writer, reviewer, "):
        cast.check("qa")


def test_built_in_roles_may_be_kept_dropped_or_rewritten() -> None:
    config = _parse(
        "team: {roles: [planner, developer, qa]}\n"
        "roles:\n  qa: {rules: [Run the tests twice.], hands_to: [developer, '']}\n"
        "  developer: {rules: []}\n"
    )
    cast = config.cast
    assert cast.names == ("planner", "developer", "qa")
    assert cast.rules_of("planner") == BUILT_IN_RULES["planner"]  # kept unless rewritten
    assert cast.rules_of("qa") == ("Run the tests twice.",)
    assert cast.rules_of("developer") == ()
    assert cast.next_roles("planner") == NextRoles(roles=("planner", "developer", "qa"))
    # A role of the team's own may take a built-in prompt kind.
    scribe = _parse(
        "team: {roles: [writer, scribe]}\nroles: {scribe: {prompt_kind: version_control}}"
    )
    assert scribe.cast.prompt_kind_of("scribe") == "version_control"
    assert scribe.cast.takes_new_work == ("writer",)


def test_the_default_route_of_the_dry_run_keeps_only_the_teams_roles() -> None:
    # Not written: the default route less the roles the team lacks, so `config` shows the
    # route the dry run takes (a team without planner, developer and qa: none, it finishes
    # at its first role).
    config = _parse(TEAM)
    assert config.model.dry_run.route == []
    assert config.model_for("writer").dry_run.route == []
    kept = _parse("team: {roles: [writer, developer, qa]}\n")
    assert kept.model_for("writer").dry_run.route == ["developer", "qa"]
    written = _parse(TEAM + "model: {dry_run: {route: [writer, reviewer]}}\n")
    assert written.model_for("editor").dry_run.route == ["writer", "reviewer"]
    assert _parse("").model.dry_run.route == ["planner", "developer", "qa"]  # the default team


@pytest.mark.parametrize(
    ("text", "message"),
    [
        pytest.param(
            "team: {roles: writer}",
            "team_runtime.yaml team.roles must be a list of role names (for example: [writer, "
            "reviewer, editor]), not text; see docs/roles.md.",
            id="not-a-list",
        ),
        pytest.param(
            "team: {roles: []}",
            "team_runtime.yaml team.roles must name at least one role; leave it out for the "
            "built-in team (" + ", ".join(ROLES) + ").",
            id="empty",
        ),
        pytest.param(
            "team: {roles: [writer, 7]}",
            "team_runtime.yaml team.roles[1] must be text, not a whole number (put it in quotes).",
            id="not-text",
        ),
        pytest.param(
            "team: {roles: [Writer]}",
            "team_runtime.yaml team.roles[0] 'Writer' is not a role name: it must be lower case.",
            id="upper-case",
        ),
        pytest.param(
            "team: {roles: [writer, ../x]}",
            "team_runtime.yaml team.roles[1] '../x' is not a role name: use only letters and "
            "digits (of any script), '-', '_', '.' and ':' (no '/', no '..', no spaces).",
            id="a-path",
        ),
        pytest.param(
            "team: {roles: [_writer]}",
            "team_runtime.yaml team.roles[0] '_writer' is not a role name: it must start with a "
            "letter or a digit.",
            id="first-character",
        ),
        pytest.param(
            "team: {roles: [claimed]}",
            "team_runtime.yaml team.roles[0] 'claimed' is not a role name: claimed, deferred, "
            "rejected, workers are the queue's own folders.",
            id="reserved",
        ),
        pytest.param(
            "team: {roles: [" + "w" * 33 + "]}",
            f"team_runtime.yaml team.roles[0] '{'w' * 33}' is not a role name: it must be at "
            "most 32 bytes long in UTF-8.",
            id="too-long",
        ),
        pytest.param(
            "team: {roles: [writer, editor, writer]}",
            "team_runtime.yaml team.roles lists writer twice; list each once.",
            id="twice",
        ),
        pytest.param(
            "team: {roles: [writer, reviewer]}\nroles: {reveiwer: {}}",
            "team_runtime.yaml roles.reveiwer is not a role of the team; did you mean reviewer?",
            id="role-typo",
        ),
        pytest.param(
            "team: {roles: [writer, reviewer]}\nroles: {qa: {}}",
            "team_runtime.yaml roles.qa is not a role of the team; the roles are: writer, "
            "reviewer (to add one, list the team in team.roles).",
            id="dropped-role",
        ),
        pytest.param(
            "roles: {writer: {}}",
            "team_runtime.yaml roles.writer is not a role of the team; the roles are: "
            + ", ".join(ROLES)
            + " (to add one, list the team in team.roles).",
            id="new-role-not-in-the-team",
        ),
        pytest.param(
            "team: {roles: [writer, reviewer]}\nroles: {writer: {hands_to: [reveiwer]}}",
            "team_runtime.yaml roles.writer.hands_to[0] 'reveiwer' is not a role of the team "
            '(nor "", to finish the request); did you mean reviewer?',
            id="hands-to-typo",
        ),
        pytest.param(
            "roles: {qa: {hands_to: [boss]}}",
            "team_runtime.yaml roles.qa.hands_to[0] 'boss' is not a role of the team (nor \"\", "
            "to finish the request); the roles are: " + ", ".join(ROLES) + ".",
            id="hands-to-unknown",
        ),
        pytest.param(
            "roles: {qa: {hands_to: [developer, '', '']}}",
            'team_runtime.yaml roles.qa.hands_to lists "" twice; list each once.',
            id="hands-to-twice",
        ),
        pytest.param(
            "roles: {qa: {hands_to: []}}",
            'team_runtime.yaml roles.qa.hands_to must name at least one role, or "" to let qa '
            "finish the request; leave it out to let it hand to any role.",
            id="hands-to-empty",
        ),
        pytest.param(
            "roles: {qa: {hands_to: developer}}",
            "team_runtime.yaml roles.qa.hands_to must be a list, not text.",
            id="hands-to-not-a-list",
        ),
        pytest.param(
            "roles: {qa: {rules: Check it.}}",
            "team_runtime.yaml roles.qa.rules must be a list, not text.",
            id="rules-not-a-list",
        ),
        pytest.param(
            "roles: {qa: {rules: [Check it., 3]}}",
            "team_runtime.yaml roles.qa.rules[1] must be text, not a whole number (put it in "
            "quotes).",
            id="rule-not-text",
        ),
        pytest.param(
            "roles: {qa: {rules: ['  ']}}",
            "team_runtime.yaml roles.qa.rules[0] is empty; write the rule, or remove the line.",
            id="rule-empty",
        ),
        pytest.param(
            'roles: {qa: {rules: ["one\\ntwo"]}}',
            "team_runtime.yaml roles.qa.rules[0] must be one line; write each rule as an item "
            "of its own.",
            id="rule-two-lines",
        ),
        pytest.param(
            "roles: {qa: {prompt_kind: role-task}}",
            "team_runtime.yaml roles.qa.prompt_kind 'role-task' is not one of role_task, "
            "research_decision, version_control; did you mean role_task?",
            id="prompt-kind-typo",
        ),
        pytest.param(
            "roles: {qa: {concurrency: 0}}",
            "team_runtime.yaml roles.qa.concurrency must be a whole number from 1 to 256 "
            "(envelopes of qa one worker handles at once).",
            id="concurrency-zero",
        ),
        pytest.param(
            "roles: {qa: {concurrency: true}}",
            "team_runtime.yaml roles.qa.concurrency must be a whole number, not true or false.",
            id="concurrency-bool",
        ),
        pytest.param(
            "roles: {qa: {hand_to: [developer]}}",
            "team_runtime.yaml roles.qa.hand_to is not a setting; did you mean hands_to?",
            id="setting-typo",
        ),
        pytest.param(
            "team: {roles: [writer, reviewer]}\nmodel: {dry_run: {route: [writer, qa]}}",
            "team_runtime.yaml model.dry_run.route names roles the team does not have (qa); "
            "roles are: writer, reviewer. List this team's roles in the route (the one `init` "
            "writes is for the default team), or remove it.",
            id="route-outside-the-team",
        ),
        pytest.param(
            "team: {roles: [writer, reviewer]}\n"
            "roles: {writer: {model: {dry_run: {route: [writer, editor]}}}}",
            "team_runtime.yaml roles.writer.model.dry_run.route names roles the team does not "
            "have (editor); roles are: writer, reviewer. List this team's roles in the route "
            "(the one `init` writes is for the default team), or remove it.",
            id="role-route-outside-the-team",
        ),
        pytest.param(
            "team: {roles: [writer, reviewer]}\nroles: {writer: {hands_to: [reviewer, null]}}",
            'team_runtime.yaml roles.writer.hands_to[1] is empty (null): write "" (in quotes) '
            "to let writer finish the request, or name a role.",
            id="hands-to-bare-dash",
        ),
    ],
)
def test_bad_casts_are_refused_naming_where(text: str, message: str) -> None:
    _fails(text, message)
