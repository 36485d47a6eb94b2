"""The one app factory: ``create_app("gateway" | "studio")``.

Both processes are the same app with different routers switched on, over the same default
database. Building the app does no I/O; the lifespan opens the stores (default first, then
each extra domain) and closes them in reverse order.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Iterable
from contextlib import asynccontextmanager

from fastapi import FastAPI

from app import __version__
from app.agents.definition import AgentDefinition
from app.agents.registry import DEFINITIONS, AgentRegistry
from app.agents.runner import TurnRunner
from app.agents.signals import ThreadHub
from app.api import chat, health
from app.api.cors import ReflectingCORS
from app.api.studio import agents as agent_routes
from app.api.studio import memory, observability, shell
from app.api.studio.ui import studio_ui_router
from app.api.limits import BodySizeLimit
from app.auth import Authenticator, BearerTokens
from app.errors import install_error_handlers
from app.llm import LiteLLMClient, LLMClient
from app.settings import Settings
from app.storage.composite import CompositeStore
from app.storage.conversations import ConversationStore

ROLES = ("gateway", "studio")
log = logging.getLogger(__name__)


async def _warm_up(llm: LLMClient) -> None:
    warm_up = getattr(llm, "warm_up", None)
    if warm_up is None:
        return
    try:
        await warm_up()
    except Exception as exc:  # a failed warm-up only means the first chat pays instead
        log.warning("model warm-up failed: %s", exc)


def create_app(
    role: str,
    settings: Settings | None = None,
    *,
    storage: CompositeStore | None = None,
    llm: LLMClient | None = None,
    authenticator: Authenticator | None = None,
    agents: Iterable[AgentDefinition] = DEFINITIONS,
) -> FastAPI:
    """Build one process's app. Tests inject ``storage`` (temp dirs), ``llm`` (litellm's
    ``mock_response``) and ``authenticator``; by default they come from ``settings``."""
    if role not in ROLES:
        raise ValueError(f"unknown role {role!r}; expected one of {', '.join(ROLES)}")
    settings = settings or Settings.load()
    storage = storage or CompositeStore.for_role(role, settings)
    llm = llm or LiteLLMClient(force_local=settings.local_model_only)
    if authenticator is None and settings.auth_tokens:
        authenticator = BearerTokens.parse(settings.auth_tokens)
    conversations = ConversationStore(storage.default)

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        await storage.open()
        # Warm the model layer in the background: the server answers at once, and the
        # first chat does not pay litellm's import.
        warm_up = asyncio.create_task(_warm_up(llm))
        try:
            yield
        finally:
            warm_up.cancel()
            await app.state.signals.close()
            await storage.close()

    app = FastAPI(title=f"dev-server {role}", version=__version__, lifespan=lifespan,
                  docs_url=None, redoc_url=None, openapi_url=None)
    app.state.role = role
    app.state.settings = settings
    app.state.storage = storage
    app.state.conversations = conversations
    app.state.agents = AgentRegistry(agents, conversations)  # calls each memory factory once
    app.state.runner = TurnRunner(llm)
    app.state.authenticator = authenticator
    app.state.signals = ThreadHub()

    install_error_handlers(app)
    app.add_middleware(BodySizeLimit, max_bytes=settings.max_body_bytes)
    app.include_router(health.router)
    if role == "gateway":
        app.include_router(chat.router)
    else:
        app.add_middleware(ReflectingCORS)  # added last, so outermost: preflights never reach routes
        for router in (shell.router, agent_routes.router, memory.router, observability.router,
                       observability.legacy):
            app.include_router(router)
        app.include_router(studio_ui_router(settings.resolved_studio_ui_dir, agent_signals=True))
    return app
