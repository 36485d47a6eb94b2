"""CORS for both processes: Starlette's ``CORSMiddleware``, configured from the settings.

The default lets only pages served from this machine read responses: an Origin of
``localhost``, ``127.0.0.1`` or ``[::1]``, on any port, over http or https, with credentials
(the Studio fetches with ``credentials: "include"``, which rules out ``*``; Mastra's Studio REST contract
section 2). ``DEV_SERVER_CORS_ORIGINS`` replaces that with a list of exact origins (still
with credentials), or ``*``: any origin, without credentials. Requested headers are reflected
(the Studio's ``x-mastra-*`` and whatever a user adds in its settings).

Starlette's own middleware is used as is, except for two answers: a preflight it accepts is
a bodiless 204 (what Mastra's Studio REST contract asks for), and a foreign origin gets no CORS header at
all (Starlette would still send ``Allow-Credentials`` and the allowed methods), so nothing
tells a foreign page what it could do here. The middleware is the outermost one: preflights
are answered before authentication and never reach a route.
"""

from __future__ import annotations

from dataclasses import dataclass

from starlette.datastructures import Headers, MutableHeaders
from starlette.middleware.cors import CORSMiddleware
from starlette.responses import JSONResponse, Response
from starlette.types import ASGIApp, Message, Send

LOCAL_ORIGINS = r"https?://(localhost|127\.0\.0\.1|\[::1\])(:[0-9]{1,5})?"
ALLOW_METHODS = ("GET", "POST", "PUT", "PATCH", "DELETE", "OPTIONS")
# Response headers a page may read besides the CORS-safelisted ones.
EXPOSE_HEADERS = ("x-vercel-ai-ui-message-stream", "Retry-After", "WWW-Authenticate")


@dataclass(frozen=True)
class CorsPolicy:
    """Which origins may read responses, and whether with credentials."""

    origins: tuple[str, ...] = ()
    origin_regex: str | None = LOCAL_ORIGINS
    credentials: bool = True

    @classmethod
    def for_origins(cls, origins: tuple[str, ...] | None) -> CorsPolicy:
        """``None`` = local origins; ``("*",)`` = any origin without credentials; else exact
        origins (``Settings.cors_origin_list`` has checked them)."""
        if origins is None:
            return cls()
        if origins == ("*",):
            return cls(origins=origins, origin_regex=None, credentials=False)
        return cls(origins=origins, origin_regex=None, credentials=True)


class LocalCORS(CORSMiddleware):
    """Starlette's CORS with a 204 preflight and silence towards foreign origins."""

    def __init__(self, app: ASGIApp, policy: CorsPolicy) -> None:
        super().__init__(app, allow_origins=policy.origins, allow_origin_regex=policy.origin_regex,
                         allow_credentials=policy.credentials, allow_methods=ALLOW_METHODS, allow_headers=["*"],
                         expose_headers=EXPOSE_HEADERS)

    def preflight_response(self, request_headers: Headers) -> Response:
        if not self.is_allowed_origin(request_headers["origin"]):
            return JSONResponse({"error": "Origin not allowed"}, status_code=403, headers={"Vary": "Origin"})
        answer = super().preflight_response(request_headers)
        if answer.status_code != 200:  # e.g. a method we do not serve: Starlette's 400, as JSON
            return JSONResponse({"error": answer.body.decode()}, status_code=400, headers={"Vary": "Origin"})
        headers = {key: value for key, value in answer.headers.items() if key not in ("content-length", "content-type")}
        return Response(status_code=204, headers=headers)

    async def send(self, message: Message, send: Send, request_headers: Headers) -> None:
        origin = request_headers.get("origin")
        if message["type"] == "http.response.start" and origin is not None and not self.is_allowed_origin(origin):
            message.setdefault("headers", [])
            MutableHeaders(scope=message).add_vary_header("Origin")
            await send(message)
            return
        await super().send(message, send, request_headers)
