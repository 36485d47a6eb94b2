"""The real Mastra Studio build driven in Debian's headless chromium
(``tests/js/studio_ui.mjs``) against a studio process, and the gateway turn that seeds a
thread for it."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.kit.builders import user_message
from tests.kit.local_http import local_http
from tests.support import REPO, run_node

UI_DIR = REPO / "studio-ui"
FETCH = REPO / "dev_server" / "fetch_studio_ui.py"
CHROMIUM = Path("/usr/bin/chromium")


def ensure_studio_build() -> Path:
    """The Studio build in studio-ui/, fetched first if missing (skips without npm)."""
    if not (UI_DIR / "index.html").is_file():
        if shutil.which("npm") is None:
            pytest.skip("no Studio build in studio-ui/ and no npm to fetch it (run make studio-ui)")
        result = subprocess.run([sys.executable, str(FETCH), str(UI_DIR)], capture_output=True, text=True,
                                timeout=300)
        assert result.returncode == 0, result.stderr
    return UI_DIR


def chat_through_gateway(gateway_url: str, conversation_id: str, text: str) -> str:
    """One turn on ``conversation_id``; the raw SSE body."""
    body = {"id": "c", "conversationId": conversation_id, "messages": [user_message("u1", text)]}
    with local_http.stream("POST", f"{gateway_url}/api/chat", json=body, timeout=30) as response:
        assert response.status_code == 200, response.read()
        return response.read().decode()


def run_studio(studio, **request) -> dict:
    """One ``studio_ui.mjs`` run against ``studio``; no failed request, console or page error,
    and a reply from the local model."""
    result = run_node("studio_ui.mjs", {"baseUrl": studio.url, "agentId": "chat-agent", "agentName": "Chat Agent",
                                        "timeoutMs": 30000, **request}, timeout=150)
    problems = {k: result[k] for k in ("ok", "error", "steps", "failedRequests", "consoleErrors", "pageErrors",
                                       "replyText", "finalUrl")}
    report = json.dumps(problems, indent=1) + f"\nstudio log:\n{studio.output()[-3000:]}"
    assert result["ok"], report
    assert result["failedRequests"] == [], report
    assert result["consoleErrors"] == [], report
    assert result["pageErrors"] == [], report
    assert (result["replyText"] or "").startswith("[local model]"), report
    return result


# Pages the Studio routes to that its sidebar hides here: Prompts is shown only with a CMS
# (``cmsEnabled``); the keyboard shortcut "g p" still opens it.
HIDDEN_PAGES = ["/prompts"]


def walk_studio(studio, agent_id: str = "chat-agent", expect_paths: tuple[str, ...] = ()) -> dict:
    """One ``studio_pages.mjs`` walk of every page of the Studio's navigation (after the
    sidebar shows ``expect_paths``); no failed request, console or page error, and no page
    showing "Failed to load ..."."""
    result = run_node("studio_pages.mjs", {"baseUrl": studio.url, "agentId": agent_id, "extraPaths": HIDDEN_PAGES,
                                           "expectPaths": list(expect_paths), "timeoutMs": 30000}, timeout=300)
    pages = [{k: page[k] for k in ("path", "requests", "failedRequests", "consoleErrors", "failureTexts")}
             for page in result.get("pages", [])]
    problems = {k: result[k] for k in ("ok", "error", "failedRequests", "consoleErrors", "pageErrors")}
    report = json.dumps({**problems, "pages": pages}, indent=1) + f"\nstudio log:\n{studio.output()[-3000:]}"
    assert result["ok"], report
    assert result["failedRequests"] == result["consoleErrors"] == result["pageErrors"] == [], report
    return result
