"""The one app factory: ``create_app("gateway" | "studio")``, the composition root.

Both processes are the same app with different routers switched on, over the same default
database. ``create_app`` builds everything in one pass, each part from explicit arguments
and from the parts built before it: the stores, the model layer, the background work, the
agents (their memories), telemetry, the agents' runner and how turns start, the
``Services`` every handler gets (``dev_server.api.deps``), then the app, its middleware and
its routers. Nothing is patched afterwards, and building does no I/O.

The lifespan opens what needs opening, each closed in reverse order at shutdown (an
``AsyncExitStack``): the stores (default first, then each extra domain), telemetry, the
model layer (its provider connections), the signal hub, semantic recall's indexer, the
background work (``dev_server.background``: drained before the stores close, its jobs write
to them), the recorded streams still running, then the chores: warming the model layer up
in the background (the local model run once, plus litellm's import of seconds when
an agent's model needs litellm: ``/health`` says ``status: "starting"`` until it is done, so
the server answers at once and a probe can wait for ``"ok"``), trace retention (studio) and
the stream sweep (gateway).

Middleware, outermost first: the access log (one line per request: method, path, status,
milliseconds), the telemetry scope (what a request logs is this app's, when a process holds
more than one: ``dev_server.observability.telemetry``), CORS (a preflight is answered
before anything else), authentication (a refused caller's body is never read), the
body-size limit, then FastAPI's routing with the error handlers of ``dev_server.errors``.
Both processes serve their OpenAPI schema at ``/openapi.json`` and Swagger UI at ``/docs``,
with Swagger UI's files served by the app itself (``dev_server.api.docs``).
"""

from __future__ import annotations

import asyncio
import gc
import logging
import time
from collections.abc import AsyncIterator, Callable, Coroutine, Iterable
from contextlib import AbstractAsyncContextManager, AsyncExitStack, asynccontextmanager
from functools import partial
from typing import Any

import anyio
from fastapi import FastAPI
from fastapi.telemetry import TelemetryConfig as FastAPITelemetry

from dev_server import __version__
from dev_server.agents.definition import AgentDefinition
from dev_server.agents.loading import agents_for
from dev_server.agents.registry import AgentRegistry, MemorySettings, memory_options, with_models
from dev_server.agents.runner import TurnRunner
from dev_server.agents.salvage import salvage_dead_streams
from dev_server.agents.signals import ThreadHub
from dev_server.agents.turns import TurnStarter
from dev_server.api import chat, health
from dev_server.api.access_log import AccessLog
from dev_server.api.cors import CorsPolicy, LocalCORS
from dev_server.api.deps import Readiness, Services
from dev_server.api.docs import mount_docs
from dev_server.api.input_guard import InputGuard
from dev_server.api.limits import BodySizeLimit
from dev_server.api.turn_limit import TurnLimit
from dev_server.api.worker_slot import WorkerSlot
from dev_server.auth import Authenticator, AuthMiddleware, BearerTokens
from dev_server.background import BackgroundWork
from dev_server.errors import document_errors, install_error_handlers
from dev_server.kernel.clock import SYSTEM_CLOCK, Clock
from dev_server.kernel.model import LLMClient
from dev_server.llm import LiteLLMClient
from dev_server.llm.local_embedder import require_recall_stack
from dev_server.observability.telemetry import Telemetry, TelemetryConfig, TelemetryScope, logging_to
from dev_server.settings import Settings, otlp_target
from dev_server.storage.composite import OBSERVABILITY, CompositeStore
from dev_server.storage.conversations import ConversationStore
from dev_server.storage.leases import ThreadLeases
from dev_server.storage.rate_windows import RateWindows
from dev_server.storage.stream_log import StreamLog
from dev_server.streaming.recorder import StreamRecording

ROLES = ("gateway", "studio")
log = logging.getLogger(__name__)


# FastAPI's own OpenTelemetry spans, metrics and logs (FastAPI >= 0.143): off. Our telemetry
# records every request (TelemetryScope, AccessLog); theirs would only ask the global providers,
# on every request, whether anyone configured them.
FASTAPI_TELEMETRY_OFF: FastAPITelemetry = {"tracing": False, "metrics": False, "logs": False, "operation_spans": False}


async def _retention(storage: CompositeStore, days: int) -> None:
    """Drop observability rows older than ``days``, at start and then hourly."""
    from dev_server.storage.observability.writer import ObservabilityWriter

    while True:
        if storage.has(OBSERVABILITY):
            try:
                removed = await ObservabilityWriter(storage.domain(OBSERVABILITY)).delete_older_than(days)
                if removed:
                    log.info("retention: removed %d observability rows older than %d days", removed, days)
            except Exception as exc:
                log.warning("retention failed: %s", exc)
        await asyncio.sleep(3600)


async def _sweep_streams(services: Services) -> None:
    """Rebuild the replies of dead streams (``dev_server.agents.salvage``), then delete recorded
    chat streams past their retention (finished, or dead), every so often: at most every
    10 s, sooner for a short retention or dead-after; the only place streams are swept."""
    settings = services.settings
    every_s = min(10.0, max(0.2, min(settings.stream_retention_s, settings.stream_dead_after_s) / 2))
    while True:
        await asyncio.sleep(every_s)
        try:
            await salvage_dead_streams(services.stream_log, services.agents)
            await services.stream_log.sweep()
        except Exception as exc:  # the next sweep gets them
            log.warning("sweeping recorded streams failed: %s", exc)


WARM_UP_LIMIT_S = 120
STREAM_DRAIN_S = 5.0


async def warm_up(llm: LLMClient, readiness: Readiness, *, freeze_heap: bool = False) -> None:
    """Pay the model layer's start-up cost before the first chat does; logs the time.

    With ``freeze_heap`` (a server process), what start-up built is then moved out of the
    garbage collector's sight (``gc.freeze``) before the process reports ready: start-up
    (litellm's import above all, when a model needs it) leaves a large heap that every full
    collection would otherwise walk again (a fifth of save-messages' CPU, measured). Only the
    young generations are collected first: the imports' own automatic collections leave no
    garbage in the old one (a full collection found none, with or without litellm), and
    walking it cost 33 ms of CPU before ``status: ok``, 250 ms with litellm; the young ones
    hold what the warm-up left, in 1 ms."""
    started = time.perf_counter()
    error = None
    try:
        async with asyncio.timeout(WARM_UP_LIMIT_S):
            await llm.warm_up()
    except Exception as exc:  # a failed warm-up only means the first chat pays instead
        error = str(exc) or type(exc).__name__
    if freeze_heap:
        gc.collect(1)
        gc.freeze()
    if error is not None:
        readiness.failed(error, time.perf_counter() - started)
        log.warning("model warm-up failed after %.1f s: %s", readiness.seconds, readiness.error)
    else:
        readiness.done(time.perf_counter() - started)
        log.info("models ready in %.1f s", readiness.seconds)


def model_layer(settings: Settings, agents: Iterable[AgentDefinition]) -> LLMClient:
    """Who answers the model calls: litellm and the local model, or the scripted model of
    ``DEV_SERVER_SCRIPTED_MODEL`` when (and only when) that is set."""
    if settings.scripted_model is None:
        return LiteLLMClient.from_settings(settings, agents)
    from dev_server.llm.scripted_file import scripted_model_from_file

    log.warning("a scripted model answers the model calls (DEV_SERVER_SCRIPTED_MODEL=%s)", settings.scripted_model)
    return scripted_model_from_file(settings.scripted_model, agent_models={a.id: a.model for a in agents})


def storage_for(role: str, settings: Settings) -> CompositeStore:
    """The stores of one process, from the settings (storage itself never reads settings)."""
    return CompositeStore.for_role(role, default_db_url=settings.default_db_url,
                                   observability_db_url=settings.observability_db_url,
                                   busy_timeout_ms=settings.busy_timeout_ms, db_auth_token=settings.db_auth_token,
                                   db_timeout_s=settings.db_timeout_s, write_group=settings.db_write_group,
                                   observability_memory_mb=settings.trace_memory_mb or None)


def _openapi(app: FastAPI, generate: Callable[[FastAPI], dict[str, Any]]) -> dict[str, Any]:
    if app.openapi_schema is None:  # generated once, on the first /openapi.json
        app.openapi_schema = document_errors(generate(app))
    return app.openapi_schema


def _lifespan(services: Services, freeze_heap: bool) -> Callable[[FastAPI], AbstractAsyncContextManager[None]]:
    """Open what the factory built, in order; at shutdown each is closed in reverse order."""

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        async with AsyncExitStack() as stack:
            stack.enter_context(logging_to(services.telemetry))  # what the lifespan starts logs to this app's only
            await services.storage.open()
            stack.push_async_callback(services.storage.close)
            if services.telemetry is not None:  # flushed before the stores close: the studio writes its own spans
                services.telemetry.open()
                stack.push_async_callback(anyio.to_thread.run_sync, services.telemetry.shutdown)
            stack.push_async_callback(services.llm.aclose)  # the provider connections made on this loop
            stack.push_async_callback(services.signals.close)
            if services.semantic_index is not None:
                await services.semantic_index.start()  # resolves the embedder and backfills in the background
                stack.push_async_callback(services.semantic_index.stop)
            await services.background.start()
            stack.push_async_callback(services.background.drain)  # before the stores close: its jobs write to them
            if services.recording is not None:  # replies still streaming after their client left
                stack.push_async_callback(services.recording.producers.drain, STREAM_DRAIN_S)
            for chore in _chores(services, freeze_heap):
                stack.callback(asyncio.create_task(chore).cancel)
            yield

    return lifespan


def _chores(services: Services, freeze_heap: bool) -> list[Coroutine[None, None, None]]:
    """What a process does in the background for as long as it runs."""
    settings = services.settings
    chores = [warm_up(services.llm, services.readiness, freeze_heap=freeze_heap)]
    if services.role == "studio" and settings.trace_retention_days:
        chores.append(_retention(services.storage, settings.trace_retention_days))
    if services.role == "gateway":
        chores.append(_sweep_streams(services))
    return chores


def _telemetry_config(settings: Settings) -> TelemetryConfig:
    return TelemetryConfig(settings.environment, settings.telemetry_queue_size, settings.telemetry_queue_mb,
                           otlp_target(settings, "traces"), otlp_target(settings, "logs"))


def memory_settings(settings: Settings) -> MemorySettings:
    """The settings over the agents' memory options, each with the agents it names."""
    named = frozenset(f"DEV_SERVER_{name.upper()}" for name in settings.model_fields_set)
    return MemorySettings(working_memory=settings.working_memory_agents,
                          observational_memory=settings.observational_memory, om_agents=settings.om_agent_ids,
                          om_model=settings.om_model, om_models=settings.agent_om_models or {},
                          semantic_recall=settings.semantic_recall_agents, named=named)


def create_app(
    role: str,
    settings: Settings | None = None,
    *,
    storage: CompositeStore | None = None,
    llm: LLMClient | None = None,
    authenticator: Authenticator | None = None,
    agents: Iterable[AgentDefinition] | None = None,
    worker: WorkerSlot | None = None,
    freeze_heap: bool = False,
    clock: Clock = SYSTEM_CLOCK,
) -> FastAPI:
    """Build one process's app. Tests inject ``storage`` (temp dirs), ``llm`` (a
    ``ScriptedModel``, ``dev_server.llm.scripted``), ``authenticator`` and ``agents``; by default they come from
    ``settings`` (the agents: the user's, ``DEV_SERVER_AGENTS``, else the built-in ones; each
    with the model the settings give it: ``dev_server.agents.registry.with_models``).
    ``worker`` says which of the gateway's processes this is (``/health``). ``freeze_heap``:
    the server process's own app (see ``warm_up``); never in a test process, where it would
    keep every later test's cyclic garbage. ``clock``: every time the app reads to decide or
    to store (``dev_server.kernel.clock``); a test gives a ``ManualClock``."""
    if role not in ROLES:
        raise ValueError(f"unknown role {role!r}; expected one of {', '.join(ROLES)}")
    settings = settings or Settings.load()
    storage = storage or storage_for(role, settings)
    agents = with_models(agents_for(settings.agents) if agents is None else agents, settings.model,
                         settings.agent_models)
    llm = llm or model_layer(settings, agents)
    if authenticator is None and settings.auth_tokens:
        authenticator = BearerTokens.parse(settings.auth_tokens)
    conversations = ConversationStore(storage.default, clock=clock)
    background = BackgroundWork()
    memories = memory_options(agents, memory_settings(settings))  # each factory once
    semantic_index = None
    searching = sorted(agent_id for agent_id, options in memories.items() if options.uses_vectors)
    if searching:  # only these agents' messages are embedded, and only if what that needs is installed
        require_recall_stack(searching, local=llm.embeds_locally(settings.embedder) is True)
        from dev_server.recall.service import SemanticIndex  # numpy: only in a process that searches by meaning

        semantic_index = SemanticIndex(storage.default, partial(llm.embedder, settings.embedder),
                                       agents=frozenset(searching), requested=settings.embedder, clock=clock)
    registry = AgentRegistry(agents, conversations, memories, background=background, semantic_index=semantic_index)
    telemetry = Telemetry(role, _telemetry_config(settings), storage) if settings.telemetry else None
    runner = TurnRunner(llm, tracer=telemetry.tracer if telemetry is not None else None, agents=registry, clock=clock,
                        trace_input_chars=settings.trace_input_chars)
    db = conversations.db
    stream_log = StreamLog(db, retention_ms=int(settings.stream_retention_s * 1000),
                           dead_after_ms=int(settings.stream_dead_after_s * 1000), clock=clock)
    turns = TurnStarter(runner, ThreadLeases(db, clock=clock), wait_s=settings.turn_wait_s,
                        lease_s=settings.turn_lease_s, checkpoint_every_s=settings.checkpoint_interval_s)
    limit = settings.turn_rate_limit
    # What every handler gets, through dev_server.api.deps.
    services = Services(role=role, settings=settings, storage=storage, conversations=conversations, llm=llm,
                        agents=registry, runner=runner, turns=turns, signals=ThreadHub(), stream_log=stream_log,
                        recording=StreamRecording(stream_log) if settings.stream_resume else None,
                        turn_limit=(TurnLimit(RateWindows(db, clock=clock), limit, settings.turn_rate_window_s)
                                    if limit else None),
                        background=background, telemetry=telemetry, semantic_index=semantic_index,
                        readiness=Readiness(), worker=worker or WorkerSlot(), auth_enabled=authenticator is not None)

    app = FastAPI(title=f"dev-server {role}", version=__version__, lifespan=_lifespan(services, freeze_heap),
                  docs_url=None, redoc_url=None, openapi_url="/openapi.json",  # /docs: mount_docs, offline
                  telemetry=FASTAPI_TELEMETRY_OFF)
    app.state.services = services  # the one thing on app.state; handlers read it through dev_server.api.deps

    install_error_handlers(app)
    app.openapi = partial(_openapi, app, FastAPI.openapi)
    # Each add_middleware wraps what was added before: the last one added is the outermost.
    app.add_middleware(InputGuard)  # inside the size limit: checks and repairs input before routing
    app.add_middleware(BodySizeLimit, max_bytes=settings.max_body_bytes)
    if authenticator is not None:  # outside the body limit: a refused caller's body is never read
        app.add_middleware(AuthMiddleware, authenticator=authenticator)
    app.add_middleware(LocalCORS, policy=CorsPolicy.for_origins(settings.cors_origin_list))
    app.add_middleware(TelemetryScope, telemetry=telemetry)  # all a request logs
    app.add_middleware(AccessLog)  # outermost: one line per request, whatever answered it
    mount_docs(app)
    app.include_router(health.router)
    if role == "gateway":
        app.include_router(chat.router)
    else:
        _include_studio_routes(app, settings)
    return app


def _include_studio_routes(app: FastAPI, settings: Settings) -> None:
    """The studio's routers, imported here: a gateway (each of its workers) never imports
    them nor the OTLP receivers' protobuf messages (~0.15 s of CPU per process)."""
    from dev_server.api import otlp
    from dev_server.api.studio import agents as agent_routes
    from dev_server.api.studio import memory, observability, observational, shell
    from dev_server.api.studio import metrics as metric_routes
    from dev_server.api.studio import tools as tool_routes
    from dev_server.api.studio.ui import studio_ui_router

    # A request is matched against the routes in order: the busiest first (thread creation, a
    # turn, the OTLP ingest), the Studio's constant pages (shell) last; no two of these overlap
    for router in (memory.router, observational.router, agent_routes.router, tool_routes.router, otlp.router,
                   observability.router, observability.legacy, metric_routes.router, shell.router):
        app.include_router(router)
    app.include_router(studio_ui_router(settings.resolved_studio_ui_dir, agent_signals=True))
