"""The studio's /api routes judged by the real, unchanged ``@mastra/client-js`` 1.47.

One studio process for the module (``start_server`` is function-scoped, so the fixture
below starts it the same way with a module-scoped data dir); ``tests/js/client_conformance.mjs``
runs once per check (~0.4 s of node each; every check makes its own thread ids), so every
check is its own pytest result and a failure shows the client's error plus the last HTTP
exchanges (method, path, body, status, response) that led to it.

A check's warnings (``ctx.warn``: deviations from the contract that client-js tolerates) fail
it too, unless that exact warning is listed in ``KNOWN_DEVIATIONS`` with the issue that will
remove it (word for word, so the list cannot hide a new deviation of the same check).
"""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Iterator

import pytest

from tests.support import JS_DIR, ServerProcess, run_node, running

SCRIPT = "client_conformance.mjs"
NODE = shutil.which("node")
CLIENT_JS = JS_DIR / "node_modules" / "@mastra" / "client-js" / "package.json"

pytestmark = pytest.mark.skipif(
    NODE is None or not CLIENT_JS.exists(),
    reason="needs node and tests/js/node_modules (cd tests/js && npm ci --no-audit --no-fund)",
)


def _check_names() -> list[str]:
    if NODE is None or not CLIENT_JS.exists():
        return ["unavailable"]
    result = subprocess.run([NODE, str(JS_DIR / SCRIPT)], input=json.dumps({"list": True}), text=True,
                            capture_output=True, timeout=60, cwd=JS_DIR, check=True)
    return json.loads(result.stdout)["checks"]


CHECKS = _check_names()

# check -> warnings it is known to give, each with the issue item that removes it (none today;
# the last one, the agent-id resource alias, went with issue 8.9)
KNOWN_DEVIATIONS: dict[str, set[str]] = {}


@pytest.fixture(scope="module")
def studio(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    with running("studio", tmp_path_factory.mktemp("studio-client-js") / "data",
                 env={"PYTHONUNBUFFERED": "1"}) as server:
        yield server


@pytest.mark.parametrize("resource", [None, "chat-agent"])
@pytest.mark.parametrize("check", CHECKS)
def test_client_js(studio: ServerProcess, check: str, resource: str | None) -> None:
    """``resource="chat-agent"``: threads made the way the Studio makes them (resourceId =
    agentId) must come back with that literal resource (issue 8.9)."""
    payload = {"baseUrl": studio.url, "only": [check], **({"resource": resource} if resource else {})}
    out = run_node(SCRIPT, payload, timeout=30)
    (result,) = out["results"]
    assert result["name"] == check
    if not result["ok"]:
        requests = "\n".join(f"  {json.dumps(r)[:500]}" for r in result.get("detail", {}).get("requests", []))
        pytest.fail(f"{check}: {result['error']}\nlast requests by client-js {out['sdkVersion']}:\n{requests}",
                    pytrace=False)
    warnings = set(result.get("detail", {}).get("warnings", []))
    unexpected = warnings - KNOWN_DEVIATIONS.get(check, set())
    assert not unexpected, f"{check} deviates from the contract: {sorted(unexpected)}"

