"""Where files live: everything is anchored at the package root, never the cwd.

The package root is the directory holding the ``pyproject.toml`` whose ``[project].name``
is ``dev-server``, found by walking up from this module's own directory. ``.temp/`` sits
beside it. A process started from ``/``, from ``tests/`` or from a temp dir therefore
opens the same databases. Installed as a wheel there is no such pyproject, and
``DEV_SERVER_DATA_DIR`` must say where the data goes.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

PROJECT_NAME = "dev-server"
DATA_DIR_NAME = ".temp"


class PathError(Exception):
    """A path cannot be resolved or created; the message says what to do."""


def find_package_root(start: Path | None = None) -> Path | None:
    here = (start or Path(__file__).parent).resolve()
    for directory in (here, *here.parents):
        pyproject = directory / "pyproject.toml"
        if pyproject.is_file() and _names_this_project(pyproject):
            return directory
    return None


def _names_this_project(pyproject: Path) -> bool:
    try:
        data = tomllib.loads(pyproject.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError):
        return False
    return data.get("project", {}).get("name") == PROJECT_NAME


def resolve_data_dir(configured: Path | None, *, start: Path | None = None) -> Path:
    """The data directory: the configured one, else ``<package root>/.temp``."""
    if configured is not None:
        return configured.expanduser().resolve()
    root = find_package_root(start)
    if root is None:
        raise PathError(
            "cannot find the dev-server source tree to anchor .temp/ at; "
            "set DEV_SERVER_DATA_DIR to the directory that should hold the databases"
        )
    return root / DATA_DIR_NAME


def database_url(url: str | None, data_dir: Path, default_file: str) -> str:
    """Normalise a database URL. Relative ``file:`` paths are taken inside the data dir."""
    if not url:
        return f"file:{data_dir / default_file}"
    if url == ":memory:" or url.startswith(("http://", "https://", "libsql://", "ws://", "wss://")):
        return url
    path = Path(url.removeprefix("file:")).expanduser()
    if not path.is_absolute():
        path = data_dir / path
    return f"file:{path.resolve()}"


def file_path(url: str) -> Path | None:
    """The filesystem path of a ``file:`` URL, or None for memory/remote URLs."""
    if not url.startswith("file:"):
        return None
    return Path(url.removeprefix("file:").split("?", 1)[0])


def ensure_db_dir(url: str) -> Path | None:
    """Create the parent directory of a ``file:`` database before it is opened.

    SQLite cannot create parent directories (it fails with SQLITE_CANTOPEN), and the
    error it gives does not name the directory, so we create it and say clearly when
    that is impossible.
    """
    path = file_path(url)
    if path is None:
        return None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise PathError(f"cannot create data directory {path.parent}: {exc.strerror}") from exc
    if not _is_writable_dir(path.parent):
        raise PathError(f"data directory {path.parent} is not writable")
    return path


def _is_writable_dir(directory: Path) -> bool:
    import os

    return os.access(directory, os.W_OK | os.X_OK)


def migrations_dir(engine: str) -> Path:
    """The ordered SQL migrations of one engine (``libsql`` or ``duckdb``)."""
    packaged = Path(__file__).parent / "migrations" / engine
    if packaged.is_dir():
        return packaged
    root = find_package_root()
    if root is not None and (root / "migrations" / engine).is_dir():
        return root / "migrations" / engine
    raise PathError(f"migrations for {engine} not found")
