"""The Docker setup, checked without a Docker engine (none runs here).

- ``docker-compose.yml`` is interpolated as ``docker compose config`` does and validated
  against the Compose Specification's JSON schema (the copy ``check-jsonschema`` vendors
  and keeps current), then cross-checked: references between services, volumes and files,
  two gateway replicas, settings that ``dev_server/settings.py`` knows, the studio as the only
  owner of the DuckDB file.
- ``Dockerfile`` is parsed with ``dockerfile-parse``: slim Python 3.11, non-root, the
  Studio build baked in, a HEALTHCHECK that exists in the image; ``.dockerignore`` keeps
  local state out of the context but not what the build copies.
- ``deploy/nginx.conf`` is parsed here (structure, SSE settings, upstreams naming both
  gateways) and by Debian's nginx itself (``nginx -t``), and ``deploy/otel-collector.yaml``'s
  pipelines are checked.
- The same topology runs as plain processes in ``tests/test_docker_topology.py``.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from dockerfile_parse import DockerfileParser
from pydantic import ValidationError

from dev_server.preflight import check_exposure
from dev_server.provider_env import PROVIDER_VARIABLE
from dev_server.settings import ENV_PREFIX, Settings, SettingsError
from tests.kit.compose import (
    COMPOSE,
    HEALTHCHECK,
    NGINX_CONF,
    WITHOUT_AUTH,
    app_services,
    environment,
    load_compose,
    needs_nginx,
    nginx_command,
    render_nginx,
    role_of,
)
from tests.support import REPO, free_port

OTEL_CONF = REPO / "deploy" / "otel-collector.yaml"


# ------------------------------------------------------------------------ compose, parsed

@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    return load_compose()


def check_compose_schema(document: dict[str, Any], tmp_path: Path) -> subprocess.CompletedProcess:
    target = tmp_path / "compose.json"
    target.write_text(json.dumps(document))
    return subprocess.run([sys.executable, "-m", "check_jsonschema", "--builtin-schema", "vendor.compose-spec",
                           str(target)], capture_output=True, text=True, timeout=60)


def test_compose_file_is_valid_against_the_compose_specification(compose, tmp_path: Path):
    for env in ({}, {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://otel-collector:4318", "DEV_SERVER_WORKERS": "4"}):
        result = check_compose_schema(load_compose({**WITHOUT_AUTH, **env}), tmp_path)
        assert result.returncode == 0, result.stdout + result.stderr
    # The schema bites: a misspelt key, or a wrong type, is refused.
    broken = load_compose()
    broken["services"]["gateway-1"]["helthcheck"] = broken["services"]["gateway-1"].pop("healthcheck")
    assert check_compose_schema(broken, tmp_path).returncode == 1
    broken = load_compose()
    broken["services"]["lb"]["depends_on"]["gateway-1"]["condition"] = "service_ready"
    assert check_compose_schema(broken, tmp_path).returncode == 1


def test_compose_references_resolve(compose):
    """What ``docker compose config`` checks beyond the schema: every referenced service,
    volume and file exists, a default service never needs one of a profile, no host port
    is published twice, and what waits for ``service_healthy`` has a health check."""
    services = compose["services"]
    declared_volumes = set(compose.get("volumes") or {})
    published: list[str] = []
    image_healthcheck = {"sqld"}  # the libsql-server image's own probe is named explicitly below
    for name, service in services.items():
        assert "image" in service or "build" in service, name
        if "build" in service:
            assert (REPO / "Dockerfile").is_file()
        for dependency, spec in (service.get("depends_on") or {}).items():
            assert dependency in services, f"{name} depends on unknown {dependency}"
            if not service.get("profiles"):
                assert not services[dependency].get("profiles"), f"{name} needs {dependency} of a profile"
            if spec["condition"] == "service_healthy":
                assert "healthcheck" in services[dependency] or dependency in image_healthcheck, dependency
        for mount in service.get("volumes") or []:
            source, target, *_ = mount.split(":")
            assert target.startswith("/"), mount
            if source.startswith((".", "/")):
                assert (REPO / source).exists(), f"{name} mounts missing {source}"
            else:
                assert source in declared_volumes, f"{name} mounts undeclared volume {source}"
        for port in service.get("ports") or []:
            published.append(str(port).rsplit(":", 1)[0])
        for env_file in service.get("env_file") or []:
            assert env_file == {"path": ".env", "required": False}  # provider keys, optional
    assert len(published) == len(set(published)), published
    used = {m.split(":")[0] for s in services.values() for m in s.get("volumes") or []}
    assert declared_volumes <= used


def test_topology_sqld_two_gateways_behind_nginx_and_one_studio(compose):
    services = compose["services"]
    defaults = Settings()
    apps = app_services(compose)
    gateways = sorted(name for name, s in apps.items() if role_of(s) == "gateway")
    studios = [name for name, s in apps.items() if role_of(s) == "studio"]
    assert gateways == ["gateway-1", "gateway-2"] and studios == ["studio"]
    assert len({json.dumps(apps[name], sort_keys=True) for name in gateways}) == 1  # true replicas
    assert {apps[name]["image"] for name in apps} == {"dev-server:local"}  # one image, built once

    sqld = services["sqld"]
    assert sqld["image"] == "ghcr.io/tursodatabase/libsql-server:latest"
    assert any(m.endswith(":/var/lib/sqld") for m in sqld["volumes"])
    for name, service in apps.items():
        env = environment(service)
        assert env["DEV_SERVER_DB_URL"] == "http://sqld:8080", name
        assert env["DEV_SERVER_HOST"] == "0.0.0.0", name
        assert service["depends_on"]["sqld"]["condition"] == "service_healthy"
        assert service["healthcheck"]["test"] == ["CMD", "dev-server-healthcheck", role_of(service)]
        assert "profiles" not in service
    for name in gateways:
        gateway = apps[name]
        # OTLP to the studio's receivers, unless OTEL_EXPORTER_OTLP_ENDPOINT names a collector
        assert environment(gateway)["DEV_SERVER_STUDIO_URL"] == f"http://studio:{defaults.studio_port}"
        assert environment(gateway)["OTEL_EXPORTER_OTLP_ENDPOINT"] == ""
        assert gateway["depends_on"]["studio"]["condition"] == "service_healthy"
        assert "ports" not in gateway and gateway["expose"] == [str(defaults.gateway_port)]
        assert not gateway.get("volumes")  # nothing of a gateway outlives its container
    studio = apps["studio"]
    assert studio["ports"] == [f"{defaults.studio_port}:{defaults.studio_port}"]
    data_dir = environment(studio)["DEV_SERVER_DATA_DIR"]
    assert [m for m in studio["volumes"] if m.split(":")[1] == data_dir] == [f"studio-data:{data_dir}"]
    # The DuckDB file lives in the studio's data dir: no other service mounts that volume.
    assert [n for n, s in services.items() if any(m.startswith("studio-data:") for m in s.get("volumes") or [])] \
        == ["studio"]

    lb = services["lb"]
    assert lb["image"].startswith("nginx:")
    assert lb["ports"] == [f"{defaults.gateway_port}:{defaults.gateway_port}"]
    assert lb["volumes"] == ["./deploy/nginx.conf:/etc/nginx/nginx.conf:ro"]
    assert {n for n, d in lb["depends_on"].items() if d["condition"] == "service_healthy"} == set(gateways)

    collector = services["otel-collector"]
    assert collector["profiles"] == ["otel"] and "4318" in collector["expose"]
    assert "./deploy/otel-collector.yaml:/etc/otelcol-contrib/config.yaml:ro" in collector["volumes"]
    assert collector["depends_on"]["studio"]["condition"] == "service_healthy"
    # No default service waits for the collector: the gateways queue their telemetry instead.
    assert all("otel-collector" not in (s.get("depends_on") or {}) for s in services.values())


def known_variables() -> set[str]:
    names = set()
    for name, field in Settings.model_fields.items():
        names.add(field.validation_alias if isinstance(field.validation_alias, str) else ENV_PREFIX + name.upper())
    return names


@pytest.mark.parametrize("otel", ["", "http://otel-collector:4318"])
def test_every_app_variable_is_a_setting_and_valid(compose, monkeypatch: pytest.MonkeyPatch, otel: str):
    known = known_variables()
    for name, service in app_services(load_compose({**WITHOUT_AUTH, **({"OTEL_EXPORTER_OTLP_ENDPOINT": otel} if otel
                                                                      else {})})).items():
        env = environment(service)
        unknown = sorted(k for k in env if k not in known and not PROVIDER_VARIABLE.match(k))
        assert not unknown, f"{name}: {unknown} are not settings of dev_server/settings.py"
        for key in list(os.environ):
            if key.startswith(("DEV_SERVER_", "OTEL_")):
                monkeypatch.delenv(key)
        for key, value in env.items():
            monkeypatch.setenv(key, value)
        settings = Settings(_env_file=None)  # raises on an invalid value
        assert settings.host == "0.0.0.0" and settings.db_url == "http://sqld:8080"
        assert str(settings.data_dir) == "/data"
        if role_of(service) == "gateway":
            assert settings.workers == 2
            # An empty endpoint leaves the studio as the target (dev_server.observability.telemetry).
            assert (settings.otel_endpoint or None) == (otel or None)


def test_compose_starts_only_once_auth_is_decided(monkeypatch: pytest.MonkeyPatch):
    """Every app listens on 0.0.0.0: compose refuses to start until .env or the shell says
    DEV_SERVER_AUTH (on, with tokens; or off), and each process's own check (``dev_server.preflight``)
    would refuse too without it."""
    with pytest.raises(ValueError, match="required variable DEV_SERVER_AUTH is missing"):
        load_compose({})
    for given in ({"DEV_SERVER_AUTH": "off"}, {"DEV_SERVER_AUTH": "on", "DEV_SERVER_AUTH_TOKENS": "tok=alice"},
                  {"DEV_SERVER_AUTH": "on"}):
        for name, service in app_services(load_compose(given)).items():
            env = environment(service)
            for key in [k for k in os.environ if k.startswith(("DEV_SERVER_", "OTEL_"))]:
                monkeypatch.delenv(key)
            for key, value in env.items():
                monkeypatch.setenv(key, value)
            if "DEV_SERVER_AUTH_TOKENS" not in given and given["DEV_SERVER_AUTH"] == "on":
                with pytest.raises(ValidationError, match="DEV_SERVER_AUTH=on needs DEV_SERVER_AUTH_TOKENS"):
                    Settings(_env_file=None)
                continue
            settings = Settings(_env_file=None)
            check_exposure(settings, settings.host)  # passes: auth is on, or off on purpose
            assert (settings.auth_tokens is None) == (given["DEV_SERVER_AUTH"] == "off"), name
            monkeypatch.delenv("DEV_SERVER_AUTH")  # a container started without compose's check
            monkeypatch.delenv("DEV_SERVER_AUTH_TOKENS")
            with pytest.raises(SettingsError, match="refusing to listen on 0.0.0.0 without auth"):
                check_exposure(Settings(_env_file=None), settings.host)


# ------------------------------------------------------------------------ the Dockerfile

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


def dockerignored(path: str) -> bool:
    """Docker's .dockerignore rules: Go path patterns with ``**``, ``!`` re-includes, the last
    matching line wins, and a pattern that matches a directory excludes what is inside."""
    verdict = False
    for line in (REPO / ".dockerignore").read_text().splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        include = line.startswith("!")
        pattern = line.removeprefix("!").strip("/")
        regex = "".join(".*" if part == "**" else re.escape(part).replace(r"\*", "[^/]*").replace(r"\?", "[^/]")
                        for part in re.split(r"(\*\*)", pattern))
        regex = regex.replace(".*/", "(?:.*/)?")
        parts = path.split("/")
        if any(re.fullmatch(regex, "/".join(parts[:n])) for n in range(1, len(parts) + 1)):
            verdict = not include
    return verdict


def test_dockerignore_keeps_local_state_out_but_not_what_the_build_copies(dockerfile):
    copied = []
    for stage in stages(dockerfile):
        for value in values(stage, "COPY"):
            words = shlex.split(value)
            if any(w.startswith("--from=") for w in words):
                continue
            copied.extend(w for w in words[:-1] if not w.startswith("--"))
    assert {"pyproject.toml", "README.md", "dev_server", "migrations", "dev_server/fetch_studio_ui.py",
            "deploy/healthcheck.py"} <= set(copied)
    for source in copied:
        assert (REPO / source).exists(), source
        assert not dockerignored(source), f"{source} is excluded by .dockerignore"
    for local in (".venv", ".temp", ".env", ".git", "studio-ui", "studio-ui/index.html", "node_modules",
                  "tests/js/node_modules", "dev_server/__pycache__/x.pyc", "deploy/nginx.conf", "tests", "bench"):
        assert dockerignored(local), f"{local} should stay out of the build context"


def test_the_runtime_is_slim_python_non_root_with_the_studio_baked_in(dockerfile):
    *build, runtime = stages(dockerfile)
    assert values(runtime, "FROM") == ["python:3.11-slim"]
    users = values(runtime, "USER")
    assert users and users[-1] not in ("root", "0") and any("useradd" in r and users[-1] in r
                                                            for r in values(runtime, "RUN"))
    studio_stage = next(stage for stage in build
                        if any("fetch_studio_ui.py" in r for r in values(stage, "RUN")))
    assert values(studio_stage, "FROM")[0].startswith("node:20")  # the script needs npm (and python3)
    alias = values(studio_stage, "FROM")[0].split()[-1]
    baked = [shlex.split(v) for v in values(runtime, "COPY") if f"--from={alias}" in v]
    assert baked, "the Studio build is not copied into the runtime"
    env = dict(item.split("=", 1) for v in values(runtime, "ENV") for item in shlex.split(v.replace("\\\n", " ")))
    assert env["DEV_SERVER_DATA_DIR"] == "/data" and env["DEV_SERVER_HOST"] == "0.0.0.0"
    assert env["DEV_SERVER_STUDIO_UI_DIR"] == baked[0][-1]
    assert {k for k in env if k.startswith(ENV_PREFIX)} <= known_variables()
    # The package is installed from the wheels of pyproject.toml, as `pip install .` would.
    installs = [r for r in values(runtime, "RUN") if "pip install" in r]
    assert len(installs) == 2 and all("--mount=type=bind,from=wheels" in r for r in installs)


def test_the_health_check_and_entrypoint_run_commands_that_exist(dockerfile):
    runtime = stages(dockerfile)[-1]
    check = values(runtime, "HEALTHCHECK")
    assert len(check) == 1 and check[0].endswith('CMD ["dev-server-healthcheck"]')
    assert any(v.split() == ["deploy/healthcheck.py", "/usr/local/bin/dev-server-healthcheck"]
               for v in values(runtime, "COPY"))
    assert any("chmod 0755 /usr/local/bin/dev-server-healthcheck" in r for r in values(runtime, "RUN"))
    assert HEALTHCHECK.read_text().startswith("#!/usr/bin/env python3\n")
    assert values(runtime, "ENTRYPOINT") == ['["python", "-m", "dev_server"]']
    assert values(runtime, "CMD") == ['["gateway"]']
    defaults = Settings()
    assert set(values(runtime, "EXPOSE")[0].split()) == {str(defaults.gateway_port), str(defaults.studio_port)}
    # The probe's ports are the settings' (same variables, same defaults), and it uses only
    # the standard library: nothing listening is one line and exit 1.
    probe = subprocess.run([sys.executable, "-I", str(HEALTHCHECK)], capture_output=True, text=True, timeout=30,
                           env={"DEV_SERVER_GATEWAY_PORT": str(free_port()),
                                "DEV_SERVER_STUDIO_PORT": str(free_port())})
    assert probe.returncode == 1 and probe.stderr.startswith("unhealthy: nothing answers /health")
    source = HEALTHCHECK.read_text()
    assert f'("DEV_SERVER_GATEWAY_PORT", {defaults.gateway_port})' in source
    assert f'("DEV_SERVER_STUDIO_PORT", {defaults.studio_port})' in source
    assert not re.search(r"^(?:from|import) (?!__future__|json|os|sys|urllib)", source, re.M)


# ------------------------------------------------------------------------ nginx and the collector

def parse_nginx(text: str) -> list[tuple[str, list[str], list | None]]:
    """nginx's configuration syntax: ``name args;`` or ``name args { ... }``; # comments,
    quoted strings. Raises on unbalanced braces or a directive without its semicolon."""
    tokens = re.findall(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'|#[^\n]*|[{};]|[^\s{};]+', text)
    stack: list[list] = [[]]
    words: list[str] = []
    for token in tokens:
        if token.startswith("#"):
            continue
        if token in (";", "{"):
            assert words, f"empty directive before {token!r}"
            block: list | None = [] if token == "{" else None
            stack[-1].append((words[0], [w.strip("\"'") for w in words[1:]], block))
            if block is not None:
                stack.append(block)
            words = []
        elif token == "}":
            assert not words and len(stack) > 1, f"unexpected }} after {words}"
            stack.pop()
        else:
            words.append(token)
    assert not words and len(stack) == 1, "unterminated directive or block"
    return stack[0]


def find(tree: list, *path: str) -> list[tuple[str, list[str], list | None]]:
    """Directives at ``path`` (block names, then the directive name)."""
    found = [d for d in tree if d[0] == path[0]]
    if len(path) == 1:
        return found
    return [hit for _, _, block in found if block is not None for hit in find(block, *path[1:])]


def one(tree: list, *path: str) -> list[str]:
    hits = find(tree, *path)
    assert len(hits) == 1, f"{' > '.join(path)}: {len(hits)} found"
    return hits[0][1]


def seconds(value: str) -> int:
    number, unit = re.fullmatch(r"(\d+)(ms|s|m|h)?", value).groups()
    return int(number) * {"ms": 0, None: 1, "s": 1, "m": 60, "h": 3600}[unit]


def test_nginx_config_balances_both_gateways_with_sse_friendly_settings(compose):
    tree = parse_nginx(NGINX_CONF.read_text())
    defaults = Settings()
    gateways = sorted(n for n, s in app_services(compose).items() if role_of(s) == "gateway")
    upstream = [(args, block) for _, args, block in find(tree, "http", "upstream")]
    assert len(upstream) == 1 and upstream[0][0] == ["gateways"]
    servers = [args[0] for name, args, _ in upstream[0][1] if name == "server"]
    assert servers == [f"{name}:{defaults.gateway_port}" for name in gateways]
    assert int(one(upstream[0][1], "keepalive")[0]) > 0
    # nginx closes an idle upstream connection before the gateway would (no reset races)
    assert seconds(one(upstream[0][1], "keepalive_timeout")[0]) < defaults.keep_alive_s

    server = find(tree, "http", "server")
    assert len(server) == 1
    assert one(tree, "http", "server", "listen") == [str(defaults.gateway_port)]
    body_limit = one(tree, "http", "server", "client_max_body_size")[0]
    assert int(body_limit.rstrip("m")) * 1024 * 1024 >= defaults.max_body_bytes
    assert one(tree, "http", "gzip") == ["off"]
    locations = [hit for hit in find(tree, "http", "server", "location") if not hit[1][0].startswith("@")]
    assert [args for _, args, _ in locations] == [["/"]]  # plus named ones (nginx's own answers)
    location = locations[0][2]
    assert one(location, "proxy_pass") == ["http://gateways"]
    assert one(location, "proxy_http_version") == ["1.1"]
    headers = {args[0]: args[1] for name, args, _ in location if name == "proxy_set_header"}
    assert headers["Connection"] == ""  # keep-alive to the gateways, not the client's "close"
    assert headers["Host"] == "$host"
    assert one(location, "proxy_buffering") == ["off"]
    assert one(location, "proxy_cache") == ["off"]
    assert one(location, "gzip") == ["off"]
    assert seconds(one(location, "proxy_read_timeout")[0]) >= 600
    assert seconds(one(location, "proxy_send_timeout")[0]) >= 600
    assert "non_idempotent" not in one(location, "proxy_next_upstream")  # a sent chat is never replayed
    with pytest.raises(AssertionError):
        parse_nginx("http { server { listen 80 } ")  # the parser does refuse broken syntax


def test_nginx_limits_floods_and_slow_clients_per_address_in_json(compose):
    tree = parse_nginx(NGINX_CONF.read_text())
    defaults = Settings()
    zones = {args[1].split("=")[1].split(":")[0]: args for _, args, _ in find(tree, "http", "limit_req_zone")}
    conn_zones = {args[1].split("=")[1].split(":")[0]: args for _, args, _ in find(tree, "http", "limit_conn_zone")}
    assert [args[0] for args in (*zones.values(), *conn_zones.values())] == ["$binary_remote_addr"] * 2
    assert one(tree, "http", "limit_req_status") == one(tree, "http", "limit_conn_status") == ["429"]
    server = find(tree, "http", "server")[0][2]
    conn_zone, connections = one(server, "limit_conn")
    assert conn_zone in conn_zones and int(connections) > 0
    location = next(block for _, args, block in find(server, "location") if args == ["/"])
    req_zone = one(location, "limit_req")[0].removeprefix("zone=")
    assert req_zone in zones
    # The client's own address, which the gateways trust to key the turn rate limit.
    headers = {args[0]: args[1] for name, args, _ in location if name == "proxy_set_header"}
    assert headers["X-Forwarded-For"] == "$remote_addr"
    for service in (s for s in app_services(compose).values() if role_of(s) == "gateway"):
        assert environment(service)["DEV_SERVER_FORWARDED_ALLOW_IPS"] == "*"
    # Slow clients are cut off here, no later than the gateways would.
    assert seconds(one(server, "client_header_timeout")[0]) <= defaults.header_timeout_s
    assert seconds(one(server, "client_body_timeout")[0]) <= defaults.body_timeout_s
    # nginx's own 429 in the gateway's error shape, with Retry-After.
    assert one(server, "error_page") == ["429", "@too_many_requests"]
    named = next(block for _, args, block in find(server, "location") if args == ["@too_many_requests"])
    assert one(named, "default_type") == ["application/json"]
    assert one(named, "add_header")[:2] == ["Retry-After", "1"]
    status, body = one(named, "return")
    assert status == "429" and set(json.loads(body)) == {"error"}


def test_compose_limits_turns_per_principal_across_the_topology(compose):
    for name, service in app_services(compose).items():
        assert int(environment(service)["DEV_SERVER_TURN_RATE_LIMIT"]) > 0, name
    assert Settings().turn_rate_limit is None  # make dev: off


def test_otel_collector_pipelines_forward_to_the_studio(compose):
    config = yaml.safe_load(OTEL_CONF.read_text())
    defaults = Settings()
    pipelines = config["service"]["pipelines"]
    assert set(pipelines) == {"traces", "logs"}  # what the gateways export
    for pipeline in pipelines.values():
        for kind in ("receivers", "processors", "exporters"):
            for component in pipeline.get(kind, []):
                assert component in config[kind], f"{component} is not defined under {kind}"
        assert "otlphttp/studio" in pipeline["exporters"]
    assert config["exporters"]["otlphttp/studio"]["endpoint"] == f"http://studio:{defaults.studio_port}"
    # The gateways export OTLP/HTTP: the endpoint documented for compose reaches the receiver.
    assert config["receivers"]["otlp"]["protocols"]["http"]["endpoint"] == "0.0.0.0:4318"
    assert "http://otel-collector:4318" in COMPOSE.read_text()


@needs_nginx
def test_nginx_itself_accepts_the_config(tmp_path: Path):
    conf = render_nginx(tmp_path, free_port(), {"gateway-1": free_port(), "gateway-2": free_port()})
    result = subprocess.run(nginx_command(conf, "-t"), capture_output=True, text=True, timeout=30)
    assert result.returncode == 0 and "test is successful" in result.stderr, result.stderr
