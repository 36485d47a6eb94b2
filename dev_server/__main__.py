"""The ``dev-server`` command (also ``python -m dev_server``): ``dev``, ``gateway``, ``studio``,
``health ROLE`` and ``studio-ui``; ``dev-server COMMAND --help`` says what each takes.

``--agents`` (or ``DEV_SERVER_AGENTS``) runs the user's own agents instead of the built-in
ones: an import string or a ``.py`` file, loaded and checked before anything starts
(``dev_server.agents.loading``); ``dev`` hands it to both processes.

``gateway`` runs ``DEV_SERVER_WORKERS`` processes on one socket (default: one per core; with
more than one, uvicorn's supervisor runs and replaces them: ``dev_server.workers``), ``studio``
always one (it alone opens the DuckDB file). ``dev`` runs both as child processes, prints a banner with both URLs
and the models in use once both answer, and stops both on Ctrl-C (or when either one
exits). Start-up problems (a bad command line, bad settings, a non-loopback host without
auth, port in use, unwritable data dir, unreadable database: ``dev_server.preflight``;
semantic recall without what it needs installed) print one ``error:`` line and exit 2.
``studio-ui`` fetches the Studio web app (``dev_server.fetch_studio_ui``) to where the studio
serves it from.

Start-up order of one process: bind the port (so "in use" fails at once), build the app (so
a configuration it refuses is one line), open the stores (so a bad database is one line),
serve; with workers, the supervisor does the first three once before it starts them. The
models warm up in the background; ``/health`` says ``status: "starting"`` until they are,
then ``"ok"``, and the dev banner waits for that. ``health ROLE`` exits 0 when that role's
``/health`` on this machine answers ``status: "ok"`` (the image's HEALTHCHECK,
``deploy/healthcheck.py``, checks the same with the standard library only).

Idle keep-alive connections stay open ``DEV_SERVER_KEEP_ALIVE_S`` (uvicorn's default, 5 s,
is shorter than common client pools keep a socket, so a client reusing one just then got a
reset), and every response says so in ``Keep-Alive: timeout=N``, which Node's agent obeys.
A request's headers and body must arrive within their deadlines, and one process serves at
most ``DEV_SERVER_MAX_CONNECTIONS`` connections (``dev_server.connection_limits``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

import uvicorn

from dev_server.agents.definition import AgentDefinition
from dev_server.agents.loading import AgentsError, agents_for
from dev_server.agents.registry import with_models
from dev_server.api.worker_slot import STUDIO_NOTE
from dev_server.fetch_studio_ui import PACKAGE, FetchError, fetch
from dev_server.llm.local_embedder import LocalEmbeddingsMissing
from dev_server.paths import PathError
from dev_server.preflight import preflight
from dev_server.settings import Settings, SettingsError
from dev_server.storage.errors import StorageError
from dev_server.workers import configure_logging, server_config, supervise

if TYPE_CHECKING:  # httpx: imported by the commands that probe (health, dev's banner), never by a server
    import httpx

try:  # uvloop's event loop where it exists (not on Windows: asyncio's own loop there)
    import uvloop
except ImportError:  # pragma: no cover - Windows
    uvloop = None

ROLES = ("gateway", "studio")
# What a bad start raises, each printed as one ``error:`` line (exit 2).
START_ERRORS = (StorageError, PathError, SettingsError, AgentsError, LocalEmbeddingsMissing)


class _Parser(argparse.ArgumentParser):
    """A usage mistake is one ``error:`` line and exit 2, like every other start-up problem."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"error: {message} (see {self.prog} --help)\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="dev-server", description="An agent gateway with durable conversation memory, and a "
                     "Mastra-compatible studio. Settings: DEV_SERVER_* variables, or a .env (at the package root in a "
                     "source checkout, else in the working directory).")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    host = _Parser(add_help=False)
    host.add_argument("--host", help="interface to listen on (default DEV_SERVER_HOST, else 127.0.0.1); any "
                      "other than loopback needs DEV_SERVER_AUTH_TOKENS, or DEV_SERVER_AUTH=off")
    port = _Parser(add_help=False)
    port.add_argument("--port", type=int, help="port (default DEV_SERVER_GATEWAY_PORT or DEV_SERVER_STUDIO_PORT: "
                      "8787 for the gateway, 4111 for the studio)")
    agents = _Parser(add_help=False)
    agents.add_argument("--agents", metavar="SOURCE", help="your own agents: an import string (mypkg.agents, "
                        "mypkg.agents:name) or a .py file (default DEV_SERVER_AGENTS, else the built-in agents)")
    commands.add_parser("dev", parents=[host, agents], help="the gateway and the studio together, until Ctrl-C",
                        description="Run the gateway (chat, :8787) and the studio (Mastra REST and the Studio "
                        "web app, :4111) as two processes; print their URLs, the models and the data directory "
                        "once both are ready; Ctrl-C stops both.")
    commands.add_parser("gateway", parents=[host, port, agents], help="the chat gateway (POST /api/chat)",
                        description="Run the gateway: the AI SDK's chat stream at POST /api/chat, with "
                        "DEV_SERVER_WORKERS processes on one port (default one per core).")
    commands.add_parser("studio", parents=[host, port, agents], help="the studio (Mastra REST API and the Studio "
                        "web app)",
                        description="Run the studio: the Mastra-compatible REST API under /api, the Studio web "
                        "app at / (see studio-ui), and the receivers of the gateway's traces.")
    health = commands.add_parser("health", parents=[port], help="exit 0 when ROLE on this machine is ready",
                                 description="Exit 0 when the /health of ROLE on this machine says \"ok\" (its "
                                 "models warmed up), else 1 with one line.")
    health.add_argument("role", choices=ROLES, help="the process to probe")
    studio_ui = commands.add_parser("studio-ui", help="fetch the Studio web app (needs Node and npm)",
                                    description=f"Fetch the Mastra Studio web app ({PACKAGE} from the npm "
                                    "registry, with npm pack) into the directory the studio serves it from.")
    studio_ui.add_argument("--dest", type=Path, help="where to put it (default DEV_SERVER_STUDIO_UI_DIR, else "
                           "studio-ui/ in the source checkout or in the per-user data directory)")
    studio_ui.add_argument("--package", default=PACKAGE, help=f"the npm package to take dist/studio from "
                           f"(default {PACKAGE}, the Studio this server is checked against)")
    return parser


def main(argv: list[str] | None = None) -> int:
    os.environ.setdefault("PYTHONUNBUFFERED", "1")  # the children of dev write their logs as they come
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help(sys.stderr)
        return 2
    try:
        settings = Settings.load()
        _ = settings.resolved_data_dir  # resolve now so a bad one fails here, clearly
    except (SettingsError, PathError) as exc:
        return _fail(str(exc))
    if args.command == "health":
        return probe_health(args.role, settings, args.port)
    if args.command == "studio-ui":
        return fetch_studio_ui(settings, args.dest, args.package)
    if args.agents:
        settings = settings.model_copy(update={"agents": args.agents})
    try:
        agents = agents_for(settings.agents)
    except AgentsError as exc:  # the user's code: checked once, before any process starts
        return _fail(str(exc))
    try:
        preflight(settings, args.host or settings.host, agents)
    except SettingsError as exc:
        return _fail(str(exc))
    if args.command == "dev":
        return run_dev(settings, args.host, with_models(agents, settings.model, settings.agent_models))
    return run_one(args.command, settings, args.host, args.port)


def _fail(message: str) -> int:
    print(f"error: {message}", file=sys.stderr)
    return 2


def fetch_studio_ui(settings: Settings, dest: Path | None, package: str) -> int:
    try:
        print(fetch(dest or settings.resolved_studio_ui_dir, package, say=lambda line: print(line, flush=True)),
              flush=True)
    except FetchError as exc:
        return _fail(str(exc))
    return 0


def bind(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # proto must say TCP: asyncio sets TCP_NODELAY only on sockets that do, and without
    # it each stream's first small frame waits ~40 ms for the client's delayed ACK.
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    # Windows' SO_REUSEADDR would let us bind a port another process listens on.
    reuse = socket.SO_EXCLUSIVEADDRUSE if sys.platform == "win32" else socket.SO_REUSEADDR
    sock.setsockopt(socket.SOL_SOCKET, reuse, 1)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    try:
        sock.bind((host, port))
    except OSError:
        sock.close()
        raise
    sock.set_inheritable(True)
    return sock


def run_one(role: str, settings: Settings, host: str | None, port: int | None) -> int:
    configure_logging(role, settings.log_level)
    host = host or settings.host
    port = settings.port_for(role) if port is None else port
    count = settings.workers_for(role)
    if count > 1 and sys.platform == "win32":  # the workers are tried on Linux only: one process serves
        logging.getLogger("dev_server").info("DEV_SERVER_WORKERS: on Windows one process serves")
        count = 1
    if role == "studio" and (settings.workers or 1) > 1:
        logging.getLogger("dev_server").info("DEV_SERVER_WORKERS=%d applies to the gateway only: %s", settings.workers,
                                      STUDIO_NOTE)
    try:
        sock = bind(host, port)
    except OSError as exc:
        return _fail(f"{role} cannot listen on {host}:{port}: {exc.strerror or exc}")
    if count == 1:
        return _run_server(role, settings, sock)
    try:
        asyncio.run(_check_start(role, settings))  # in the parent, before any worker exists
    except START_ERRORS as exc:
        return _fail(str(exc))
    logging.getLogger("dev_server").info("%s listening on http://%s:%s with %d workers (data in %s)", role, host,
                                         port, count, settings.resolved_data_dir)
    return supervise(role, settings, sock, count)


def _run_server(role: str, settings: Settings, sock: socket.socket) -> int:
    # uvicorn re-raises the signal that stopped it once it has shut down gracefully;
    # either one then means a clean exit.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    try:
        # uvloop's event loop and uvicorn's httptools parser (picked up when installed): the
        # pure-Python loop and h11 were a fifth of a turn's CPU under load.
        return (uvloop.run if uvloop is not None else asyncio.run)(_serve(role, settings, sock))
    except KeyboardInterrupt:
        return 0
    except START_ERRORS as exc:
        return _fail(str(exc))


async def _check_start(role: str, settings: Settings) -> None:
    """Build the app once (no I/O: a configuration the app refuses is one line here) and
    open (migrating) and close the stores, so N workers do not each fail or migrate."""
    from dev_server.factory import create_app, storage_for

    storage = storage_for(role, settings)
    create_app(role, settings, storage=storage)
    await storage.open()
    await storage.close()


async def _serve(role: str, settings: Settings, sock: socket.socket) -> int:
    from dev_server.factory import create_app, storage_for

    storage = storage_for(role, settings)
    app = create_app(role, settings, storage=storage, freeze_heap=True)  # refuses a bad configuration first
    started = time.perf_counter()
    await storage.open()  # open before serving so a bad database is one clear line, not a traceback
    stores_ms = (time.perf_counter() - started) * 1000
    host, port = sock.getsockname()[:2]
    logging.getLogger("dev_server").info("%s listening on http://%s:%s (stores open in %.0f ms, data in %s; models "
                                  "warm up in the background: /health says starting until then)", role, host, port,
                                  stores_ms, settings.resolved_data_dir)
    await uvicorn.Server(server_config(app, settings)).serve(sockets=[sock])
    return 0


def probe_health(role: str, settings: Settings, port: int | None) -> int:
    """0 when ``role``'s /health on this machine says ``status: ok``; else 1 with one line."""
    import httpx

    host = settings.host if settings.host not in ("0.0.0.0", "::", "") else "127.0.0.1"
    url = f"http://{'[' + host + ']' if ':' in host else host}:{port or settings.port_for(role)}/health"
    try:
        response = httpx.get(url, timeout=5)
        status = response.json().get("status") if response.status_code == 200 else f"HTTP {response.status_code}"
    except (httpx.HTTPError, ValueError, AttributeError) as exc:
        status = str(exc) or type(exc).__name__
    if status == "ok":
        return 0
    print(f"unhealthy: {role} at {url}: {status}", file=sys.stderr)
    return 1


def run_dev(settings: Settings, host: str | None, agents: tuple[AgentDefinition, ...] = ()) -> int:
    """Run gateway and studio as two children; one Ctrl-C (or either exiting) stops both."""
    command = [sys.executable, "-m", "dev_server"]
    extra = [*(["--host", host] if host else []), *(["--agents", settings.agents] if settings.agents else [])]
    started = time.monotonic()
    children = {role: subprocess.Popen([*command, role, *extra]) for role in ROLES}
    banner = DevBanner(settings, host or settings.host, agents)
    stopping = False

    def stop(*_: object) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGINT, stop)
    signal.signal(signal.SIGTERM, stop)
    exit_code = 0
    try:
        while not stopping:
            for role, child in children.items():
                code = child.poll()
                if code is not None:
                    if code != 0:
                        print(f"error: {role} exited with code {code}; stopping", file=sys.stderr)
                        exit_code = code
                    stopping = True
            if not stopping and not banner.shown:
                banner.try_show(time.monotonic() - started)
            time.sleep(0.1)
    finally:
        banner.close()
        # SIGTERM, not SIGINT: after a terminal's Ctrl-C the children already got one
        # SIGINT, and uvicorn takes a second SIGINT as "force exit, skip shutdown".
        for child in children.values():
            if child.poll() is None:
                child.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + 8
        for child in children.values():
            try:
                child.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                child.kill()
    return exit_code


class DevBanner:
    """What a user of ``make dev`` needs once both processes are ready (``/health`` says
    ``ok``: a chat is answered at once): the two URLs and the model each agent will use."""

    def __init__(self, settings: Settings, host: str, agents: tuple[AgentDefinition, ...] = ()) -> None:
        self.settings = settings
        self.agents = agents
        shown_host = "localhost" if host in ("127.0.0.1", "0.0.0.0", "::", "::1", "localhost", "") else host
        self.shown_host = f"[{shown_host}]" if ":" in shown_host else shown_host
        probe_host = "127.0.0.1" if host in ("0.0.0.0", "") else "::1" if host == "::" else host
        self.probe_host = f"[{probe_host}]" if ":" in probe_host else probe_host
        self.shown = False
        import httpx

        # one client for every poll: each new one loads the CA bundle (~15 ms of CPU), and
        # polling both roles every 0.1 s that way took a third of a core from their start-up
        self._http: httpx.Client | None = httpx.Client(timeout=0.5)

    def try_show(self, elapsed_s: float) -> bool:
        if self._http is None:
            return self.shown
        import httpx

        health = {}
        for role in ROLES:
            try:
                response = self._http.get(f"http://{self.probe_host}:{self.settings.port_for(role)}/health")
                health[role] = response.json() if response.status_code == 200 else {}
            except (httpx.TransportError, ValueError):
                return False
            if health[role].get("status") != "ok":
                return False  # "starting": the models are still warming up
        print("\n".join(self.lines(health["gateway"], elapsed_s)), flush=True)
        self.shown = True
        self.close()
        return True

    def close(self) -> None:
        if self._http is not None:
            self._http.close()
            self._http = None

    def lines(self, gateway_health: dict[str, Any], elapsed_s: float) -> list[str]:
        studio = f"http://{self.shown_host}:{self.settings.studio_port}/"
        chat = f"http://{self.shown_host}:{self.settings.gateway_port}/api/chat"
        ui_missing = not (self.settings.resolved_studio_ui_dir / "index.html").is_file()
        return [f"dev-server ready in {elapsed_s:.1f} s", f"  Studio: {studio}",
                *(["    (its web app is not installed: dev-server studio-ui fetches it)"] if ui_missing else []),
                f"  chat:   POST {chat}",
                f"  API docs: {studio}docs and http://{self.shown_host}:{self.settings.gateway_port}/docs",
                f"  data:   {self.settings.resolved_data_dir}",
                "  models:", *(f"    {line}" for line in model_lines(gateway_health.get("models"), self.agents))]


def model_lines(report: Any, definitions: tuple[AgentDefinition, ...] = ()) -> list[str]:
    """One line per agent: the gateway's own report (``/health`` ``models.agents``: the model,
    who answers it and why), else the agent definitions' model ids."""
    agents = report.get("agents") if isinstance(report, dict) else None
    if isinstance(agents, dict) and agents:
        return [f"{agent_id} -> {_describe(value)}" for agent_id, value in agents.items()]
    if isinstance(agents, list) and agents:
        return [_describe(value) for value in agents]
    # A gateway without a per-agent report: the configured model ids, unresolved.
    return [f"{definition.id} -> {definition.model}" for definition in definitions]


def _describe(value: Any) -> str:
    """One agent of the gateway's /health ``models.agents`` as a banner line."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict) and "model" in value:
        answered = "the local model" if value.get("local") else value.get("answeredBy", "?")
        reason = f" ({value['reason']})" if value.get("reason") else ""
        error = f": {value['error']}" if value.get("error") else ""
        return f"{value['model']}, answered by {answered}{reason}{error}"
    return json.dumps(value, separators=(",", ": "))


if __name__ == "__main__":
    sys.exit(main())
