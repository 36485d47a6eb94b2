"""The one app factory: ``create_app("gateway" | "studio")``.

Both processes are the same app with different routers switched on, over the same default
database. Building the app does no I/O; the lifespan opens the stores (default first, then
each extra domain), starts warming the model layer up in the background (the tokenizer and
the local model, plus litellm's import of seconds when an agent's model needs litellm:
``/health`` says ``status: "starting"`` until it is done, so the server answers at once and
a probe can wait for ``"ok"``), starts the background work
(``dev_server.background``) and, on shutdown, drains it, closes the model layer's provider
connections, then the stores in reverse order.

Middleware, outermost first: the telemetry scope (what a request logs is this app's, when
a process holds more than one: ``dev_server.observability.telemetry``), CORS (a preflight is
answered before anything else), authentication (a refused caller's body is never read),
the body-size limit, then FastAPI's routing with the error handlers of ``dev_server.errors``.
Both processes serve their OpenAPI schema at ``/openapi.json`` and Swagger UI at ``/docs``.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import time
from collections.abc import AsyncIterator, Callable, Iterable
from contextlib import asynccontextmanager
from functools import partial
from typing import Any

import anyio
from fastapi import FastAPI

from dev_server import __version__
from dev_server.agents.definition import AgentDefinition
from dev_server.agents.registry import DEFINITIONS, AgentRegistry, MemorySettings, memory_options
from dev_server.agents.runner import TurnRunner
from dev_server.agents.salvage import salvage_dead_streams
from dev_server.agents.signals import ThreadHub
from dev_server.api import chat, health, otlp
from dev_server.api.cors import CorsPolicy, LocalCORS
from dev_server.api.deps import Readiness, Services
from dev_server.background import BackgroundWork
from dev_server.api.studio import agents as agent_routes
from dev_server.api.studio import memory, observability, observational, shell
from dev_server.api.studio import tools as tool_routes
from dev_server.api.studio import metrics as metric_routes
from dev_server.api.limits import BodySizeLimit
from dev_server.api.input_guard import InputGuard
from dev_server.api.studio.ui import studio_ui_router
from dev_server.auth import Authenticator, AuthMiddleware, BearerTokens
from dev_server.errors import document_errors, install_error_handlers
from dev_server.llm import LiteLLMClient
from dev_server.kernel.model import LLMClient
from dev_server.llm.embeddings import Embedder, local_embedder
from dev_server.observability.telemetry import Telemetry, TelemetryScope, logging_to
from dev_server.settings import Settings
from dev_server.storage.composite import OBSERVABILITY, CompositeStore
from dev_server.storage.conversations import ConversationStore
from dev_server.workers import WorkerSlot

ROLES = ("gateway", "studio")
log = logging.getLogger(__name__)


async def _retention(storage: CompositeStore, days: int) -> None:
    """Drop observability rows older than ``days``, at start and then hourly."""
    from dev_server.observability.writer import ObservabilityWriter

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
    collection would otherwise walk again (a fifth of save-messages' CPU, measured)."""
    warm = getattr(llm, "warm_up", None)
    started = time.perf_counter()
    error = None
    try:
        if warm is not None:
            async with asyncio.timeout(WARM_UP_LIMIT_S):
                await warm()
    except Exception as exc:  # a failed warm-up only means the first chat pays instead
        error = str(exc) or type(exc).__name__
    if freeze_heap:
        gc.collect()
        gc.freeze()
    if error is not None:
        readiness.failed(error, time.perf_counter() - started)
        log.warning("model warm-up failed after %.1f s: %s", readiness.seconds, readiness.error)
    else:
        readiness.done(time.perf_counter() - started)
        log.info("models ready in %.1f s", readiness.seconds)


async def _embedder(llm: LLMClient, mastra_id: str) -> Embedder:
    """The embedder of semantic recall: by the model seam when it has one (a provider's
    through litellm, or the local one), else the built-in local model (a scripted test client)."""
    choose = getattr(llm, "embedder", None)
    return await choose(mastra_id) if choose is not None else local_embedder()


def model_layer(settings: Settings, agents: Iterable[AgentDefinition]) -> LLMClient:
    """Who answers the model calls: litellm and the local model, or the scripted model of
    ``DEV_SERVER_SCRIPTED_MODEL`` when (and only when) that is set."""
    if settings.scripted_model is None:
        return LiteLLMClient.from_settings(settings, agents)
    from dev_server.llm.scripted import ScriptedModel

    log.warning("a scripted model answers the model calls (DEV_SERVER_SCRIPTED_MODEL=%s)", settings.scripted_model)
    return ScriptedModel.from_file(settings.scripted_model, agent_models={a.id: a.model for a in agents})


def storage_for(role: str, settings: Settings) -> CompositeStore:
    """The stores of one process, from the settings (storage itself never reads settings)."""
    return CompositeStore.for_role(role, default_db_url=settings.default_db_url,
                                   observability_db_url=settings.observability_db_url,
                                   busy_timeout_ms=settings.busy_timeout_ms, db_auth_token=settings.db_auth_token,
                                   db_timeout_s=settings.db_timeout_s)


def _openapi(app: FastAPI, generate: Callable[[FastAPI], dict[str, Any]]) -> dict[str, Any]:
    if app.openapi_schema is None:  # generated once, on the first /openapi.json
        app.openapi_schema = document_errors(generate(app))
    return app.openapi_schema


def create_app(
    role: str,
    settings: Settings | None = None,
    *,
    storage: CompositeStore | None = None,
    llm: LLMClient | None = None,
    authenticator: Authenticator | None = None,
    agents: Iterable[AgentDefinition] = DEFINITIONS,
    worker: WorkerSlot | None = None,
    freeze_heap: bool = False,
) -> FastAPI:
    """Build one process's app. Tests inject ``storage`` (temp dirs), ``llm`` (a
    ``ScriptedModel``, ``dev_server.llm.scripted``) and ``authenticator``; by default they come from ``settings``.
    ``worker`` says which of the gateway's processes this is (``/health``). ``freeze_heap``:
    the server process's own app (see ``warm_up``); never in a test process, where it would
    keep every later test's cyclic garbage."""
    if role not in ROLES:
        raise ValueError(f"unknown role {role!r}; expected one of {', '.join(ROLES)}")
    settings = settings or Settings.load()
    storage = storage or storage_for(role, settings)
    agents = tuple(agents)
    llm = llm or model_layer(settings, agents)
    if authenticator is None and settings.auth_tokens:
        authenticator = BearerTokens.parse(settings.auth_tokens)
    conversations = ConversationStore(storage.default)

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        await storage.open()
        telemetry = Telemetry(role, settings, storage) if settings.telemetry else None
        services.telemetry = telemetry
        if telemetry is not None:
            runner.tracer = telemetry.tracer
        with logging_to(telemetry):  # what the lifespan starts logs to this app's telemetry only
            chores = [asyncio.create_task(warm_up(llm, readiness, freeze_heap=freeze_heap))]
            if role == "studio" and settings.trace_retention_days:
                chores.append(asyncio.create_task(_retention(storage, settings.trace_retention_days)))
            if role == "gateway":
                chores.append(asyncio.create_task(_sweep_streams(services)))
            await background.start()
            if semantic_index is not None:
                await semantic_index.start()  # resolves the embedder and backfills in the background
            try:
                yield
            finally:
                for task in chores:
                    task.cancel()
                if services.recording is not None:  # replies still streaming after their client left
                    await services.recording.producers.drain(STREAM_DRAIN_S)
                await background.drain()  # before the stores close: its jobs write to them
                if semantic_index is not None:
                    await semantic_index.stop()
                await signals.close()
                close_llm = getattr(llm, "aclose", None)  # a scripted test client may have none
                if close_llm is not None:
                    await close_llm()
                if telemetry is not None:  # flush before the stores close: the studio writes its own spans
                    await anyio.to_thread.run_sync(telemetry.shutdown)
                await storage.close()

    background = BackgroundWork()
    memories = memory_options(agents, MemorySettings(settings.working_memory_agents, settings.observational_memory,
                                                     settings.semantic_recall_agents))  # each factory once
    semantic_index = None
    if any(options.uses_vectors for options in memories.values()):
        from dev_server.recall.service import SemanticIndex  # numpy: only in a process that searches by meaning

        semantic_index = SemanticIndex(storage.default, partial(_embedder, llm, settings.embedder),
                                       requested=settings.embedder)
    registry = AgentRegistry(agents, conversations, memories, background=background, semantic_index=semantic_index)
    runner = TurnRunner(llm, agents=registry)
    signals = ThreadHub()
    readiness = Readiness()
    # What every handler gets, through dev_server.api.deps.
    services = Services(role=role, settings=settings, storage=storage, conversations=conversations,
                        agents=registry, runner=runner, signals=signals, auth_enabled=authenticator is not None,
                        readiness=readiness, background=background, worker=worker or WorkerSlot(),
                        semantic_index=semantic_index)

    app = FastAPI(title=f"dev-server {role}", version=__version__, lifespan=lifespan,
                  docs_url="/docs", redoc_url=None, openapi_url="/openapi.json")
    app.state.services = services  # the one thing on app.state; handlers read it through dev_server.api.deps

    install_error_handlers(app)
    app.openapi = partial(_openapi, app, FastAPI.openapi)
    # Each add_middleware wraps what was added before: the last one added is the outermost.
    app.add_middleware(InputGuard)  # inside the size limit: checks and repairs input before routing
    app.add_middleware(BodySizeLimit, max_bytes=settings.max_body_bytes)
    if authenticator is not None:  # outside the body limit: a refused caller's body is never read
        app.add_middleware(AuthMiddleware, authenticator=authenticator)
    app.add_middleware(LocalCORS, policy=CorsPolicy.for_origins(settings.cors_origin_list))
    app.add_middleware(TelemetryScope, telemetry=lambda: services.telemetry)  # outermost: all a request logs
    app.include_router(health.router)
    if role == "gateway":
        app.include_router(chat.router)
    else:
        for router in (shell.router, agent_routes.router, tool_routes.router, observational.router, memory.router,
                       observability.router, observability.legacy, metric_routes.router, otlp.router):
            app.include_router(router)
        app.include_router(studio_ui_router(settings.resolved_studio_ui_dir, agent_signals=True))
    return app
