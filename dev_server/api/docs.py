"""Swagger UI at ``/docs``, from files the app serves itself: the page works offline.

FastAPI's default ``/docs`` page loads Swagger UI's script, stylesheet and icon from a CDN,
so on a machine without internet access (or behind a proxy that blocks the CDN) it is a
blank page. Here, as FastAPI documents for self-hosted assets, the app's own ``docs_url``
is off and ``get_swagger_ui_html`` points at ``/docs/assets/``, a static mount of the files
the ``fastapi-offline`` package ships (Swagger UI 5, which reads the OpenAPI 3.1 schema
FastAPI writes; about 1.7 MB, pinned in pyproject.toml). Only its files are used, not its
app factory. The online validator badge is off too: nothing on the page leaves this server.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

from fastapi import APIRouter, FastAPI, Request
from fastapi.openapi.docs import get_swagger_ui_html, get_swagger_ui_oauth2_redirect_html
from fastapi.responses import HTMLResponse
from fastapi.staticfiles import StaticFiles

DOCS = "/docs"
ASSETS = "/docs/assets"
OAUTH2_REDIRECT = "/docs/oauth2-redirect"


def assets_dir() -> Path:
    """The directory of Swagger UI's files (``swagger-ui-bundle.js``, ``swagger-ui.css``, ``favicon.png``)."""
    spec = importlib.util.find_spec("fastapi_offline")
    if spec is None or spec.origin is None:
        raise RuntimeError("fastapi-offline is not installed: pip install dev-server's dependencies again")
    return Path(spec.origin).parent / "static"


def mount_docs(app: FastAPI) -> None:
    """``/docs``, its OAuth2 redirect page and its assets, on ``app`` (whose ``docs_url`` is None)."""
    app.mount(ASSETS, StaticFiles(directory=assets_dir()), name="docs-assets")
    app.include_router(_pages(title=f"{app.title} - Swagger UI", openapi_url=app.openapi_url or "/openapi.json"))


def _pages(title: str, openapi_url: str) -> APIRouter:
    router = APIRouter(include_in_schema=False)

    @router.get(DOCS)
    async def swagger_ui(request: Request) -> HTMLResponse:
        root = request.scope.get("root_path", "")
        return get_swagger_ui_html(
            openapi_url=f"{root}{openapi_url}", title=title, oauth2_redirect_url=f"{root}{OAUTH2_REDIRECT}",
            swagger_js_url=f"{root}{ASSETS}/swagger-ui-bundle.js", swagger_css_url=f"{root}{ASSETS}/swagger-ui.css",
            swagger_favicon_url=f"{root}{ASSETS}/favicon.png", swagger_ui_parameters={"validatorUrl": None})

    @router.get(OAUTH2_REDIRECT)
    async def swagger_ui_redirect() -> HTMLResponse:
        return get_swagger_ui_oauth2_redirect_html()

    return router
