"""CORS for the Studio (STUDIO-REST.md section 2).

The Studio fetches with ``credentials: "include"``, which browsers refuse to combine with
``Access-Control-Allow-Origin: *``. So the request's Origin is echoed with credentials
allowed, and the requested headers are reflected (users add custom headers in Studio
settings). Preflights answer 204 without reaching the routes.
"""

from __future__ import annotations

from starlette.datastructures import Headers, MutableHeaders
from starlette.types import ASGIApp, Message, Receive, Scope, Send

ALLOW_METHODS = "GET, POST, PUT, PATCH, DELETE, OPTIONS"
DEFAULT_ALLOW_HEADERS = "Content-Type, Authorization, x-mastra-client-type, x-mastra-dev-playground, A2A-Version"


class ReflectingCORS:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        origin = headers.get("origin")
        if scope["method"] == "OPTIONS" and headers.get("access-control-request-method"):
            allow = {
                "Access-Control-Allow-Methods": ALLOW_METHODS,
                "Access-Control-Allow-Headers": headers.get("access-control-request-headers") or DEFAULT_ALLOW_HEADERS,
                "Access-Control-Max-Age": "600",
                **_origin_headers(origin),
            }
            await send({"type": "http.response.start", "status": 204,
                        "headers": [(k.lower().encode(), v.encode()) for k, v in allow.items()]})
            await send({"type": "http.response.body", "body": b""})
            return
        if origin is None:
            await self.app(scope, receive, send)
            return

        async def send_with_cors(message: Message) -> None:
            if message["type"] == "http.response.start":
                response_headers = MutableHeaders(scope=message)
                for key, value in _origin_headers(origin).items():
                    if key == "Vary":
                        response_headers.add_vary_header("Origin")
                    else:
                        response_headers[key] = value
            await send(message)

        await self.app(scope, receive, send_with_cors)


def _origin_headers(origin: str | None) -> dict[str, str]:
    if origin is None:
        return {"Vary": "Origin"}
    return {"Access-Control-Allow-Origin": origin, "Access-Control-Allow-Credentials": "true", "Vary": "Origin",
            "Access-Control-Expose-Headers": "*"}
