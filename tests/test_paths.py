"""Package-root anchoring: the same files whatever the cwd."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from dev_server import paths
from dev_server.settings import Settings, SettingsError

REPO = Path(__file__).resolve().parents[1]
PRINT_PATHS = (
    "import json; from dev_server.settings import Settings; s = Settings.load(); "
    "print(json.dumps([str(s.resolved_data_dir), s.default_db_url, s.observability_db_url]))"
)


def test_package_root_is_found_from_the_module_directory():
    assert paths.find_package_root() == REPO
    assert paths.resolve_data_dir(None) == REPO / ".temp"


@pytest.mark.parametrize("cwd", ["/", "tests", "dev_server", "tmp"])
def test_subprocess_from_any_cwd_resolves_the_same_files(cwd: str, tmp_path: Path):
    directory = {"/": Path("/"), "tests": REPO / "tests", "dev_server": REPO / "dev_server", "tmp": tmp_path}[cwd]
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
    out = subprocess.run([sys.executable, "-c", PRINT_PATHS], cwd=directory, env=env,
                         capture_output=True, text=True, check=True).stdout
    data_dir, db_url, obs_url = json.loads(out)
    assert data_dir == str(REPO / ".temp")
    assert db_url == f"file:{REPO / '.temp' / 'dev-server.db'}"
    assert obs_url == f"file:{REPO / '.temp' / 'observability.duckdb'}"


def test_installed_without_a_source_tree_data_and_the_studio_build_go_to_the_per_user_directory(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))  # where platformdirs puts user data on Linux
    installed = tmp_path / "site-packages" / "dev_server"
    installed.mkdir(parents=True)
    assert paths.find_package_root(installed) is None
    assert paths.resolve_data_dir(None, start=installed) == tmp_path / "xdg" / "dev-server"
    assert paths.default_studio_ui_dir(start=installed) == tmp_path / "xdg" / "dev-server" / "studio-ui"
    # in the source checkout both stay beside pyproject.toml, and a configured one wins everywhere
    assert paths.default_studio_ui_dir() == REPO / "studio-ui"
    assert paths.resolve_data_dir(tmp_path / "mine", start=installed) == tmp_path / "mine"


@pytest.mark.parametrize("url", ["postgres://user:secret@db/chat", "postgresql://db/chat", "sqlite:///chat.db",
                                 "mysql://db", "libsql:chat", "redis://cache"])
def test_a_database_url_of_another_kind_is_refused_without_echoing_it(url: str):
    with pytest.raises(SettingsError) as info:
        settings_with(DEV_SERVER_DB_URL=url)
    message = str(info.value)
    assert message.startswith("invalid setting DEV_SERVER_DB_URL: unsupported database URL scheme")
    assert url.split(":")[0] in message and "secret" not in message and "\n" not in message


@pytest.mark.parametrize("url", ["file:chat.db", "chat.db", "/var/data/chat.db", ":memory:", "http://sqld:8080",
                                 "https://db.example", "libsql://db.example", "ws://sqld:8080", "wss://db.example",
                                 r"C:\data\chat.db", ""])
def test_files_and_libsql_servers_are_database_urls(url: str):
    assert settings_with(DEV_SERVER_DB_URL=url).db_url == (url or None)


def test_the_traces_database_is_a_file_only():
    with pytest.raises(SettingsError, match="DEV_SERVER_OBSERVABILITY_URL: unsupported database URL scheme 'http:'"):
        settings_with(DEV_SERVER_OBSERVABILITY_URL="http://sqld:8080")
    assert settings_with(DEV_SERVER_OBSERVABILITY_URL="file:traces.duckdb").observability_url == "file:traces.duckdb"


def settings_with(**env: str) -> Settings:
    with pytest.MonkeyPatch.context() as patch:
        for name, value in env.items():
            patch.setenv(name, value)
        return Settings.load()


def test_a_pyproject_of_another_project_is_not_an_anchor(tmp_path: Path):
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "something-else"\n')
    (tmp_path / "pkg").mkdir()
    assert paths.find_package_root(tmp_path / "pkg") is None


def test_relative_database_urls_live_in_the_data_dir(tmp_path: Path):
    settings = Settings(data_dir=tmp_path, db_url="file:nested/chat.db")
    assert settings.default_db_url == f"file:{tmp_path / 'nested' / 'chat.db'}"
    assert Settings(data_dir=tmp_path, db_url=str(tmp_path / "x.db")).default_db_url == f"file:{tmp_path / 'x.db'}"


def test_ensure_db_dir_creates_missing_parents_and_reuses_existing(tmp_path: Path):
    url = f"file:{tmp_path / 'a' / 'b' / 'db.sqlite'}"
    assert paths.ensure_db_dir(url) == tmp_path / "a" / "b" / "db.sqlite"
    assert (tmp_path / "a" / "b").is_dir()
    assert paths.ensure_db_dir(url) == tmp_path / "a" / "b" / "db.sqlite"
    assert paths.ensure_db_dir(":memory:") is None


def test_ensure_db_dir_reports_an_impossible_directory(tmp_path: Path):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    with pytest.raises(paths.PathError, match="cannot create data directory"):
        paths.ensure_db_dir(f"file:{blocker / 'sub' / 'db.sqlite'}")
