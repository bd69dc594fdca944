"""Any Agent Client Protocol agent (JSON-RPC over stdio), as the engine ``acp:NAME``.

Each conversation gets a process of its own: the agent's command, started in the
conversation's checkout, spoken to through the ``agent-client-protocol`` SDK. A new
conversation is ``session/new``. A resume uses what the agent advertises in
``initialize``: ``session/load`` first, because the agent then replays the history
and the runner can check it holds the launch's expected turn (CONTRACT 3.2);
else ``session/resume``, where the agent accepting the id is the only proof there is.
A refused id, a load whose history lacks the expected turn, or an agent that can do
neither starts a new conversation, and the brief goes with the first prompt.

Streamed ``session/update``s are emitted as they complete (``acp_updates``).
Permission requests are answered by this machine's policy and recorded as an outcome
entry. ``end`` sends ``session/cancel``, then ends the agent's whole process group.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import structlog
from acp import PROTOCOL_VERSION, RequestError, text_block
from acp.client.connection import ClientSideConnection
from acp.schema import (
    AllowedOutcome,
    ClientCapabilities,
    DeniedOutcome,
    Implementation,
    InitializeResponse,
    PermissionOption,
    RequestPermissionResponse,
    ToolCallUpdate,
)
from seedline_contracts.runner import ResumeExpect

from ..store import Conversation
from .acp_config import (
    ACP_ENGINE_PREFIX,
    DEFAULT_PERMISSION_POLICY,
    PERMISSION_POLICIES,
    PermissionPolicy,
)
from .acp_updates import UpdateGatherer, history_holds
from .base import Emit, EngineError, EngineOutput, StartResult, TurnResult
from .permissions import acp_refusal
from .cli_process import LINE_LIMIT, _die_with_parent, kill_group

log = structlog.get_logger(__name__)

# How long a cancelled agent gets to finish its turn before its processes are ended.
_CANCEL_GRACE_SECONDS = 2.0
# How long the handshake and a load or resume may take before the agent counts as stuck.
_SETUP_SECONDS = 60.0
_CLIENT_INFO = Implementation(name="seedline-runner", title="Seedline runner", version="1")


@dataclass
class _SeedlineClient:
    """The client side the agent talks back to: updates, and permission questions."""

    label: str
    policy: PermissionPolicy
    # The conversation's checkout: what the `checkout` policy allows a tool call to touch.
    checkout: Path | None = None
    # Where the current turn's outputs go; None outside a turn (a load's replay).
    emit: Emit | None = None
    gatherer: UpdateGatherer = field(default_factory=UpdateGatherer)

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        for output in self.gatherer.feed(update):
            if self.emit is not None:
                await self.emit(output)

    async def flush(self) -> None:
        for output in self.gatherer.flush():
            if self.emit is not None:
                await self.emit(output)

    async def request_permission(
        self,
        session_id: str,
        tool_call: ToolCallUpdate,
        options: list[PermissionOption],
        **kwargs: Any,
    ) -> RequestPermissionResponse:
        allowed = self.policy == "allow" or (
            self.policy == "checkout" and _inside(tool_call, self.checkout))
        wanted = ("allow_once", "allow_always") if allowed else ("reject_once", "reject_always")
        chosen = next((o for kind in wanted for o in options if o.kind == kind), None)
        what = tool_call.title or tool_call.tool_call_id
        await self.flush()
        if chosen is None:
            decision = f"no {'allow' if allowed else 'reject'} option was offered, so the request was cancelled"
            outcome: Any = DeniedOutcome(outcome="cancelled")
        else:
            decision = f"answered {chosen.name!r} ({chosen.kind})"
            outcome = AllowedOutcome(outcome="selected", option_id=chosen.option_id)
        if self.emit is not None:
            text = (f"{self.label} asked to run {what!r}; this machine's permission policy "
                    f"({self.policy}) {decision}.")
            if not allowed:
                text += " " + acp_refusal(self.label, f"run {what!r}")
            await self.emit(EngineOutput("outcome", text))
        return RequestPermissionResponse(outcome=outcome)

    # The runner offers no file system or terminal to the agent (capabilities say so).
    async def ext_method(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        raise RequestError.method_not_found(method)

    async def ext_notification(self, method: str, params: dict[str, Any]) -> None:
        return None

    def on_connect(self, conn: Any) -> None:
        return None


def _inside(tool_call: ToolCallUpdate, checkout: Path | None) -> bool:
    """Whether every file the tool call names lies in the checkout (none named: it runs
    there, so it is inside)."""
    if checkout is None:
        return False
    for location in tool_call.locations or []:
        path = Path(location.path)
        resolved = (path if path.is_absolute() else checkout / path).resolve()
        if not resolved.is_relative_to(checkout):
            return False
    return True


@dataclass
class _Agent:
    process: asyncio.subprocess.Process
    conn: ClientSideConnection
    client: _SeedlineClient
    capabilities: InitializeResponse
    workdir: Path
    session_id: str | None = None
    in_turn: bool = False


class AcpEngine:
    """One ACP agent command, offered as the engine ``acp:<agent>``."""

    stateless = False

    def __init__(
        self,
        agent: str,
        command: Sequence[str],
        *,
        workdir: str | Path | None = None,
        env: Mapping[str, str] | None = None,
        permission_policy: PermissionPolicy = DEFAULT_PERMISSION_POLICY,
    ) -> None:
        if not command:
            raise ValueError(f"The ACP agent {agent!r} needs a command.")
        if permission_policy not in PERMISSION_POLICIES:
            raise ValueError(
                f"The ACP permission policy is one of {', '.join(PERMISSION_POLICIES)}, "
                f"not {permission_policy!r}."
            )
        self.name = ACP_ENGINE_PREFIX + agent
        self.label = f"ACP agent {agent}"
        self._command = list(command)
        self._workdir = Path(workdir) if workdir is not None else None
        self._env = dict(os.environ if env is None else env)
        self._policy: PermissionPolicy = permission_policy
        self._agents: dict[str, _Agent] = {}
        # Learned from the agent's first initialize: can it load or resume a conversation?
        self._keeps_conversation: bool | None = None

    @property
    def keeps_no_conversation(self) -> bool:
        """True once the agent said it can neither load nor resume (presence says so)."""
        return self._keeps_conversation is False

    async def start(
        self,
        conversation_id: str,
        resume_key: str | None,
        workdir: Path | None = None,
        expect: ResumeExpect | None = None,
    ) -> StartResult:
        await self.end(conversation_id)
        checkout = (workdir or self._workdir or Path.cwd()).resolve()
        agent = await self._spawn(checkout)
        try:
            resumed = False
            if resume_key is not None:
                resumed = await asyncio.wait_for(
                    self._resume(agent, resume_key, expect), _SETUP_SECONDS
                )
            if not resumed:
                created = await asyncio.wait_for(
                    agent.conn.new_session(cwd=str(checkout), mcp_servers=[]), _SETUP_SECONDS
                )
                agent.session_id = created.session_id
        except BaseException as error:
            await self._stop_process(agent)
            if isinstance(error, (RequestError, asyncio.TimeoutError, ConnectionError)):
                raise EngineError(f"{self.label} could not open a conversation: {error}") from error
            raise
        self._agents[conversation_id] = agent
        return StartResult(resumed=resumed, engine_session_id=agent.session_id)

    async def run_turn(self, conversation: Conversation, prompt: str, emit: Emit) -> TurnResult:
        agent = self._agents.get(conversation.conversation_id)
        if agent is None or agent.session_id is None:
            raise EngineError(f"{self.label} was given a turn before it was started.")
        if agent.process.returncode is not None:
            raise EngineError(
                f"{self.label} ended (exit {agent.process.returncode}); open the conversation again."
            )
        agent.client.emit = emit
        agent.in_turn = True
        try:
            response = await agent.conn.prompt(
                session_id=agent.session_id, prompt=[text_block(prompt)]
            )
            # The reply gathered last is complete now; it goes out with the turn's end.
            last = agent.client.gatherer.flush()
        except asyncio.CancelledError:
            # Stopped mid-message: what the agent said so far is still recorded.
            await agent.client.flush()
            raise
        except RequestError as error:
            raise EngineError(f"{self.label} could not answer: {error}") from error
        except ConnectionError as error:
            raise EngineError(f"{self.label} stopped answering: {error}") from error
        finally:
            agent.in_turn = False
            agent.client.emit = None
        # The agent's answer to the prompt is its end of the turn: its last reply ends
        # it, or, when the turn ended otherwise, a word of how.
        if response.stop_reason == "end_turn" and last:
            for output in last[:-1]:
                await emit(output)
            await emit(replace(last[-1], ends_turn=True))
        else:
            for output in last:
                await emit(output)
            ended = ("ended its turn" if response.stop_reason == "end_turn"
                     else f"stopped: {response.stop_reason}")
            await emit(EngineOutput("outcome", f"{self.label} {ended}.", ends_turn=True))
        return TurnResult(engine_session_id=agent.session_id, resumed=None)

    async def end(self, conversation_id: str) -> None:
        agent = self._agents.pop(conversation_id, None)
        if agent is None:
            return
        if agent.session_id is not None and agent.process.returncode is None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(agent.conn.cancel(session_id=agent.session_id), 1.0)
        await self._stop_process(agent)

    async def aclose(self) -> None:
        for conversation_id in list(self._agents):
            await self.end(conversation_id)

    def capabilities_of(self, conversation_id: str) -> InitializeResponse | None:
        agent = self._agents.get(conversation_id)
        return agent.capabilities if agent else None

    async def _resume(self, agent: _Agent, resume_key: str, expect: ResumeExpect | None) -> bool:
        caps = agent.capabilities.agent_capabilities
        can_load = bool(caps and caps.load_session)
        sessions = caps.session_capabilities if caps else None
        can_resume = bool(sessions and sessions.resume is not None)
        cwd = str(agent.workdir)
        try:
            if can_load:
                agent.client.gatherer = UpdateGatherer()
                await agent.conn.load_session(cwd=cwd, session_id=resume_key, mcp_servers=[])
                await agent.client.flush()
                replayed = agent.client.gatherer.messages
                agent.client.gatherer = UpdateGatherer()
                # An accepted id with nothing behind it is no proof (CONTRACT 3.2): some
                # agents accept any id on load and fail only at the first prompt.
                lacks = not replayed if expect is None else not history_holds(
                    replayed, expect.kind, expect.excerpt
                )
                if lacks:
                    log.info(
                        "acp_load_lacks_expected_turn",
                        agent=self.name,
                        requested=resume_key,
                        replayed=len(replayed),
                        expect_seq=expect.seq if expect else None,
                    )
                    return False
            elif can_resume:
                await agent.conn.resume_session(cwd=cwd, session_id=resume_key, mcp_servers=[])
            else:
                return False
        except RequestError as error:
            log.info("acp_resume_refused", agent=self.name, requested=resume_key, error=str(error))
            agent.client.gatherer = UpdateGatherer()
            return False
        agent.session_id = resume_key
        return True

    async def _spawn(self, checkout: Path) -> _Agent:
        try:
            process = await asyncio.create_subprocess_exec(
                *self._command,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.DEVNULL,
                cwd=checkout,
                env=self._env,
                limit=LINE_LIMIT,
                start_new_session=True,
                preexec_fn=_die_with_parent if sys.platform == "linux" else None,
            )
        except OSError as error:
            raise EngineError(
                f"{self.label} could not be started ({self._command[0]}): "
                f"{error.strerror or error}."
            ) from error
        assert process.stdin is not None and process.stdout is not None
        client = _SeedlineClient(label=self.label, policy=self._policy, checkout=checkout)
        conn = ClientSideConnection(
            client, process.stdin, process.stdout, use_unstable_protocol=True
        )
        try:
            capabilities = await asyncio.wait_for(
                conn.initialize(
                    protocol_version=PROTOCOL_VERSION,
                    client_capabilities=ClientCapabilities(terminal=False),
                    client_info=_CLIENT_INFO,
                ),
                _SETUP_SECONDS,
            )
        except BaseException as error:
            kill_group(process)
            await process.wait()
            with contextlib.suppress(Exception):
                await conn.close()
            if isinstance(error, Exception):
                raise EngineError(f"{self.label} did not answer initialize: {error}") from error
            raise
        caps = capabilities.agent_capabilities
        sessions = caps.session_capabilities if caps else None
        self._keeps_conversation = bool(caps and caps.load_session) or bool(
            sessions and sessions.resume is not None
        )
        return _Agent(process, conn, client, capabilities, checkout)

    async def _stop_process(self, agent: _Agent) -> None:
        process = agent.process
        if process.returncode is None and process.stdin is not None:
            with contextlib.suppress(Exception):
                process.stdin.close()
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(process.wait(), _CANCEL_GRACE_SECONDS)
        # The agent may have left tools running in its group even after it exited.
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, 9)
        await process.wait()
        with contextlib.suppress(Exception):
            await agent.conn.close()
