"""Package-root anchoring: the same files whatever the cwd."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from dev_server import paths
from dev_server.settings import Settings

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


def test_without_source_tree_the_error_names_the_variable(tmp_path: Path):
    installed = tmp_path / "site-packages" / "dev_server"
    installed.mkdir(parents=True)
    assert paths.find_package_root(installed) is None
    with pytest.raises(paths.PathError, match="DEV_SERVER_DATA_DIR"):
        paths.resolve_data_dir(None, start=installed)


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
