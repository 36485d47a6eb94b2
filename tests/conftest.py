"""Shared fixtures: every test gets a clean environment and its own data directory.

Chain: ``data_dir`` (tmp) -> ``settings`` -> app or a real server. Nothing here mocks a
database. Servers come from one factory (``tests.kit.servers``): ``servers`` (this test's,
on ``data_dir``) and ``module_servers`` (the module's, on one temp dir) start gateways and
studios as ``python -m dev_server`` processes or in-process apps; ``start_server`` is the
subprocess shorthand.
"""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

# Hypothesis (under schemathesis) keeps its files in ./.hypothesis unless told otherwise: a
# test run leaves nothing in the checkout. Set before anything imports hypothesis.
if "HYPOTHESIS_STORAGE_DIRECTORY" not in os.environ:
    _hypothesis_dir = tempfile.mkdtemp(prefix="dev-server-hypothesis-")
    os.environ["HYPOTHESIS_STORAGE_DIRECTORY"] = _hypothesis_dir
    atexit.register(shutil.rmtree, _hypothesis_dir, ignore_errors=True)  # nor anything in /tmp

import pytest  # noqa: E402

from dev_server.settings import Settings
from tests.kit.servers import ProcessServer, Servers, process_env

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
    from dev_server.llm import prepare_litellm

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
    """The environment ``start_server`` gives a child process (one worker; a test that wants
    the gateway's workers sets ``DEV_SERVER_WORKERS`` itself)."""
    return process_env(data_dir)


@pytest.fixture
def servers(data_dir: Path) -> Iterator[Servers]:
    """Start gateways and studios for this test (``servers.gateway(env=..., inprocess=...)``),
    on ``data_dir`` unless told otherwise; all are stopped at teardown."""
    started = Servers(data_dir)
    yield started
    started.close()


@pytest.fixture(scope="module")
def module_servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Servers]:
    """``servers`` for a whole module, on one temp data dir."""
    started = Servers(tmp_path_factory.mktemp("module-servers") / "data")
    yield started
    started.close()


@pytest.fixture
def start_server(servers: Servers) -> Callable[..., ProcessServer]:
    """Start ``python -m dev_server ROLE`` on a free port; all are stopped at teardown."""

    def start(role: str, *, env: dict[str, str] | None = None, wait: bool = True, **kwargs) -> ProcessServer:
        return servers.start(role, env=env, wait=wait, **kwargs)

    return start


@pytest.fixture(params=["file", "sqld"])
async def libsql(request: pytest.FixtureRequest, tmp_path: Path):
    """An opened store (migrated), closed afterwards: on a fresh SQLite file, and again on a
    fresh libsql server (sqld), so everything stored there is tested on both."""
    from dev_server.storage.libsql import LibSQLStore
    from dev_server.storage.remote import RemoteLibSQLStore

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


@pytest.fixture
async def sqlite_store(tmp_path: Path):
    """An opened store (migrated) on a fresh SQLite file only, closed afterwards."""
    from dev_server.storage.libsql import LibSQLStore

    store = LibSQLStore(f"file:{tmp_path / 'store.db'}")
    await store.open()
    yield store
    await store.close()
