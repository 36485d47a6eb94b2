"""FastAPI dependencies: what a handler needs, declared in its signature.

Handlers never reach into ``request.app.state``; they ask for what they use:

    async def handler(agent: AgentDep, store: ConversationsDep, resource: ForcedResource): ...

``Services`` is built once by the factory and holds the process's long-lived parts. The
principal is decided once, by ``dev_server.auth.AuthMiddleware``, before any body is read; it is
``None`` when authentication is off. A route that needs the resource the caller is forced
into asks for ``ForcedResource`` (``user:<principal>``, or None with auth off).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Any

from fastapi import Depends
from starlette.requests import HTTPConnection, Request

from dev_server.agents.registry import AgentRegistry, RegisteredAgent
from dev_server.agents.runner import TurnRunner
from dev_server.agents.signals import ThreadHub
from dev_server.agents.turns import TurnStarter
from dev_server.api.query import Query
from dev_server.api.turn_limit import TurnLimit
from dev_server.api.worker_slot import WorkerSlot
from dev_server.auth import resource_for
from dev_server.background import BackgroundWork
from dev_server.kernel.errors import NotFound
from dev_server.kernel.model import LLMClient
from dev_server.observability.telemetry import Telemetry
from dev_server.settings import Settings
from dev_server.storage.composite import CompositeStore
from dev_server.storage.conversations import ConversationStore
from dev_server.storage.stream_log import StreamLog
from dev_server.streaming.recorder import StreamRecording

if TYPE_CHECKING:  # numpy: imported only by a process that searches by meaning
    from dev_server.recall.service import SemanticIndex


@dataclass
class Readiness:
    """The model warm-up of one process, as the factory's lifespan reports it."""

    ready: bool = False
    seconds: float | None = None
    error: str | None = None

    def done(self, seconds: float) -> None:
        self.ready, self.seconds = True, seconds

    def failed(self, error: str, seconds: float) -> None:
        self.ready, self.seconds, self.error = True, seconds, error

    def report(self) -> dict[str, Any]:
        """What it adds to ``/health``'s ``models`` (whose ``ready`` is the model layer's own)."""
        report: dict[str, Any] = {"warmUpSeconds": self.seconds}
        if self.error is not None:
            report["warmUpError"] = self.error
        return report


@dataclass(frozen=True, kw_only=True)
class Services:
    """The long-lived parts of one process, shared by every request: built once by the
    factory (``dev_server.factory``), from what it built before, and never changed after."""

    role: str
    settings: Settings
    storage: CompositeStore
    conversations: ConversationStore
    llm: LLMClient
    agents: AgentRegistry
    runner: TurnRunner
    turns: TurnStarter  # the one way a turn starts (dev_server.agents.turns)
    signals: ThreadHub
    stream_log: StreamLog  # recorded chat streams, read by resume on any process
    recording: StreamRecording | None  # None: chat streams are not recorded
    turn_limit: TurnLimit | None  # None: turns are not rate limited
    background: BackgroundWork  # started and drained by the lifespan
    telemetry: Telemetry | None  # None: telemetry is off; opened and shut down by the lifespan
    semantic_index: SemanticIndex | None  # when an agent searches by meaning
    readiness: Readiness  # the model warm-up, for /health
    worker: WorkerSlot  # which of the gateway's processes this is
    auth_enabled: bool


def services_of(conn: HTTPConnection) -> Services:
    return conn.app.state.services


async def get_services(conn: HTTPConnection) -> Services:
    return services_of(conn)


ServicesDep = Annotated[Services, Depends(get_services)]


# The parts handlers ask for most read the connection themselves, not ``ServicesDep``: FastAPI
# resolves each sub-dependency on every request (a tenth of a thread creation's CPU was
# dependency resolution).
async def get_storage(conn: HTTPConnection) -> CompositeStore:
    return services_of(conn).storage


async def get_conversations(conn: HTTPConnection) -> ConversationStore:
    return services_of(conn).conversations


async def get_agents(conn: HTTPConnection) -> AgentRegistry:
    return services_of(conn).agents


async def get_runner(conn: HTTPConnection) -> TurnRunner:
    return services_of(conn).runner


async def get_signals(conn: HTTPConnection) -> ThreadHub:
    return services_of(conn).signals


async def get_turns(conn: HTTPConnection) -> TurnStarter:
    return services_of(conn).turns


async def get_stream_log(conn: HTTPConnection) -> StreamLog:
    return services_of(conn).stream_log


async def get_recording(conn: HTTPConnection) -> StreamRecording | None:
    return services_of(conn).recording


StorageDep = Annotated[CompositeStore, Depends(get_storage)]
ConversationsDep = Annotated[ConversationStore, Depends(get_conversations)]
AgentsDep = Annotated[AgentRegistry, Depends(get_agents)]
RunnerDep = Annotated[TurnRunner, Depends(get_runner)]
SignalsDep = Annotated[ThreadHub, Depends(get_signals)]
TurnsDep = Annotated[TurnStarter, Depends(get_turns)]
StreamLogDep = Annotated[StreamLog, Depends(get_stream_log)]
RecordingDep = Annotated[StreamRecording | None, Depends(get_recording)]


# Every dependency is ``async def``: FastAPI runs a plain ``def`` one in its thread pool,
# a thread hop per dependency per request (that was a tenth of a turn's CPU).


def principal_of(conn: HTTPConnection) -> str | None:
    """The authenticated principal (set by ``AuthMiddleware``), or None with auth off."""
    return conn.scope.get("state", {}).get("principal")


async def get_principal(conn: HTTPConnection) -> str | None:
    return principal_of(conn)


def forced_resource_of(conn: HTTPConnection) -> str | None:
    """The resource every request of an authenticated principal works in; None with auth off."""
    principal = principal_of(conn)
    return resource_for(principal) if principal is not None else None


async def get_forced_resource(conn: HTTPConnection) -> str | None:
    return forced_resource_of(conn)


Principal = Annotated[str | None, Depends(get_principal)]
ForcedResource = Annotated[str | None, Depends(get_forced_resource)]


async def limit_turns(conn: HTTPConnection, services: ServicesDep) -> None:
    """Count a turn against its caller (``dev_server.api.turn_limit``): the principal, else the
    client address; a 429 past the limit."""
    if services.turn_limit is None:
        return
    principal = principal_of(conn)
    caller = f"principal:{principal}" if principal is not None else f"address:{conn.client.host if conn.client else ''}"
    await services.turn_limit.take(caller)


# On every route that starts a turn: ``@router.post(..., dependencies=[LimitTurns])``.
LimitTurns = Depends(limit_turns)


async def get_path_agent(agent_id: str, agents: AgentsDep) -> RegisteredAgent:
    """The agent named by the ``{agent_id}`` path parameter, or a 404."""
    agent = agents.get(agent_id)
    if agent is None:
        raise NotFound(f"Agent with id {agent_id} not found")
    return agent


AgentDep = Annotated[RegisteredAgent, Depends(get_path_agent)]


_QUERY_KEY = "dev_server.query"  # where the parsed query waits in the request's scope


def query_of(request: Request) -> Query:
    """The request's query string in Mastra's three encodings (plain, JSON in one parameter,
    bracket notation), parsed once per request whichever dependencies read it."""
    parsed = request.scope.get(_QUERY_KEY)
    if parsed is None:
        parsed = request.scope[_QUERY_KEY] = Query(request)
    return parsed


async def get_query(request: Request) -> Query:
    return query_of(request)


MastraQuery = Annotated[Query, Depends(get_query)]
