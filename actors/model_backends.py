"""Model backends: what turns a prompt into the model's answer text.

- ``CommandBackend`` runs any CLI that reads the prompt on stdin and prints the answer on
  stdout, as an argument list (never through a shell), with the prompt streamed in.
- ``DryRunBackend`` answers valid results without any model, handing each request along a
  configured route of roles, so a new workspace runs end to end as it is.

A failed call raises ``ModelFailure`` with a content-free reason (no prompt or output text).
"""

from __future__ import annotations

import contextlib
import os
import subprocess
from typing import Protocol

import anyio
import msgspec
from anyio.abc import ByteReceiveStream, Process
from anyio.lowlevel import checkpoint

from teams_runtime.codecs.config import DryRunConfig, ModelConfig
from teams_runtime.codecs.contract import ResearchDecision, RoleResult, VersionControlResult
from teams_runtime.exceptions import ModelFailure
from teams_runtime.prompts import PromptBundle

__all__ = ["CommandBackend", "DryRunBackend", "ModelBackend", "make_backend"]


class ModelBackend(Protocol):
    """Anything that answers a prompt with text."""

    name: str

    async def complete(self, bundle: PromptBundle) -> str:
        """Send the prompt; return the answer text or raise ``ModelFailure``."""
        ...


async def _read_limited(stream: ByteReceiveStream, limit: int, sink: bytearray) -> None:
    async for chunk in stream:
        sink += chunk
        if len(sink) > limit:
            raise ModelFailure(f"the model printed more than {limit} bytes (max_output_bytes)")


async def _count(stream: ByteReceiveStream, counter: list[int]) -> None:
    async for chunk in stream:
        counter[0] += len(chunk)


class CommandBackend:
    """Run a model CLI per prompt: prompt on stdin, answer on stdout."""

    name = "command"

    def __init__(self, config: ModelConfig) -> None:
        self._config = config

    def _environment(self, bundle: PromptBundle) -> dict[str, str]:
        return {
            **os.environ,
            **self._config.env,
            "TEAMS_RUNTIME_ROLE": bundle.role,
            "TEAMS_RUNTIME_REQUEST_ID": bundle.request_id,
            "TEAMS_RUNTIME_PURPOSE": bundle.purpose,
        }

    async def complete(self, bundle: PromptBundle) -> str:
        """Run the command once; waits at most ``timeout_seconds``, then kills it."""
        config = self._config
        try:
            process = await anyio.open_process(
                config.command,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                env=self._environment(bundle),
            )
        except OSError as exc:
            raise ModelFailure(
                f"cannot start model command {config.command[0]!r}: {exc.strerror or exc}"
            ) from None
        output = bytearray()
        stderr_bytes = [0]
        try:
            with anyio.fail_after(config.timeout_seconds):
                async with anyio.create_task_group() as group:
                    group.start_soon(self._feed, process, bundle)
                    assert process.stderr is not None and process.stdout is not None
                    group.start_soon(_count, process.stderr, stderr_bytes)
                    await _read_limited(process.stdout, config.max_output_bytes, output)
                returncode = await process.wait()
        except TimeoutError:
            raise ModelFailure(
                f"no answer within {config.timeout_seconds:g} s (timeout_seconds); killed"
            ) from None
        except BaseExceptionGroup as group_error:  # a failure inside the reading tasks
            failure = next(iter(group_error.exceptions))
            if isinstance(failure, ModelFailure):
                raise failure from None
            raise
        finally:
            await _stop(process)
        if returncode != 0:
            raise ModelFailure(
                f"the model command exited with status {returncode} "
                f"({stderr_bytes[0]} bytes on stderr)"
            )
        try:
            text = output.decode("utf-8")
        except UnicodeDecodeError:
            raise ModelFailure("the model printed bytes that are not UTF-8") from None
        if not text.strip():
            raise ModelFailure("the model printed nothing")
        return text

    @staticmethod
    async def _feed(process: Process, bundle: PromptBundle) -> None:
        assert process.stdin is not None
        try:
            async for chunk in bundle.chunks():
                await process.stdin.send(chunk.encode("utf-8"))
            await process.stdin.aclose()
        except (anyio.BrokenResourceError, anyio.ClosedResourceError, BrokenPipeError):
            pass  # the model stopped reading early; its exit status and output decide


async def _stop(process: Process) -> None:
    # Never leave a model process behind, even when cancelled.
    with anyio.CancelScope(shield=True), anyio.move_on_after(5):
        if process.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                process.kill()
        await process.aclose()


class DryRunBackend:
    """Answer every prompt with a valid result, no model involved (clearly marked dry run)."""

    name = "dry_run"

    def __init__(self, config: DryRunConfig) -> None:
        self._route = list(config.route)

    def _next_role(self, role: str) -> str:
        if role in self._route:
            position = self._route.index(role)
            return self._route[position + 1] if position + 1 < len(self._route) else ""
        return ""

    async def complete(self, bundle: PromptBundle) -> str:
        """Read the prompt like a model would, then answer for its kind."""
        async for _ in bundle.chunks():
            pass
        await checkpoint()
        role, request_id = bundle.role, bundle.request_id
        next_role = self._next_role(role)
        answer: msgspec.Struct
        if bundle.answer_kind == "research_decision":
            answer = ResearchDecision(
                request_id=request_id,
                role=role,
                needed=False,
                reason_code="dry_run",
                summary="Dry run: no research was needed (no model was called).",
                next_role=next_role,
            )
        else:
            answer = RoleResult(
                request_id=request_id,
                role=role,
                status="completed",
                summary=f"Dry run: the {role} role handled the request (no model was called).",
                next_role=next_role,
            )
            if bundle.answer_kind == "version_control":
                as_dict = msgspec.structs.asdict(answer)
                answer = msgspec.convert(
                    {**as_dict, "commit_status": "no_repo"}, VersionControlResult
                )
        return msgspec.json.encode(answer).decode()


def make_backend(config: ModelConfig) -> ModelBackend:
    """The backend the ``model`` section asks for."""
    if config.backend == "command":
        return CommandBackend(config)
    return DryRunBackend(config.dry_run)
