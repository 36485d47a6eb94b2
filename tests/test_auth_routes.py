"""Authentication on every route, enforced once (dev_server/auth.py ``AuthMiddleware``).

With auth on, each process's app is built and served over real HTTP, and every route it
registers is called with every method it answers: path parameters filled with dummy values,
and, where the method carries one, a body that is not even JSON (auth must come before the
body is read or validated). A missing, a wrong, an empty and a Basic-auth credential get a
401 JSON body; a valid bearer token gets past auth (anything but 401). The exceptions are
the public ones: ``/health``, the Studio's static web app and the API documentation.
"""

from __future__ import annotations

import base64
import re

import httpx
import pytest
from fastapi.routing import iter_route_contexts

from dev_server.factory import create_app
from dev_server.settings import Settings
from tests.kit.local_http import local_http
from tests.support import LiveApp

TOKENS = "ta=alice,tb=bob"
VALID = {"authorization": "Bearer ta"}
REFUSED = {
    "missing": {},
    "wrong bearer": {"authorization": "Bearer not-a-token"},
    "bearer without a token": {"authorization": "Bearer"},
    "token without scheme": {"authorization": "ta"},
    "basic auth": {"authorization": "Basic " + base64.b64encode(b"alice:ta").decode()},
    "basic with the token": {"authorization": "Basic " + base64.b64encode(b"ta").decode()},
}
# Public by design: the probe, the Studio web app (its files and SPA deep links), the docs.
PUBLIC = {"/health", "/{path:path}", "/refresh-events", "/docs", "/docs/oauth2-redirect", "/openapi.json"}
BODY_METHODS = {"POST", "PUT", "PATCH", "DELETE"}
PARAM = re.compile(r"\{(?P<name>\w+)(?::(?P<kind>\w+))?\}")
DUMMY = {"str": "dummy", "path": "dummy/deeper", "int": "1", "float": "1.5",
         "uuid": "00000000-0000-0000-0000-000000000000"}


def calls(app) -> list[tuple[str, str, str]]:
    """(template, method, concrete path) for every method of every HTTP route of ``dev_server``,
    included routers' routes too (FastAPI's ``iter_route_contexts`` flattens them)."""
    found = []
    for route in iter_route_contexts(app.routes):
        if route.path is None or not route.methods:
            continue
        path = PARAM.sub(lambda match: DUMMY[match["kind"] or "str"], route.path)
        found.extend((route.path, method, path) for method in sorted(route.methods))
    return found


def send(client: httpx.Client, method: str, path: str, headers: dict[str, str]) -> httpx.Response:
    body = {"content": b"{not json", "headers": {**headers, "content-type": "application/json"}} \
        if method in BODY_METHODS else {"headers": headers}
    # Streamed: a route that answers with an endless SSE stream still gives its status.
    with client.stream(method, path, **body) as response:
        if method != "HEAD" and response.status_code == 401:
            response.read()
        return response


@pytest.fixture(params=["gateway", "studio"])
def served(request, data_dir):
    app = create_app(request.param, Settings(data_dir=data_dir, auth_tokens=TOKENS))
    with LiveApp(app) as server, httpx.Client(base_url=server.url, timeout=30) as client:
        yield request.param, app, client


def test_every_route_refuses_every_bad_credential_before_reading_the_body(served):
    role, app, client = served
    routes = calls(app)
    protected = [call for call in routes if call[0] not in PUBLIC]
    assert len(protected) >= (3 if role == "gateway" else 60), "the walk found too few routes"
    for template, method, path in protected:
        for case, headers in REFUSED.items():
            response = send(client, method, path, headers)
            assert response.status_code == 401, (method, template, case, response.status_code)
            if method != "HEAD":
                assert response.json()["error"] == "Authentication required", (method, template, case)
                assert response.headers["www-authenticate"] == "Bearer"


def test_a_valid_token_gets_past_auth_on_every_route(served):
    _, app, client = served
    for template, method, path in calls(app):
        if template in PUBLIC:
            continue
        response = send(client, method, path, VALID)
        assert response.status_code != 401, (method, template)


def test_the_public_routes_need_no_credential(served):
    role, app, client = served
    public = [call for call in calls(app) if call[0] in PUBLIC]
    expected = {"/health", "/docs", "/openapi.json", "/docs/oauth2-redirect"}
    if role == "studio":
        expected |= {"/{path:path}", "/refresh-events"}
    assert {template for template, _, _ in public} == expected
    for template, method, path in public:
        assert send(client, method, path, {}).status_code < 400, (method, template)
    # The SPA fallback is public, but an /api path it would catch is not.
    assert send(client, "GET", "/api/no-such-route", {}).status_code == 401


def test_the_studio_says_auth_is_on(data_dir):
    app = create_app("studio", Settings(data_dir=data_dir, auth_tokens=TOKENS))
    with LiveApp(app) as server:
        answer = local_http.get(f"{server.url}/api/auth/capabilities", headers=VALID)
    assert answer.json() == {"enabled": True, "login": None}
