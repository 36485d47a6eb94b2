#!/usr/bin/env python3
"""The image's HEALTHCHECK: exit 0 when this container's process says ``/health`` ``"ok"``.

    dev-server-healthcheck [gateway|studio]

With a role it probes that role's port (``DEV_SERVER_GATEWAY_PORT`` / ``DEV_SERVER_STUDIO_PORT``,
defaults 8787 / 4111); without one, whichever of the two answers, so one HEALTHCHECK fits a
container of either role. Standard library only: ``python -m dev_server health ROLE`` does the same
but imports the whole app (about a second of CPU), too much to pay every few seconds in every
container. Anything but ``"ok"`` (``"starting"`` while the models warm up, an error, nothing
listening) exits 1 with one line.
"""

from __future__ import annotations

import json
import os
import sys
import urllib.error
import urllib.request

PORTS = {"gateway": ("DEV_SERVER_GATEWAY_PORT", 8787), "studio": ("DEV_SERVER_STUDIO_PORT", 4111)}


def port_of(role: str) -> int:
    variable, default = PORTS[role]
    return int(os.environ.get(variable) or default)


def status_of(port: int) -> str | None:
    """The ``status`` of ``/health`` on ``port``, or None when nothing answers there."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=4) as response:
            return str(json.load(response).get("status"))
    except urllib.error.HTTPError as exc:
        return f"HTTP {exc.code}"
    except (OSError, ValueError, AttributeError):
        return None


def main(argv: list[str]) -> int:
    if argv and argv[0] not in PORTS:
        print(f"usage: dev-server-healthcheck [{'|'.join(PORTS)}]", file=sys.stderr)
        return 2
    for role in argv or list(PORTS):
        status = status_of(port_of(role))
        if status is not None:
            if status == "ok":
                return 0
            print(f"unhealthy: {role} on port {port_of(role)}: {status}", file=sys.stderr)
            return 1
    print(f"unhealthy: nothing answers /health on port {', '.join(str(port_of(r)) for r in argv or PORTS)}",
          file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
