"""The real Mastra Studio web app, served unchanged from a build directory (Mastra's Studio REST API: the web app).

The build is ``dist/studio`` of the ``mastra`` npm package (``dev-server studio-ui``, or ``make
studio-ui``, fetches it: ``dev_server.fetch_studio_ui``): an ``index.html`` with ``%%MASTRA_*%%``
placeholders plus hashed assets. This router is included LAST in the studio app:

- ``GET /`` and any other GET that is neither an ``/api`` path nor a file (the SPA's deep
  links, e.g. ``/agents/chat-agent/threads/<id>``) answer index.html with the placeholders
  filled. The Studio builds its API base as ``${PROTOCOL}://${HOST}:${PORT}`` + ``API_PREFIX``
  (unless ``MASTRA_AUTO_DETECT_URL``/``MASTRA_CLOUD_API_ENDPOINT`` say otherwise), so host,
  port and protocol come from the request's own Host header and scheme: the page then calls
  the origin it was loaded from, on any port. The template is read once per router;
  only those three values are filled per request.
- files in the build (``/assets/*``, the favicon) with explicit content types; Vite's
  content-hashed names are cached for a year, everything else revalidates.
- ``/api`` and ``/api/*`` paths no API route claimed stay a JSON 404, never index.html.
- ``/refresh-events`` (the dev hot-reload ``EventSource`` of index.html) answers 204, which
  makes the browser stop that connection quietly; the page's own retry loop backs off to 30 s.
- without a build, ``GET /`` and the deep links still answer 200 (the Studio's root probe
  and humans) with a short HTML page saying where it was looked for and the one command that
  fetches it; the API is unaffected.
"""

from __future__ import annotations

import mimetypes
import re
from html import escape
from pathlib import Path

from fastapi import APIRouter, Request
from fastapi.responses import FileResponse, HTMLResponse, JSONResponse, Response

INDEX = "index.html"
API_PREFIX = "/api"
IMMUTABLE = "public, max-age=31536000, immutable"
REVALIDATE = "no-cache"

# Vite names hashed files <name>-<8 chars of base64url>.<ext>.
_HASHED = re.compile(r"-[A-Za-z0-9_-]{8}\.[A-Za-z0-9]+$")
_PLACEHOLDER = re.compile(r"%%MASTRA_[A-Z0-9_]+%%")
# What a Host header may hold before it is written into a JS string literal.
_HOST = re.compile(r"^(?P<host>[A-Za-z0-9.-]{1,253}|\[[0-9A-Fa-f:.]{2,45}\])(?::(?P<port>[0-9]{1,5}))?$")
_TYPES = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".mjs": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".json": "application/json",
    ".map": "application/json",
    ".svg": "image/svg+xml",
    ".png": "image/png",
    ".ico": "image/x-icon",
    ".woff2": "font/woff2",
    ".woff": "font/woff",
    ".ttf": "font/ttf",
    ".wasm": "application/wasm",
    ".txt": "text/plain; charset=utf-8",
}

NOT_INSTALLED = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Mastra Studio not installed</title></head>
<body style="font-family: system-ui, sans-serif; max-width: 40rem; margin: 3rem auto; line-height: 1.5">
<h1>The Mastra Studio web app is not installed</h1>
<p>The studio's API is running under <code>/api</code>, but the Studio web app was not found
in <code>{where}</code>.</p>
<p>Fetch it (Node and npm are needed) with</p>
<pre>dev-server studio-ui</pre>
<p>(in a source checkout, <code>make studio-ui</code> does the same), then reload this page.
Or point <code>DEV_SERVER_STUDIO_UI_DIR</code> at a Studio build.</p>
</body></html>
"""


class StudioIndex:
    """index.html with every placeholder but host, port and protocol filled once."""

    def __init__(self, ui_dir: Path | None, *, agent_signals: bool, telemetry: bool) -> None:
        self.ui_dir = ui_dir
        self.fixed = {
            "%%MASTRA_API_PREFIX%%": API_PREFIX,
            "%%MASTRA_STUDIO_BASE_PATH%%": "",
            "%%MASTRA_AGENT_SIGNALS%%": "true" if agent_signals else "false",
            # The Studio otherwise sends PostHog analytics to us.posthog.com.
            "%%MASTRA_TELEMETRY_DISABLED%%": "false" if telemetry else "true",
        }
        self._template: str | None = None

    def template(self) -> str | None:
        # Cached after the first successful read; while missing, checked again each time so
        # that `make studio-ui` on a running server only needs a reload.
        if self._template is None and self.ui_dir is not None:
            try:
                raw = (self.ui_dir / INDEX).read_text(encoding="utf-8")
            except OSError:
                return None
            self._template = _PLACEHOLDER.sub(self._fill_fixed, raw)
        return self._template

    def _fill_fixed(self, match: re.Match[str]) -> str:
        name = match[0]
        if name in ("%%MASTRA_SERVER_HOST%%", "%%MASTRA_SERVER_PORT%%", "%%MASTRA_SERVER_PROTOCOL%%"):
            return name
        return self.fixed.get(name, "")

    def render(self, request: Request) -> Response:
        template = self.template()
        if template is None:
            return HTMLResponse(NOT_INSTALLED.format(where=escape(str(self.ui_dir or "(no directory given)"))),
                                headers={"Cache-Control": REVALIDATE})
        origin = _origin(request)
        if origin is None:
            return JSONResponse({"error": "Invalid Host header"}, status_code=400)
        protocol, host, port = origin
        html = (template.replace("%%MASTRA_SERVER_PROTOCOL%%", protocol)
                .replace("%%MASTRA_SERVER_HOST%%", host)
                .replace("%%MASTRA_SERVER_PORT%%", port))
        return HTMLResponse(html, headers={"Cache-Control": REVALIDATE, "Vary": "Host"})


def _origin(request: Request) -> tuple[str, str, str] | None:
    """(protocol, host, port) the browser used, validated so it is safe inside a JS string."""
    protocol = request.url.scheme if request.url.scheme in ("http", "https") else "http"
    host_header = request.headers.get("host")
    if host_header is None:  # HTTP/1.0 without Host: the socket we were reached on
        server = request.scope.get("server") or ("localhost", 443 if protocol == "https" else 80)
        host_header = f"[{server[0]}]:{server[1]}" if ":" in str(server[0]) else f"{server[0]}:{server[1]}"
    match = _HOST.match(host_header.strip())
    if match is None:
        return None
    port = match["port"] or ("443" if protocol == "https" else "80")
    if not 0 < int(port) < 65536:
        return None
    return protocol, match["host"], port


def _is_api(path: str) -> bool:
    return path == API_PREFIX or path.startswith(API_PREFIX + "/")


def _build_file(root: Path | None, path: str) -> Path | None:
    """The file under ``root`` that ``path`` names, or None. Never leaves ``root``."""
    if root is None:
        return None
    parts = [part for part in path.split("/") if part]
    if not parts or any(part in (".", "..") or part.startswith(".") or "\\" in part or "\x00" in part
                        for part in parts):
        return None
    try:
        candidate = root.joinpath(*parts).resolve()
        if not candidate.is_relative_to(root) or not candidate.is_file():
            return None
    except (OSError, ValueError):
        return None
    return candidate


def _file_response(file: Path, request_path: str) -> FileResponse:
    media_type = _TYPES.get(file.suffix.lower()) or mimetypes.guess_type(file.name)[0] or "application/octet-stream"
    hashed = request_path.startswith("/assets/") and _HASHED.search(file.name) is not None
    return FileResponse(file, media_type=media_type, headers={"Cache-Control": IMMUTABLE if hashed else REVALIDATE,
                                                              "X-Content-Type-Options": "nosniff"})


def studio_ui_router(ui_dir: Path | None, *, agent_signals: bool = False, telemetry: bool = False) -> APIRouter:
    """Routes for the Studio web app from ``ui_dir``; include this router after all others.

    ``agent_signals`` becomes ``window.MASTRA_AGENT_SIGNALS``: False makes the Studio chat
    over ``POST /api/agents/:id/stream``; True over ``send-message`` + ``threads/subscribe``
    (Mastra's Studio REST API: chat transport). ``telemetry`` False (the default) disables the Studio's PostHog.
    """
    root = ui_dir.resolve() if ui_dir is not None else None
    index = StudioIndex(root, agent_signals=agent_signals, telemetry=telemetry)
    router = APIRouter(include_in_schema=False)

    @router.get("/refresh-events")
    async def refresh_events() -> Response:
        return Response(status_code=204)

    @router.api_route("/{path:path}", methods=["GET", "HEAD"])
    async def studio(request: Request, path: str) -> Response:
        request_path = request.url.path
        if _is_api(request_path):
            return JSONResponse({"error": "Not found"}, status_code=404)
        file = _build_file(root, request_path)
        if file is not None and file.name != INDEX:
            return _file_response(file, request_path)
        if request_path.startswith("/assets/"):  # a stale hashed name: never answer it with HTML
            return JSONResponse({"error": "Not found"}, status_code=404)
        return index.render(request)

    return router
