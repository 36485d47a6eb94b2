"""The Dockerfile and docker-compose.yml, checked structurally (no Docker engine runs here).

The Dockerfile is parsed with ``dockerfile-parse`` and the compose file with PyYAML: every
file the build copies exists and is not excluded by .dockerignore, the runtime is slim
Python 3.11 under a non-root user with the Studio build baked in by the same script as
``make studio-ui``, the health check probes ``/health``, and each compose service runs one
role with a health check, a port and the data volume that match it.
"""

from __future__ import annotations

import fnmatch
import shlex
import subprocess
import sys

import pytest
import yaml
from dockerfile_parse import DockerfileParser

from app.settings import Settings
from tests.support import REPO


@pytest.fixture(scope="module")
def dockerfile() -> DockerfileParser:
    parser = DockerfileParser(path=str(REPO / "Dockerfile"), env_replace=False)
    assert parser.structure, "Dockerfile is empty"
    return parser


def stages(parser: DockerfileParser) -> list[list[dict]]:
    found: list[list[dict]] = []
    for instruction in parser.structure:
        if instruction["instruction"] == "FROM":
            found.append([])
        if found and instruction["instruction"] != "COMMENT":
            found[-1].append(instruction)
    return found


def values(stage: list[dict], name: str) -> list[str]:
    return [i["value"] for i in stage if i["instruction"] == name]


def ignored(path: str) -> bool:
    patterns = [line.strip() for line in (REPO / ".dockerignore").read_text().splitlines()
                if line.strip() and not line.startswith("#")]
    return any(fnmatch.fnmatch(path, p.removeprefix("**/")) or path.startswith(p.rstrip("/") + "/")
               for p in patterns)


def test_every_file_the_build_copies_exists_and_is_in_the_context(dockerfile):
    copied = []
    for stage in stages(dockerfile):
        for value in values(stage, "COPY"):
            words = shlex.split(value)
            if any(w.startswith("--from=") for w in words):
                continue
            sources = [w for w in words if not w.startswith("--")][:-1]
            copied.extend(sources)
    assert {"pyproject.toml", "README.md", "app", "migrations", "scripts/fetch_studio_ui.sh"} <= set(copied)
    for source in copied:
        assert (REPO / source).exists(), source
        assert not ignored(source), f"{source} is excluded by .dockerignore"
    for local in (".venv", ".temp", ".env", "studio-ui", ".git"):
        assert ignored(local), f"{local} should stay out of the build context"


def test_the_runtime_is_slim_python_non_root_with_the_studio_baked_in(dockerfile):
    *build, runtime = stages(dockerfile)
    assert values(runtime, "FROM") == ["python:3.11-slim"]
    users = values(runtime, "USER")
    assert users and users[-1] not in ("root", "0")
    assert any("useradd" in run for run in values(runtime, "RUN"))
    studio_stage = next(stage for stage in build if any("scripts/fetch_studio_ui.sh" in r for r in values(stage, "RUN")))
    assert values(studio_stage, "FROM")[0].startswith("node:20")  # the script needs npm
    alias = values(studio_stage, "FROM")[0].split()[-1]
    baked = [shlex.split(v) for v in values(runtime, "COPY") if f"--from={alias}" in v]
    assert baked, "the Studio build is not copied into the runtime"
    env = dict(item.split("=", 1) for v in values(runtime, "ENV") for item in shlex.split(v.replace("\\\n", " ")))
    assert env["DEV_SERVER_DATA_DIR"] == "/data"
    assert env["DEV_SERVER_HOST"] == "0.0.0.0"
    assert env["DEV_SERVER_STUDIO_UI_DIR"] == baked[0][-1]
    assert Settings(**{k.removeprefix("DEV_SERVER_").lower(): v for k, v in env.items()
                       if k.startswith("DEV_SERVER_")}).host == "0.0.0.0"  # valid settings


def test_the_health_check_and_entrypoint_run_commands_that_exist(dockerfile):
    runtime = stages(dockerfile)[-1]
    check = values(runtime, "HEALTHCHECK")
    assert len(check) == 1 and '["python", "-m", "app", "health", "gateway"]' in check[0]
    assert values(runtime, "ENTRYPOINT") == ['["python", "-m", "app"]']
    assert values(runtime, "CMD") == ['["gateway"]']
    assert set(values(runtime, "EXPOSE")[0].split()) == {"8787", "4111"}
    # The probe is a real subcommand: with nothing listening it fails with one line.
    probe = subprocess.run([sys.executable, "-m", "app", "health", "gateway", "--port", "1"], cwd=REPO,
                           capture_output=True, text=True, timeout=30)
    assert probe.returncode == 1 and probe.stderr.startswith("unhealthy: gateway")


def test_compose_runs_each_role_from_this_image_with_matching_checks():
    compose = yaml.safe_load((REPO / "docker-compose.yml").read_text())
    services = compose["services"]
    assert set(services) == {"gateway", "studio"}
    defaults = Settings()
    for role, service in services.items():
        assert service["build"] == "." and (REPO / "Dockerfile").is_file()
        assert service["command"] == [role]
        assert service["healthcheck"]["test"] == ["CMD", "python", "-m", "app", "health", role]
        port = defaults.port_for(role)
        assert service["ports"] == [f"{port}:{port}"]
        assert service["volumes"] == ["data:/data"]
    assert "data" in compose["volumes"]
    gateway = services["gateway"]
    assert gateway["environment"]["DEV_SERVER_STUDIO_URL"] == f"http://studio:{defaults.studio_port}"
    assert gateway["depends_on"]["studio"]["condition"] == "service_healthy"
