"""The studio's /api routes judged by the real, unchanged ``@mastra/client-js`` 1.47.

One studio process for the module; ``tests/js/client_conformance.mjs`` runs every check in
one node process per resource mode (every check makes its own thread ids), and each check is still its own pytest
result, asserted from that run's JSON report:
a failure shows the client's error plus the last HTTP exchanges (method, path, body,
status, response) that led to it. The check names are read from the harness's source, so
collecting this module starts no process; ``test_the_harness_runs_exactly_the_listed_checks``
keeps that reading honest.

A check's warnings (``ctx.warn``: deviations from the contract that client-js tolerates) fail
it too, unless that exact warning is listed in ``KNOWN_DEVIATIONS`` with the issue that will
remove it (word for word, so the list cannot hide a new deviation of the same check).
"""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Callable
from typing import Any

import pytest

from tests.kit.servers import ProcessServer, server_fixture
from tests.support import JS_DIR, run_node

SCRIPT = "client_conformance.mjs"
NODE = shutil.which("node")
CLIENT_JS = JS_DIR / "node_modules" / "@mastra" / "client-js" / "package.json"

pytestmark = pytest.mark.skipif(
    NODE is None or not CLIENT_JS.exists(),
    reason="needs node and tests/js/node_modules (cd tests/js && npm ci --no-audit --no-fund)",
)


def _check_names() -> list[str]:
    """The methods of the harness's ``checks`` object, in order (``async name(client, ctx)``)."""
    source = (JS_DIR / SCRIPT).read_text()
    block = source[source.index("\nconst checks = {"):]
    block = block[:block.index("\n};")]
    return re.findall(r"^  async (\w+)\(", block, flags=re.M)


CHECKS = _check_names()

# check -> warnings it is known to give, each with the issue item that removes it (none today;
# the last one, the agent-id resource alias, went with issue 8.9)
KNOWN_DEVIATIONS: dict[str, set[str]] = {}


studio = server_fixture("studio")


@pytest.fixture(scope="module")
def reports(studio: ProcessServer) -> Callable[[str | None], dict[str, Any]]:
    """Each resource mode's run of every check, run when a test first asks for it."""
    runs: dict[str | None, dict[str, Any]] = {}

    def report(resource: str | None) -> dict[str, Any]:
        if resource not in runs:
            payload = {"baseUrl": studio.url, **({"resource": resource} if resource else {})}
            runs[resource] = run_node(SCRIPT, payload, timeout=300)
        return runs[resource]

    return report


def test_the_harness_runs_exactly_the_listed_checks(reports) -> None:
    out = run_node(SCRIPT, {"list": True})
    assert out["checks"] == CHECKS
    assert [r["name"] for r in reports(None)["results"]] == CHECKS


@pytest.mark.parametrize("resource", [None, "chat-agent"])
@pytest.mark.parametrize("check", CHECKS)
def test_client_js(reports, check: str, resource: str | None) -> None:
    """``resource="chat-agent"``: threads made the way the Studio makes them (resourceId =
    agentId) must come back with that literal resource (issue 8.9)."""
    out = reports(resource)
    (result,) = [r for r in out["results"] if r["name"] == check]
    if not result["ok"]:
        requests = "\n".join(f"  {json.dumps(r)[:500]}" for r in result.get("detail", {}).get("requests", []))
        pytest.fail(f"{check}: {result['error']}\nlast requests by client-js {out['sdkVersion']}:\n{requests}",
                    pytrace=False)
    warnings = set(result.get("detail", {}).get("warnings", []))
    unexpected = warnings - KNOWN_DEVIATIONS.get(check, set())
    assert not unexpected, f"{check} deviates from the contract: {sorted(unexpected)}"

