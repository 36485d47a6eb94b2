"""Where files live: anchored at the package root in a source checkout, never the cwd.

The package root is the directory holding the ``pyproject.toml`` whose ``[project].name``
is ``dev-server``, found by walking up from this module's own directory. In a source
checkout ``.temp/`` (the databases) and ``studio-ui/`` (the Studio build) sit beside it, so
a process started from ``/``, from ``tests/`` or from a temp dir opens the same databases.
Installed as a wheel (``pipx install``) there is no such pyproject: both live in the
per-user data directory instead (``platformdirs``: ``~/.local/share/dev-server`` on Linux,
``~/Library/Application Support/dev-server`` on macOS, ``%LOCALAPPDATA%\\dev-server`` on
Windows). ``DEV_SERVER_DATA_DIR`` and ``DEV_SERVER_STUDIO_UI_DIR`` override either.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import platformdirs

PROJECT_NAME = "dev-server"
DATA_DIR_NAME = ".temp"
STUDIO_UI_DIR_NAME = "studio-ui"
# Database URLs: a libsql server, or a file (``file:PATH``, a bare path, ``:memory:``).
REMOTE_SCHEMES = ("http", "https", "libsql", "ws", "wss")
_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]+):")  # two letters at least: C:\ is a Windows drive


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


def user_data_dir() -> Path:
    """The per-user data directory of an installed dev-server (not a source checkout)."""
    return platformdirs.user_data_path(PROJECT_NAME, appauthor=False)


def resolve_data_dir(configured: Path | None, *, start: Path | None = None) -> Path:
    """The data directory: the configured one, else ``<package root>/.temp`` in a source
    checkout, else the per-user data directory."""
    if configured is not None:
        return configured.expanduser().resolve()
    root = find_package_root(start)
    return root / DATA_DIR_NAME if root is not None else user_data_dir()


def default_studio_ui_dir(*, start: Path | None = None) -> Path:
    """Where the Studio build is looked for (and ``dev-server studio-ui`` puts it):
    ``<package root>/studio-ui`` in a source checkout, else in the per-user data directory."""
    root = find_package_root(start)
    return (root if root is not None else user_data_dir()) / STUDIO_UI_DIR_NAME


def check_database_url(url: str, *, remote: bool) -> None:
    """ValueError unless ``url`` is a database URL we open: a file (``file:PATH``, a path,
    ``:memory:``) or, with ``remote``, a libsql server (``http(s)://``, ``libsql://``,
    ``ws(s)://``). Anything else (``postgres://``, ``sqlite:///``) would otherwise be taken
    for a relative file name."""
    match = _SCHEME.match(url.strip())
    if match is None or url.strip() == ":memory:":
        return
    scheme = match[1].lower()
    if scheme == "file" or (remote and scheme in REMOTE_SCHEMES and url.strip()[len(scheme):].startswith("://")):
        return
    expected = "file:PATH or a path" + (", or a libsql server: http(s)://host:port, libsql://host, ws(s)://"
                                        if remote else " (the traces database is a DuckDB file)")
    raise ValueError(f"unsupported database URL scheme {scheme + ':'!r}; expected {expected}")


def database_url(url: str | None, data_dir: Path, default_file: str) -> str:
    """Normalise a database URL. Relative ``file:`` paths are taken inside the data dir."""
    if not url:
        return f"file:{data_dir / default_file}"
    if url == ":memory:" or url.startswith(tuple(f"{scheme}://" for scheme in REMOTE_SCHEMES)):
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
