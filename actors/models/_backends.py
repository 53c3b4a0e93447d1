"""Model backends: what turns a prompt into the model's reply text.

- ``CommandBackend`` runs any CLI that reads the prompt on stdin and prints the answer on
  stdout, as an argument list (never through a shell), with the prompt streamed in; the
  role's model name and reasoning level replace ``{model}`` and ``{reasoning}`` in it and
  are in its environment (``TEAMS_RUNTIME_MODEL``, ``TEAMS_RUNTIME_REASONING``). It runs in
  the workspace root, in a process group of its own, and after every call (answered, failed,
  timed out or cancelled) the whole group is ended: nothing the model started outlives it. On
  Linux the model's process also gets SIGKILL from the kernel when its worker dies (even by
  ``kill -9``, when nothing of the worker can end the group): ``model_processes``.
- ``OpenAIBackend`` (its own module, ``openai_backend``) talks to an OpenAI-compatible
  chat-completions server over HTTP.
- ``DryRunBackend`` answers valid results without any model, handing each request along a
  configured route of roles (as far as each role's ``hands_to`` allows), so a new workspace
  runs end to end as it is.
- ``PersonBackend`` (``human``) stands for a person: its role never calls it, since its
  envelopes wait in the inbox for ``teams-runtime answer`` (``person_waits``).

A failed call raises ``ModelFailure`` with a content-free reason (no prompt or output text);
what the model printed travels as the failure's attributes, never in its message.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import Protocol

import anyio
import msgspec
from anyio.abc import ByteReceiveStream, ByteSendStream, Process
from anyio.lowlevel import checkpoint

from teams_runtime.actors.models._checks import command_argv
from teams_runtime.actors.models._openai import OpenAIBackend
from teams_runtime.actors.models._schema_files import clear_dead_workers, schema_file
from teams_runtime.actors.models._servers import ModelServers
from teams_runtime.actors.models.spawn import GRACE_SECONDS, ModelStarter, end_group, start_model
from teams_runtime.codecs.config import DryRunConfig, ModelConfig
from teams_runtime.codecs.model import (
    OUTPUT_KEY,
    CheckedReply,
    ModelReply,
    ResearchDecision,
    RoleResult,
    VersionControlResult,
    reply_json,
)
from teams_runtime.codecs.roles import NextRoles
from teams_runtime.exceptions import ModelFailure
from teams_runtime.policy.prompts import PromptBundle

__all__ = [
    "DRAIN_SECONDS",
    "GRACE_SECONDS",
    "STDERR_TAIL_BYTES",
    "CommandBackend",
    "DryRunBackend",
    "ModelBackend",
    "ModelReply",
    "OpenAIBackend",
    "PersonBackend",
    "make_backend",
    "server_away",
]

# Once the model's own process has exited, how long its pipes may still be read. A process it
# left in the background can hold stdout open forever; what the model printed is in the pipe
# already, so a short wait reads it all.
DRAIN_SECONDS = 0.3
# How much of the model's stderr is kept (its end: where errors are).
STDERR_TAIL_BYTES = 8 * 1024


class ModelBackend(Protocol):
    """Anything that answers a prompt with text."""

    name: str

    async def complete(self, bundle: PromptBundle) -> ModelReply:
        """Send the prompt; return the answer or raise ``ModelFailure``."""
        ...


class _Call:
    """One call's state: what its process printed (stdout up to the limit, stderr's last
    bytes only) and how it ended."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.stdout = bytearray()
        self.stderr_tail = bytearray()
        self.stderr_size = 0
        self.too_much = False
        self.timed_out = False
        self.returncode: int | None = None

    def stdout_text(self) -> str:
        return self.stdout.decode("utf-8", errors="replace")

    def stderr_text(self) -> str:
        return self.stderr_tail.decode("utf-8", errors="replace")

    def failure(self, reason: str, exit_status: int | None = None) -> ModelFailure:
        return ModelFailure(
            reason,
            stderr_tail=self.stderr_text(),
            output=self.stdout_text(),
            exit_status=exit_status,
        )


async def _read_stdout(stream: ByteReceiveStream, call: _Call, stop: anyio.CancelScope) -> None:
    async for chunk in stream:
        call.stdout += chunk
        if len(call.stdout) > call.limit:
            call.too_much = True
            del call.stdout[call.limit :]
            stop.cancel()  # no need to hear the rest: the call has failed
            return


async def _read_stderr(stream: ByteReceiveStream, call: _Call) -> None:
    async for chunk in stream:
        call.stderr_size += len(chunk)
        call.stderr_tail += chunk
        del call.stderr_tail[:-STDERR_TAIL_BYTES]


async def _read_both(process: Process, call: _Call, stop: anyio.CancelScope) -> None:
    assert process.stdout is not None and process.stderr is not None
    async with anyio.create_task_group() as readers:
        readers.start_soon(_read_stderr, process.stderr, call)
        await _read_stdout(process.stdout, call, stop)


async def _feed(stdin: ByteSendStream, bundle: PromptBundle) -> None:
    try:
        async for chunk in bundle.chunks():
            await stdin.send(chunk.encode("utf-8"))
        await stdin.aclose()
    except (
        anyio.BrokenResourceError,
        anyio.ClosedResourceError,
        BrokenPipeError,
        ConnectionResetError,
    ):
        pass  # the model stopped reading early; its exit status and output decide


def _exit_reason(returncode: int, call: _Call) -> str:
    if returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = f"signal {-returncode}"
        return f"the model command was ended by {name} ({call.stderr_size} bytes on stderr)"
    return f"the model command exited with status {returncode} ({call.stderr_size} bytes on stderr)"


class CommandBackend:
    """Run a model CLI per prompt in the workspace root: prompt on stdin, answer on stdout."""

    name = "command"

    def __init__(
        self,
        config: ModelConfig,
        workspace_root: str | Path,
        starter: ModelStarter | None = None,
    ) -> None:
        self._config = config
        self._root = Path(os.path.abspath(workspace_root))
        self._starter = starter  # the worker's, if it has one: models start without a fork
        self._command = command_argv(config, self._root)
        if config.structured_output != "off":  # its calls write schema files: as it starts,
            clear_dead_workers()  # those of workers killed before they could remove theirs

    def _environment(self, bundle: PromptBundle, schema: str) -> dict[str, str]:
        schema_env = {"TEAMS_RUNTIME_RESULT_SCHEMA": schema} if schema else {}
        return {
            **os.environ,
            **self._config.env,
            "TEAMS_RUNTIME_WORKSPACE": str(self._root),
            "TEAMS_RUNTIME_ROLE": bundle.role,
            "TEAMS_RUNTIME_REQUEST_ID": bundle.request_id,
            "TEAMS_RUNTIME_PURPOSE": bundle.purpose,
            # Set even when empty, so a value inherited from this process never stands in.
            "TEAMS_RUNTIME_MODEL": self._config.name,
            "TEAMS_RUNTIME_REASONING": self._config.reasoning,
            **schema_env,
        }

    async def complete(self, bundle: PromptBundle) -> ModelReply:
        """Run the command once; waits for its answer (at most ``timeout_seconds``), then for
        its process group to end (at most ``GRACE_SECONDS`` more). Raises
        ``ModelFailure``; when cancelled, ends the group before the cancellation goes on.
        Unless ``structured_output`` is ``off``, the contract's schema is a file for the call,
        named by ``TEAMS_RUNTIME_RESULT_SCHEMA``."""
        if self._config.structured_output == "off":
            return await self._complete(bundle, "")
        async with schema_file(bundle) as schema:
            return await self._complete(bundle, schema)

    async def _complete(self, bundle: PromptBundle, schema: str) -> ModelReply:
        config = self._config
        try:
            # Its own process group, which can be ended whole; killed if its worker dies.
            process = await start_model(
                self._command,
                cwd=self._root,
                env=self._environment(bundle, schema),
                starter=self._starter,
            )
        except OSError as exc:
            raise ModelFailure(
                f"cannot start model command {config.command[0]!r}: {exc.strerror or exc}"
            ) from None
        call = _Call(config.max_output_bytes)
        try:
            await self._converse(process, bundle, call)
        finally:
            await end_group(process)
        if call.timed_out:
            raise call.failure(
                f"no answer within {config.timeout_seconds:g} s (timeout_seconds); "
                "its processes were ended"
            )
        if call.too_much:
            raise call.failure(
                f"the model printed more than {config.max_output_bytes} bytes (max_output_bytes)"
            )
        returncode = call.returncode
        assert returncode is not None  # the model exited: neither timed out nor cut off
        if returncode != 0:
            raise call.failure(_exit_reason(returncode, call), returncode)
        try:
            text = call.stdout.decode("utf-8")
        except UnicodeDecodeError:
            raise call.failure("the model printed bytes that are not UTF-8", 0) from None
        if not text.strip():
            raise call.failure("the model printed nothing", 0)
        return ModelReply(text=text, stderr_tail=call.stderr_text(), exit_status=0)

    async def _converse(self, process: Process, bundle: PromptBundle, call: _Call) -> None:
        """Feed the prompt and read the answer until the model exits (its exit status goes in
        ``call``), runs past ``timeout_seconds``, or prints more than ``max_output_bytes``."""
        assert process.stdin is not None
        read = anyio.Event()
        async with anyio.create_task_group() as tasks:

            async def read_all() -> None:
                await _read_both(process, call, tasks.cancel_scope)
                read.set()

            tasks.start_soon(_feed, process.stdin, bundle)
            tasks.start_soon(read_all)
            with anyio.move_on_after(self._config.timeout_seconds) as deadline:
                call.returncode = await process.wait()
            call.timed_out = deadline.cancelled_caught
            if call.returncode is not None:
                # A process the model left behind may hold its pipes open: read what they
                # buffer, then stop waiting for an end of file that may never come.
                with anyio.move_on_after(DRAIN_SECONDS):
                    await read.wait()
            tasks.cancel_scope.cancel()


class DryRunBackend:
    """Answer every prompt with a valid result, no model involved (clearly marked dry run)."""

    name = "dry_run"

    def __init__(self, config: DryRunConfig) -> None:
        self._route = list(config.route)

    def _next_role(self, role: str, allowed: NextRoles) -> str:
        """The role after ``role`` on the route, or none; within what ``role`` may hand to
        (its ``hands_to``): else none if it may finish, else the first it may hand to."""
        wanted = ""
        if role in self._route:
            position = self._route.index(role)
            wanted = self._route[position + 1] if position + 1 < len(self._route) else ""
        if allowed.allows(wanted):
            return wanted
        return "" if allowed.finish else allowed.roles[0]

    async def complete(self, bundle: PromptBundle) -> ModelReply:
        """Read the prompt like a model would, then answer for its kind."""
        async for _ in bundle.chunks():
            pass
        await checkpoint()
        role, request_id = bundle.role, bundle.request_id
        next_role = self._next_role(role, bundle.next_roles)
        answer: CheckedReply
        if bundle.reply_kind == "research_decision":
            answer = ResearchDecision(
                request_id=request_id,
                role=role,
                needed=False,
                reason_code="dry_run",
                summary="Dry run: no research was needed (no model was called).",
                next_role=next_role,
            )
        else:
            summary = f"Dry run: the {role} role handled the request (no model was called)."
            work = {OUTPUT_KEY: f"Dry run: the {role} role's work."} if bundle.output else {}
            answer = RoleResult(
                request_id=request_id, role=role, status="completed", summary=summary,
                next_role=next_role, extra=work,  # a deliverable, when the team asks for one
            )  # fmt: skip
            if bundle.reply_kind == "version_control":
                answer = VersionControlResult(
                    **msgspec.structs.asdict(answer), commit_status="no_repo")  # fmt: skip
        return ModelReply(text=msgspec.json.encode(reply_json(answer)).decode())


class PersonBackend:
    """A person's role (``model.backend: human``): answered by ``teams-runtime answer``."""

    name = "human"

    async def complete(self, bundle: PromptBundle) -> ModelReply:
        """Never called: a person's role puts its envelopes in the inbox instead."""
        raise ModelFailure("a person's role is answered with `teams-runtime answer`, not called")


def make_backend(
    config: ModelConfig,
    workspace_root: str | Path,
    *,
    servers: ModelServers | None = None,
    starter: ModelStarter | None = None,
) -> ModelBackend:
    """The backend a model config asks for (a role's: ``TeamConfig.model_for``); a model
    command runs in ``workspace_root``. ``servers``: the model servers of the worker, shared by
    its backends; ``starter``: the worker's model starter (model commands)."""
    match config.backend:
        case "command":
            return CommandBackend(config, workspace_root, starter)
        case "openai":
            assert config.openai is not None  # the config's own check
            return OpenAIBackend(
                config.openai,
                max_output_bytes=config.max_output_bytes,
                structured_output=config.structured_output_form,
                servers=servers,
            )
        case "human":
            return PersonBackend()
        case _:
            return DryRunBackend(config.dry_run)


def server_away(backend: ModelBackend) -> bool:
    """Whether ``backend``'s model server is away: its calls wait, so no new work should be
    taken for it (only the ``openai`` backend has a server to lose)."""
    return isinstance(backend, OpenAIBackend) and backend.is_away()
