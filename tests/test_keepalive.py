"""Keep-alive that clients survive (dev_server/__main__.py: uvicorn's ``timeout_keep_alive``).

uvicorn's own default closes an idle connection after 5 s without saying so; a Node client
reusing its pooled socket just then gets ECONNRESET (measured on the old code with pauses
of 4995-5004 ms: 11 resets in 104 requests). Here a real gateway process is driven by
Node's ``http.Agent({keepAlive: true})`` (tests/js/keepalive_bursts.mjs) in bursts separated
by pauses just under and just over 5 s: no request may fail, and every burst after the
first reuses the sockets of the one before.
"""

from __future__ import annotations

import pytest

from tests.support import run_node

pytestmark = pytest.mark.slow


def test_node_keep_alive_bursts_around_five_seconds_never_reset(start_server):
    gateway = start_server("gateway")
    result = run_node("keepalive_bursts.mjs", {"url": f"{gateway.url}/health", "burst": 8,
                                               "pausesMs": [4990, 4995, 4998, 5000, 5003, 5200]}, timeout=90)
    assert result["keepAliveHeader"] == "timeout=75"
    assert result["errors"] == [] and result["resets"] == 0
    assert result["requests"] == result["ok"] == 56
    # The server kept every idle socket open across each pause (the old 5 s timeout had
    # closed them all by the 5.2 s pause).
    assert [burst["reused"] for burst in result["bursts"]] == [0, 8, 8, 8, 8, 8, 8]


def test_a_shorter_keep_alive_is_advertised_and_a_timed_pool_leaves_first(start_server):
    # An agent with its own idle timeout (Node's globalAgent: 5 s) closes its socket a
    # second before the advertised timeout, so pauses just under it never meet a closed one.
    gateway = start_server("gateway", env={"DEV_SERVER_KEEP_ALIVE_S": "2"})
    result = run_node("keepalive_bursts.mjs", {"url": f"{gateway.url}/health", "burst": 4, "agentTimeoutMs": 5000,
                                               "pausesMs": [1990, 2000, 2010, 2600]}, timeout=60)
    assert result["keepAliveHeader"] == "timeout=2"
    assert result["errors"] == [] and result["resets"] == 0 and result["ok"] == 20
    assert [burst["fresh"] for burst in result["bursts"]] == [4, 4, 4, 4, 4]
