"""The README's "Your own agent", run as written: its code block saved as ``my_agents.py``
and served with it (in-process, and by the command the README gives), one chat calls its
tool, working memory keeps what the user said across threads, and Observational Memory
observes the thread (its thresholds lowered by the settings that name the agent, the way a
user would try it without editing the example)."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

from tests.kit.chat import chat_turn, reply_text
from tests.kit.local_http import local_http
from tests.kit.om import om_chunks, record_row
from tests.kit.servers import process_env, serve
from tests.support import REPO, free_port, user_message

AGENT = "weather-agent"
TRIP = ("We are planning a week in Lisbon in May: trams up to the castle, fado in Alfama, custard tarts in Belem "
        "and a day trip to Sintra. ") * 6


def readme_agents(directory: Path) -> Path:
    """The README's "Your own agent" Python block, saved as ``my_agents.py`` in ``directory``."""
    section = (REPO / "README.md").read_text().split("\n## Your own agent\n")[1].split("\n## ")[0]
    [code] = re.findall(r"```python\n(.*?)```", section, re.S)[:1]
    path = directory / "my_agents.py"
    path.write_text(code)
    return path


def say(server: Any, thread: str, message_id: str, text: str) -> dict[str, Any]:
    result = chat_turn(server, [user_message(message_id, text)], chat_id=thread, body={"conversationId": thread})
    assert result["ok"], result["error"]
    return result


def test_the_readme_agent_runs_its_tool_and_remembers(tmp_path: Path) -> None:
    agents = readme_agents(tmp_path)
    settings = {"agents": str(agents), "telemetry": False,
                "om_agents": AGENT, "om_message_tokens": 300, "om_buffer_tokens": "false"}
    with serve("gateway", tmp_path / "data", inprocess=True, settings=settings) as gateway:
        weather = say(gateway, "lisbon", "m1", "use the get_weather tool: Lisbon")
        assert weather["chunks"][0]["messageMetadata"]["agentId"] == AGENT
        assert [c["output"] for c in weather["chunks"] if c["type"] == "tool-output-available"] == [
            {"city": "Lisbon", "temperature_c": 21, "conditions": "sunny"}]
        assert "get_weather tool returned" in reply_text(weather)

        remembered = say(gateway, "lisbon", "m2", "remember that my home city is Porto")
        assert [c["toolName"] for c in remembered["chunks"] if c["type"] == "tool-input-available"] == [
            "updateWorkingMemory"]
        elsewhere = say(gateway, "another-trip", "m3", "what do you know about me?")  # resource scope
        assert "Porto" in reply_text(elsewhere)

        observed = say(gateway, "lisbon", "m4", TRIP)  # past 300 unobserved tokens: observed before the answer
        assert [c["type"] for c in om_chunks(observed, "observation")] == [
            "data-om-observation-start", "data-om-observation-end"]
    assert "Lisbon" in record_row(gateway.db, "lisbon")["active_observations"]


def test_the_readme_command_runs_the_agent_in_both_processes(tmp_path: Path) -> None:
    """``python -m dev_server dev --agents my_agents.py`` from the file's directory: both
    processes run the agent, and the banner names it."""
    readme_agents(tmp_path)
    gateway_port, studio_port = free_port(), free_port()
    env = {**process_env(tmp_path / "data"), "DEV_SERVER_GATEWAY_PORT": str(gateway_port),
           "DEV_SERVER_STUDIO_PORT": str(studio_port), "DEV_SERVER_TELEMETRY": "false"}
    dev = subprocess.Popen([sys.executable, "-m", "dev_server", "dev", "--agents", "my_agents.py"], cwd=tmp_path,
                           env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                           start_new_session=True)
    watchdog = threading.Timer(90, os.killpg, (dev.pid, signal.SIGKILL))  # a banner that never comes ends the read
    watchdog.start()
    try:
        banner = []
        for line in dev.stdout:
            banner.append(line.rstrip("\n"))
            if line.startswith(f"    {AGENT} -> ") or len(banner) > 200:
                break
        assert any(line.startswith(f"    {AGENT} -> openai/gpt-4o-mini") for line in banner), "\n".join(banner)
        agents = local_http.get(f"http://127.0.0.1:{studio_port}/api/agents", timeout=10).json()
        assert list(agents) == [AGENT] and agents[AGENT]["tools"].keys() == {"get_weather"}
        reply = say(f"http://127.0.0.1:{gateway_port}", "cli", "c1", "use the get_weather tool: Porto")
        assert {"city": "Porto", "temperature_c": 21, "conditions": "sunny"} in [
            c.get("output") for c in reply["chunks"]]
    finally:
        watchdog.cancel()
        os.killpg(dev.pid, signal.SIGINT)  # what a terminal's Ctrl-C does
        try:
            dev.communicate(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(dev.pid, signal.SIGKILL)
            dev.communicate()
    assert dev.returncode == 0
