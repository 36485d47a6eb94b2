"""One factory for the servers tests talk to: a gateway or a studio, in either of two modes.

* subprocess: ``python -m dev_server ROLE`` on a free port (``tests.support.ServerProcess``), for
  tests whose subject is the process (restart, crash, workers, signals) or that want its
  real start-up;
* in-process: ``create_app(role, Settings(...))`` behind a real uvicorn in a thread
  (``tests.support.LiveApp``), for tests that inject a model, agents or an authenticator,
  or that only need HTTP.

Both modes take the same ``env`` (``DEV_SERVER_*`` names; in-process they become the
``Settings`` fields of the same name) and give the same handle: ``.role``, ``.url``,
``.port``, ``.data_dir``, ``.db``, ``start()``, ``wait_healthy()``, ``stop()`` (a restart is
``stop()`` then ``start()``, on the same port and data dir).

Ways in: ``serve(...)`` for one server in a ``with`` (``in_process(role, settings)`` and
``running(role, data_dir, env)`` are its two modes' shorthands); ``Servers`` (the
conftest's ``servers`` and ``module_servers`` fixtures) for several, all stopped at the
end; ``server_fixture(...)`` to declare a module's server as a fixture in one line.
"""

from __future__ import annotations

import os
import socket
import sys
import time
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from dev_server.settings import ENV_PREFIX, Settings
from tests.kit.local_http import local_http
from tests.support import ONE_WORKER, LiveApp, ServerProcess, bound_socket, wait_models_ready

DB_NAME = "dev-server.db"


def process_env(data_dir: Path, env: dict[str, str] | None = None) -> dict[str, str]:
    """The environment of a server child process: this one's, without any ``DEV_SERVER_*``
    setting or provider key of the caller's, one worker, on ``data_dir``, then ``env``."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith(ENV_PREFIX) and not k.endswith("_API_KEY")}
    return {**clean, "PYTHONUNBUFFERED": "1", **ONE_WORKER, "DEV_SERVER_DATA_DIR": str(data_dir), **(env or {})}


def settings_from_env(data_dir: Path, env: dict[str, str] | None = None, **overrides: Any) -> Settings:
    """The ``Settings`` ``python -m dev_server ROLE`` on ``data_dir`` would read with ``env`` set
    (``DEV_SERVER_*``, provider variables) and none of the caller's, for an in-process app:
    read by ``Settings.load`` itself, so aliases and parsing are the process's own."""
    with pytest.MonkeyPatch.context() as patch:
        for name in [n for n in os.environ if n.startswith(ENV_PREFIX) or n.endswith("_API_KEY")]:
            patch.delenv(name)
        for name, value in {"DEV_SERVER_DATA_DIR": str(data_dir), **(env or {})}.items():
            patch.setenv(name, value)
        settings = Settings.load()
    return settings.model_copy(update=overrides) if overrides else settings


class ProcessServer(ServerProcess):
    """``python -m dev_server ROLE`` (see ``ServerProcess``) that knows its data dir."""

    def __init__(self, role: str, data_dir: Path, *, env: dict[str, str] | None = None, **kwargs: Any) -> None:
        super().__init__(role, env=process_env(data_dir, env), python=sys.executable, **kwargs)
        self.data_dir = data_dir

    @property
    def db(self) -> Path:
        return self.data_dir / DB_NAME


class InProcessServer:
    """``create_app(role, settings)`` on a real uvicorn in a thread; ``start()`` builds a fresh
    app each time (a restart is a new app on the same port and data)."""

    def __init__(self, role: str, data_dir: Path, *, env: dict[str, str] | None = None,
                 settings: Settings | dict[str, Any] | None = None, **app_kwargs: Any) -> None:
        self.role = role
        self.data_dir = data_dir
        self.settings = settings if isinstance(settings, Settings) else settings_from_env(data_dir, env,
                                                                                         **(settings or {}))
        self.app_kwargs = app_kwargs
        self._socket: socket.socket | None = bound_socket()  # the first start listens on it
        self.port = self._socket.getsockname()[1]
        self.app = None
        self._live: LiveApp | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def db(self) -> Path:
        return self.data_dir / DB_NAME

    def start(self) -> None:
        from dev_server.factory import create_app

        self.app = create_app(self.role, self.settings, **self.app_kwargs)
        sock, self._socket = self._socket, None  # a restart binds the same port again
        self._live = LiveApp(self.app, port=self.port, sock=sock).__enter__()

    def wait_healthy(self, timeout: float = 20.0) -> dict[str, Any]:
        return local_http.get(f"{self.url}/health", timeout=timeout).json()

    def output(self) -> str:
        return ""  # its logs go to this process's own (pytest captures them)

    def stop(self) -> int:
        if self._live is not None:
            self._live.__exit__(None, None, None)
            self._live = None
        if self._socket is not None:  # never started
            self._socket.close()
            self._socket = None
        return 0


Server = ProcessServer | InProcessServer


def make_server(role: str, data_dir: Path, *, inprocess: bool = False, env: dict[str, str] | None = None,
                **kwargs: Any) -> Server:
    """An unstarted server. ``kwargs``: subprocess, ``ServerProcess``'s (``port``, ``cwd``,
    ``args``); in-process, ``settings`` (a ``Settings``, or fields over ``env``'s) and
    ``create_app``'s (``llm``, ``agents``, ``authenticator``, ``storage``)."""
    if inprocess:
        return InProcessServer(role, data_dir, env=env, **kwargs)
    return ProcessServer(role, data_dir, env=env, **kwargs)


class Servers:
    """Starts servers on demand (by default on one data dir) and stops them all at ``close()``."""

    def __init__(self, data_dir: Path) -> None:
        self.data_dir = data_dir
        self.started: list[Server] = []

    def start(self, role: str, *, data_dir: Path | None = None, wait: bool = True, models_ready: bool = False,
              **kwargs: Any) -> Server:
        """``wait``: until ``/health`` answers; ``models_ready``: until it says the model layer
        is warm (a deadline in the test then measures the provider, not the first call's setup)."""
        server = make_server(role, data_dir or self.data_dir, **kwargs)
        self.started.append(server)
        server.start()
        if models_ready:
            wait_models_ready(server)
        elif wait:
            server.wait_healthy()
        return server

    def gateway(self, **kwargs: Any) -> Server:
        return self.start("gateway", **kwargs)

    def studio(self, **kwargs: Any) -> Server:
        return self.start("studio", **kwargs)

    def close(self) -> None:
        for server in reversed(self.started):
            server.stop()
        self.started.clear()


@contextmanager
def serve(role: str, data_dir: Path, **kwargs: Any) -> Iterator[Server]:
    """One server (see ``make_server``), started healthy, stopped afterwards."""
    servers = Servers(data_dir)
    try:
        yield servers.start(role, **kwargs)
    finally:
        servers.close()


def in_process(role: str, settings: Settings, **app_kwargs: Any) -> AbstractContextManager[InProcessServer]:
    """``create_app(role, settings, **app_kwargs)`` served in a ``with`` (``serve``, in-process)."""
    return serve(role, settings.resolved_data_dir, inprocess=True, settings=settings, **app_kwargs)


@contextmanager
def serving(role: str, data_dir: Path, env: dict[str, str] | None = None,
            **app_kwargs: Any) -> Iterator[InProcessServer]:
    """``create_app`` in this process on ``data_dir`` with the settings ``env`` makes (see
    ``settings_from_env``), yielded once ``/health`` says ``ok`` (its models warm)."""
    with serve(role, data_dir, inprocess=True, env=env, **app_kwargs) as server:
        deadline = time.monotonic() + 20
        while local_http.get(f"{server.url}/health", timeout=5).json()["status"] != "ok":
            if time.monotonic() > deadline:
                raise RuntimeError(f"in-process {role} not ready after 20 s")
            time.sleep(0.01)
        yield server


def running(role: str, data_dir: Path, env: dict[str, str] | None = None) -> AbstractContextManager[ProcessServer]:
    """``python -m dev_server ROLE`` on ``data_dir`` (a ``with``): ``serve`` in subprocess mode."""
    return serve(role, data_dir, env=env)


def server_fixture(role: str, *, scope: str = "module", data: str | None = None, after: tuple[str, ...] = (),
                   client: bool = False, **kwargs: Any):
    """A fixture yielding one server (``serve(role, ..., **kwargs)``), e.g. at module level
    ``gateway = server_fixture("gateway", env=OM_ENV)``. ``data``: the name of the fixture
    giving its data dir (default: a fresh temp dir); ``after``: fixtures to set up first
    (say, the gateway a studio must find already migrated); ``client``: yield an
    ``httpx.Client`` on the server's URL instead (``client.server`` is the server)."""

    @pytest.fixture(scope=scope)
    def fixture(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
        data_dir = request.getfixturevalue(data) if data else tmp_path_factory.mktemp(role) / "data"
        for name in after:
            request.getfixturevalue(name)
        with serve(role, data_dir, **kwargs) as server:
            if not client:
                yield server
                return
            with httpx.Client(base_url=server.url, timeout=30) as http:
                http.server = server
                yield http

    return fixture
