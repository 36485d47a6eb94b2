"""The authentication hook: off by default; when on, every request must name a principal.

An ``Authenticator`` turns a request into a principal id, or raises ``Unauthorized``.
With a principal, the resource of everything the request touches is forced to
``user:<principal>`` and whatever resource the client sent is ignored (docs/architecture.md#decisions).
The built-in one maps bearer tokens to principals (``DEV_SERVER_AUTH_TOKENS=tok=alice``);
a deployment plugs its own in through ``create_app(..., authenticator=...)``.
"""

from __future__ import annotations

import hmac
from collections.abc import Awaitable, Callable

from starlette.requests import HTTPConnection
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from dev_server.auth_tokens import SERVICE_PRINCIPAL, service_token, token_principals
from dev_server.kernel.errors import Unauthorized

Authenticator = Callable[[HTTPConnection], Awaitable[str]]


def resource_for(principal: str) -> str:
    return f"user:{principal}"


class BearerTokens:
    def __init__(self, tokens: dict[str, str]) -> None:
        if not tokens:
            raise ValueError("BearerTokens needs at least one token")
        self._tokens = tokens

    @classmethod
    def parse(cls, spec: str) -> BearerTokens:
        """``token=principal,token2=principal2`` (``DEV_SERVER_AUTH_TOKENS``, which the settings
        have already checked), plus the token of the service principal: the gateway's own span
        exporter, which may write spans of any resource (it reports every user's runs), which
        no user token may."""
        pairs = token_principals(spec)
        pairs[service_token(spec)] = SERVICE_PRINCIPAL
        return cls(pairs)

    async def __call__(self, request: HTTPConnection) -> str:
        scheme, _, token = request.headers.get("authorization", "").partition(" ")
        if scheme.lower() == "bearer":
            for known, principal in self._tokens.items():
                if hmac.compare_digest(known.encode(), token.strip().encode()):
                    return principal
        raise Unauthorized("Authentication required", message="Send a valid 'Authorization: Bearer <token>' header")


def is_public(path: str) -> bool:
    """Paths anyone may fetch with auth on: the health probe and the Studio's static web app
    (everything outside ``/api`` and the OTLP receivers ``/v1``)."""
    if path == "/health":
        return True
    return not (path == "/api" or path.startswith("/api/") or path.startswith("/v1/"))


class AuthMiddleware:
    """Decides the principal of every HTTP request once, from its headers, before any route
    runs or any body is read. A refused request gets a 401 JSON body; an accepted one has
    ``scope["state"]["principal"]`` (read through ``dev_server.api.deps.Principal``)."""

    def __init__(self, app: ASGIApp, authenticator: Authenticator) -> None:
        self.app = app
        self.authenticator = authenticator

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or is_public(scope["path"]):
            await self.app(scope, receive, send)
            return
        try:
            principal = await self.authenticator(HTTPConnection(scope))
        except Unauthorized as exc:
            await JSONResponse(exc.body(), status_code=exc.status,
                               headers={"WWW-Authenticate": "Bearer"})(scope, receive, send)
            return
        scope.setdefault("state", {})["principal"] = principal
        await self.app(scope, receive, send)
