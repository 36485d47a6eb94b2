"""FastAPI as FastAPI: each process serves its OpenAPI schema and Swagger UI, the schema
lists every route the app registers, and FastAPI's own validation answers in Mastra's 400
shape (``{"error", "issues": [{"field", "message"}]}``), as the schema says.
"""

from __future__ import annotations

import re

import httpx
import pytest
from fastapi import FastAPI
from fastapi.routing import iter_route_contexts
from fastapi.testclient import TestClient
from pydantic import BaseModel

from dev_server.errors import install_error_handlers
from dev_server.factory import create_app
from dev_server.settings import Settings
from tests.support import LiveApp

# Routes that are not API operations: the Studio's web app (SPA fallback, hot-reload probe)
# and the documentation's own pages.
NOT_OPERATIONS = {"/{path:path}", "/refresh-events", "/openapi.json", "/docs", "/docs/oauth2-redirect"}


def registered(app: FastAPI) -> set[tuple[str, str]]:
    return {(route.path, method.lower()) for route in iter_route_contexts(app.routes)
            if route.path is not None and route.path not in NOT_OPERATIONS
            for method in route.methods or () if method != "HEAD"}


@pytest.mark.parametrize("role", ["gateway", "studio"])
def test_each_process_serves_its_schema_and_docs_listing_every_route(role: str, data_dir):
    app = create_app(role, Settings(data_dir=data_dir))
    with LiveApp(app) as server, httpx.Client(base_url=server.url, timeout=30) as client:
        schema = client.get("/openapi.json")
        docs = client.get("/docs")
    assert schema.status_code == 200 and schema.json()["info"]["title"] == f"dev-server {role}"
    assert docs.status_code == 200 and "swagger-ui" in docs.text and "/openapi.json" in docs.text
    documented = {(path, method) for path, operations in schema.json()["paths"].items() for method in operations}
    routes = registered(app)
    assert len(routes) >= (3 if role == "gateway" else 60)
    assert routes - documented == set(), "routes missing from the OpenAPI schema"
    assert documented - routes == set(), "schema operations no route serves"
    assert ("/health", "get") in documented
    assert ("/api/chat", "post") in documented if role == "gateway" else ("/api/agents", "get") in documented


@pytest.mark.parametrize("role", ["gateway", "studio"])
def test_the_schema_documents_the_400_shape_not_fastapis_422(role: str, data_dir):
    schema = create_app(role, Settings(data_dir=data_dir)).openapi()
    responses = [op["responses"] for ops in schema["paths"].values() for op in ops.values()]
    assert not [r for r in responses if "422" in r]
    assert "HTTPValidationError" not in schema["components"]["schemas"]
    assert schema["components"]["schemas"]["Error"]["required"] == ["error"]


class Note(BaseModel):
    title: str
    tags: list[str] = []


def validating_app() -> FastAPI:
    app = FastAPI()
    install_error_handlers(app)

    @app.post("/notes/{note_id}")
    async def make(note_id: int, note: Note, limit: int = 10) -> dict:
        return {"id": note_id, "title": note.title, "limit": limit}

    return app


@pytest.mark.parametrize("request_kwargs, expected", [
    ({"url": "/notes/1", "json": {"title": "t", "tags": [1]}},
     {"error": "Invalid request body", "issues": [{"field": "tags.0", "message": "Input should be a valid string"}]}),
    ({"url": "/notes/1", "json": {}},
     {"error": "Invalid request body", "issues": [{"field": "title", "message": "Field required"}]}),
    ({"url": "/notes/1", "content": b"{nope", "headers": {"content-type": "application/json"}},
     {"error": "Invalid request body", "issues": [{"field": "body", "message": "JSON decode error"}]}),
    ({"url": "/notes/1?limit=many", "json": {"title": "t"}},
     {"error": "Invalid query parameters",
      "issues": [{"field": "limit",
                  "message": "Input should be a valid integer, unable to parse string as an integer"}]}),
    ({"url": "/notes/one", "json": {"title": "t"}},
     {"error": "Invalid path parameters",
      "issues": [{"field": "note_id",
                  "message": "Input should be a valid integer, unable to parse string as an integer"}]}),
])
def test_one_validation_handler_answers_in_mastras_400_shape(request_kwargs, expected):
    with TestClient(validating_app()) as client:
        response = client.post(**request_kwargs)
    assert response.status_code == 400
    assert response.json() == expected


# --- /docs offline: Swagger UI's files come from the app, never from a CDN ------------------


@pytest.mark.parametrize("role", ["gateway", "studio"])
def test_the_docs_page_loads_everything_from_its_own_server(role: str, data_dir):
    app = create_app(role, Settings(data_dir=data_dir, telemetry=False))
    with LiveApp(app) as server, httpx.Client(base_url=server.url, timeout=30) as client:
        page = client.get("/docs").text
        links = re.findall(r'(?:src|href)="([^"]+)"', page) + re.findall(r"url: '([^']+)'", page)
        assert sorted(links) == ["/docs/assets/favicon.png", "/docs/assets/swagger-ui-bundle.js",
                                 "/docs/assets/swagger-ui.css", "/openapi.json"]
        assert not re.search(r"https?://", page.replace("window.location.origin", ""))
        assert '"validatorUrl": null' in page  # no badge fetched from the online validator
        kinds = {link: client.get(link) for link in links}
        assert all(response.status_code == 200 for response in kinds.values())
        assert kinds["/docs/assets/swagger-ui-bundle.js"].headers["content-type"].startswith("text/javascript")
        assert kinds["/docs/assets/swagger-ui.css"].headers["content-type"].startswith("text/css")
        assert b"SwaggerUIBundle" in kinds["/docs/assets/swagger-ui-bundle.js"].content
        assert client.get("/docs/assets/no-such-file.js").status_code == 404
        assert client.get("/docs/oauth2-redirect").status_code == 200


@pytest.mark.e2e
@pytest.mark.parametrize("role", ["gateway", "studio"])
def test_swagger_ui_renders_in_chromium_with_no_network_but_the_server(role: str, data_dir):
    from tests.kit.studio_ui import CHROMIUM
    from tests.support import run_node

    if not CHROMIUM.exists():
        pytest.skip("Debian chromium is not installed (apt-get install -y chromium)")
    app = create_app(role, Settings(data_dir=data_dir, telemetry=False))
    with LiveApp(app) as server:
        result = run_node("docs_page.mjs", {"url": f"{server.url}/docs"}, timeout=90)
    assert result["ok"], result
    assert result["external"] == [] and result["title"] == f"dev-server {role} - Swagger UI"
    assert result["operations"] >= (3 if role == "gateway" else 60)
    print(f"/docs of the {role}: {result['operations']} operations rendered in {result['loadMs']} ms, offline")
