"""The one app factory: ``create_app("gateway" | "studio")``.

Both processes are the same app with different routers switched on, over the same default
database. Building the app does no I/O; the lifespan opens the stores (default first, then
each extra domain) and closes them in reverse order.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI

from app import __version__
from app.api import health
from app.api.limits import BodySizeLimit
from app.errors import install_error_handlers
from app.settings import Settings
from app.storage.composite import CompositeStore
from app.storage.conversations import ConversationStore

ROLES = ("gateway", "studio")


def create_app(role: str, settings: Settings | None = None, *, storage: CompositeStore | None = None) -> FastAPI:
    if role not in ROLES:
        raise ValueError(f"unknown role {role!r}; expected one of {', '.join(ROLES)}")
    settings = settings or Settings.load()
    storage = storage or CompositeStore.for_role(role, settings)

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        await storage.open()
        try:
            yield
        finally:
            await storage.close()

    app = FastAPI(title=f"dev-server {role}", version=__version__, lifespan=lifespan,
                  docs_url=None, redoc_url=None, openapi_url=None)
    app.state.role = role
    app.state.settings = settings
    app.state.storage = storage
    app.state.conversations = ConversationStore(storage.default)

    install_error_handlers(app)
    app.add_middleware(BodySizeLimit, max_bytes=settings.max_body_bytes)
    app.include_router(health.router)
    return app
