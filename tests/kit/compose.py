"""The repository's compose topology as tests read and run it: ``docker-compose.yml``
interpolated as ``docker compose config`` does, its services' roles and environments, and
``deploy/nginx.conf`` rendered for loopback ports and run by Debian's nginx."""

from __future__ import annotations

import re
import shlex
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support import REPO

COMPOSE = REPO / "docker-compose.yml"
NGINX_CONF = REPO / "deploy" / "nginx.conf"
HEALTHCHECK = REPO / "deploy" / "healthcheck.py"
IMAGE_ROLES = ("gateway", "studio")
NGINX = shutil.which("nginx") or ("/usr/sbin/nginx" if Path("/usr/sbin/nginx").exists() else None)
needs_nginx = pytest.mark.skipif(NGINX is None, reason="Debian's nginx is not installed (make nginx)")


_VARIABLE = re.compile(r"\$(?:\$|\{([A-Za-z_][A-Za-z0-9_]*)(?:(:?[-?+])([^}]*))?\}|([A-Za-z_][A-Za-z0-9_]*))")


def interpolate(value: Any, env: dict[str, str]) -> Any:
    """Compose's variable substitution (``$$``, ``$VAR``, ``${VAR}``, ``${VAR:-default}``,
    ``${VAR-default}``, ``${VAR:?error}``, ``${VAR:+other}``), applied to every string."""
    if isinstance(value, dict):
        return {key: interpolate(item, env) for key, item in value.items()}
    if isinstance(value, list):
        return [interpolate(item, env) for item in value]
    if not isinstance(value, str):
        return value

    def substitute(match: re.Match) -> str:
        if match.group(0) == "$$":
            return "$"
        name = match.group(1) or match.group(4)
        operator, word = match.group(2), match.group(3) or ""
        current = env.get(name)
        present, non_empty = current is not None, bool(current)
        if operator in (":-", "-"):
            return current if (non_empty if operator == ":-" else present) else word
        if operator in (":?", "?"):
            if not (non_empty if operator == ":?" else present):
                raise ValueError(f"required variable {name} is missing: {word}")
            return current
        if operator in (":+", "+"):
            return word if (non_empty if operator == ":+" else present) else ""
        return current or ""

    return _VARIABLE.sub(substitute, value)


# What compose needs from .env or the shell before it starts anything: auth decided, here off.
WITHOUT_AUTH = {"DEV_SERVER_AUTH": "off"}


def load_compose(env: dict[str, str] | None = None) -> dict[str, Any]:
    """docker-compose.yml as compose reads it with ``env`` (default ``WITHOUT_AUTH``) set."""
    return interpolate(yaml.safe_load(COMPOSE.read_text()), WITHOUT_AUTH if env is None else env)


def app_services(compose: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Services run from this repository's image (built from its Dockerfile)."""
    return {name: s for name, s in compose["services"].items() if s.get("build") in (".", {"context": "."})}


def role_of(service: dict[str, Any]) -> str:
    command = service["command"]
    words = shlex.split(command) if isinstance(command, str) else command
    assert len(words) == 1 and words[0] in IMAGE_ROLES, command
    return words[0]


def environment(service: dict[str, Any]) -> dict[str, str]:
    env = service.get("environment") or {}
    if isinstance(env, list):
        env = dict(item.split("=", 1) if "=" in item else (item, "") for item in env)
    return {key: "" if value is None else str(value) for key, value in env.items()}


def render_nginx(tmp_path: Path, listen: int, gateways: dict[str, int]) -> Path:
    """deploy/nginx.conf with the compose service names mapped to loopback ports."""
    text = NGINX_CONF.read_text()
    text, count = re.subn(r"(?m)^(\s*listen )\d+;", rf"\g<1>127.0.0.1:{listen};", text)
    assert count == 1
    for name, port in gateways.items():
        text, count = re.subn(rf"(?m)^(\s*server ){re.escape(name)}:\d+", rf"\g<1>127.0.0.1:{port}", text)
        assert count == 1, name
    target = tmp_path / "nginx.conf"
    target.write_text(text)
    return target


def nginx_command(conf: Path, *extra: str) -> list[str]:
    return [NGINX, "-p", str(conf.parent), "-c", str(conf), "-e", str(conf.parent / "error.log"),
            "-g", f"pid {conf.parent / 'nginx.pid'};", *extra]
