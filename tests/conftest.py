"""Shared fixtures: every test gets a clean environment and its own data directory.

Chain: ``data_dir`` (tmp) -> ``settings`` -> app or a real server process. Nothing here
mocks a database; servers are real ``python -m app`` processes on free ports.
"""

from __future__ import annotations

import os
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

# Hypothesis (under schemathesis) keeps its files in ./.hypothesis unless told otherwise: a
# test run leaves nothing in the checkout. Set before anything imports hypothesis.
os.environ.setdefault("HYPOTHESIS_STORAGE_DIRECTORY", tempfile.mkdtemp(prefix="dev-server-hypothesis-"))

import pytest  # noqa: E402

from app.settings import Settings
from tests.support import ONE_WORKER, ServerProcess

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(autouse=True)
def clean_environ(monkeypatch: pytest.MonkeyPatch) -> None:
    for key in list(os.environ):
        if key.startswith("DEV_SERVER_") or key.endswith("_API_KEY"):
            monkeypatch.delenv(key)


@pytest.fixture(scope="session", autouse=True)
def litellm_imported_once() -> None:
    """Import litellm once, up front: apps built in this process warm it up in worker
    threads that outlive their test, and two imports racing in one process can leave
    half-initialised modules behind."""
    from app.llm import prepare_litellm

    prepare_litellm()


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    return tmp_path / "data"


@pytest.fixture
def settings(data_dir: Path) -> Settings:
    return Settings(data_dir=data_dir)


@pytest.fixture
def server_env(data_dir: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("DEV_SERVER_")}
    env["DEV_SERVER_DATA_DIR"] = str(data_dir)
    env["PYTHONUNBUFFERED"] = "1"
    env.update(ONE_WORKER)  # a test that wants the gateway's workers sets DEV_SERVER_WORKERS itself
    return env


@pytest.fixture
def start_server(server_env: dict[str, str]) -> Iterator:
    """Start ``python -m app ROLE`` on a free port; all are stopped at teardown."""
    started: list[ServerProcess] = []

    def start(role: str, *, env: dict[str, str] | None = None, wait: bool = True, **kwargs) -> ServerProcess:
        server = ServerProcess(role, env={**server_env, **(env or {})}, python=sys.executable, **kwargs)
        started.append(server)
        server.start()
        if wait:
            server.wait_healthy()
        return server

    yield start
    for server in started:
        server.stop()


@pytest.fixture(params=["file", "sqld"])
async def libsql(request: pytest.FixtureRequest, tmp_path: Path):
    """An opened store (migrated), closed afterwards: on a fresh SQLite file, and again on a
    fresh libsql server (sqld), so everything stored there is tested on both."""
    from app.storage.libsql import LibSQLStore
    from app.storage.remote import RemoteLibSQLStore

    if request.param == "file":
        store = LibSQLStore(f"file:{tmp_path / 'store.db'}")
        await store.open()
        yield store
        await store.close()
        return
    from tests.sqld import Sqld

    with Sqld(tmp_path / "sqld") as server:
        store = RemoteLibSQLStore(server.url)
        await store.open()
        yield store
        await store.close()
