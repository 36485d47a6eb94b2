"""``python -m app gateway|studio|dev [--host H] [--port N]``.

``gateway`` and ``studio`` run one process each. ``dev`` runs both as child processes and
stops both on Ctrl-C (or when either one exits). Start-up problems (bad settings, port in
use, unwritable data dir, unreadable database) print one ``error:`` line and exit 2.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import signal
import socket
import subprocess
import sys
import time

from app.paths import PathError
from app.settings import Settings, SettingsError
from app.storage.errors import StorageError

ROLES = ("gateway", "studio")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m app", description="dev-server gateway and studio")
    parser.add_argument("role", help="gateway, studio, or dev (both)")
    parser.add_argument("--host", help="interface to listen on (default DEV_SERVER_HOST or 127.0.0.1)")
    parser.add_argument("--port", type=int, help="port (default 8787 for the gateway, 4111 for the studio)")
    args = parser.parse_args(argv)
    if args.role not in (*ROLES, "dev"):
        return _fail(f"unknown role {args.role!r}; expected gateway, studio or dev")
    try:
        settings = Settings.load()
        settings.resolved_data_dir  # resolve now so a missing anchor fails here, clearly
    except (SettingsError, PathError) as exc:
        return _fail(str(exc))
    if args.role == "dev":
        return run_dev(settings, args.host)
    return run_one(args.role, settings, args.host, args.port)


def _fail(message: str) -> int:
    print(f"error: {message}", file=sys.stderr)
    return 2


def configure_logging(role: str, level: str) -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter(f"{role:<7} | %(levelname)-7s %(name)s: %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())


def bind(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # proto must say TCP: asyncio sets TCP_NODELAY only on sockets that do, and without
    # it each stream's first small frame waits ~40 ms for the client's delayed ACK.
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
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
    try:
        sock = bind(host, port)
    except OSError as exc:
        return _fail(f"{role} cannot listen on {host}:{port}: {exc.strerror or exc}")
    # uvicorn re-raises the signal that stopped it once it has shut down gracefully;
    # either one then means a clean exit.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    try:
        return asyncio.run(_serve(role, settings, sock))
    except KeyboardInterrupt:
        return 0
    except (StorageError, PathError) as exc:
        return _fail(str(exc))


async def _serve(role: str, settings: Settings, sock: socket.socket) -> int:
    import uvicorn

    from app.factory import create_app, storage_for

    storage = storage_for(role, settings)
    started = time.perf_counter()
    await storage.open()  # open before serving so a bad database is one clear line, not a traceback
    app = create_app(role, settings, storage=storage)
    config = uvicorn.Config(app, log_config=None, log_level=settings.log_level, access_log=False,
                            timeout_graceful_shutdown=3)
    server = uvicorn.Server(config)
    host, port = sock.getsockname()[:2]
    logging.getLogger("app").info("%s listening on http://%s:%s (stores open in %.0f ms, data in %s)",
                                  role, host, port, (time.perf_counter() - started) * 1000,
                                  settings.resolved_data_dir)
    await server.serve(sockets=[sock])
    return 0


def run_dev(settings: Settings, host: str | None) -> int:
    """Run gateway and studio as two children; one Ctrl-C (or either exiting) stops both."""
    command = [sys.executable, "-m", "app"]
    extra = ["--host", host] if host else []
    children = {role: subprocess.Popen([*command, role, *extra]) for role in ROLES}
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
            time.sleep(0.1)
    finally:
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


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main())
