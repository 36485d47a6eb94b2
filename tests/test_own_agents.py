"""Your own agents without forking: the public names (``from dev_server import Agent, Memory,
WorkingMemory, tool``), ``@tool``, the checks an ``Agent`` makes, ``--agents`` /
``DEV_SERVER_AGENTS`` loading an import string or a ``.py`` file, and the one-line errors
of a bad one (exit 2 from the command line)."""

from __future__ import annotations

import asyncio
import sys
import textwrap
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any

import pytest
from pydantic import BaseModel, Field

import dev_server
from dev_server import Agent, Memory, Tool, ToolContext, WorkingMemory, tool
from dev_server.agents.definition import AgentDefinition
from dev_server.agents.loading import AgentsError, load_agents
from dev_server.agents.registry import DEFINITIONS
from dev_server.factory import create_app
from dev_server.kernel.tools import execute
from dev_server.memory.options import MemoryOptions
from dev_server.memory.working_document import WorkingMemoryOptions
from dev_server.settings import Settings
from tests.kit.chat import chat_turn
from tests.kit.cli import assert_one_error_line, run_cli
from tests.kit.servers import process_env, serve
from tests.support import user_message

CONTEXT = ToolContext(call_id="c1", agent_id="support", run_id="r1", thread_id="t1")

TWO_AGENTS = '''
from dev_server import Agent, Memory, tool


@tool
def order_status(order_id: str) -> dict:
    """The status of an order."""
    return {"order": order_id, "status": "shipped"}


support = Agent(id="support", instructions="Help with orders.", tools=[order_status],
                memory=Memory(last_messages=5))
sales = Agent(id="sales", instructions="Sell.", model="anthropic/claude-haiku-4-5")
'''


def test_the_public_names_are_what_the_server_runs() -> None:
    assert (Agent, Memory, WorkingMemory, Tool) == (AgentDefinition, MemoryOptions, WorkingMemoryOptions,
                                                   dev_server.kernel.tools.Tool)
    assert set(dev_server.__all__) >= {"Agent", "Memory", "WorkingMemory", "tool", "Tool", "ToolContext"}
    with pytest.raises(AttributeError, match="no attribute 'Nope'"):
        _ = dev_server.Nope


def test_a_decorated_function_is_a_tool_whose_input_is_its_parameters() -> None:
    @tool
    def forecast(city: Annotated[str, Field(description="The city")], days: int = 3,
                 context: ToolContext | None = None) -> dict[str, Any]:
        """The weather forecast of a city."""
        return {"city": city, "days": days, "asked_by": context.agent_id if context else None}

    assert isinstance(forecast, Tool) and forecast.name == "forecast" and not forecast.on_loop
    assert forecast.description == "The weather forecast of a city."
    schema = forecast.json_schema()
    assert schema["required"] == ["city"] and set(schema["properties"]) == {"city", "days"}
    assert schema["properties"]["city"]["description"] == "The city" and schema["properties"]["days"]["default"] == 3
    done = asyncio.run(execute({"forecast": forecast}, "forecast", '{"city": "Rome"}', CONTEXT))
    assert done.output == {"city": "Rome", "days": 3, "asked_by": "support"}
    refused = asyncio.run(execute({"forecast": forecast}, "forecast", '{"days": 2}', CONTEXT))
    assert refused.error == "Invalid arguments for forecast: city: Field required"


class Query(BaseModel):
    text: str
    limit: int = 2


def test_a_coroutine_tool_runs_on_the_loop_and_a_model_parameter_is_taken_whole() -> None:
    @tool(name="search-docs", description="Search the docs.", timeout_s=2)
    async def search(query: Query, context: ToolContext) -> list[str]:
        return [f"{query.text} #{n} for {context.thread_id}" for n in range(query.limit)]

    assert search.name == "search-docs" and search.on_loop and search.input_model is Query
    assert search.timeout_s == 2
    done = asyncio.run(execute({"search-docs": search}, "search-docs", '{"text": "install"}', CONTEXT))
    assert done.output == ["install #0 for t1", "install #1 for t1"]


def _undocumented(city: str) -> str:
    return city


def _spread(*cities: str) -> str:
    return ""


@pytest.mark.parametrize(("make", "message"), [
    (lambda: tool(_undocumented), "needs a description"),
    (lambda: tool(name="has space", description="d")(_undocumented), "must be 1-64 letters"),
    (lambda: tool(description="d")(_spread), "must be a plain named parameter"),
    (lambda: tool(description="d", timeout_s=0)(_undocumented), "timeout_s must be a positive number"),
    (lambda: tool("not a function"), "decorates a function"),
])
def test_tool_mistakes_are_raised_where_the_tool_is_written(make, message: str) -> None:
    with pytest.raises((TypeError, ValueError), match=message):
        make()


def test_an_agent_needs_only_an_id_and_instructions() -> None:
    agent = Agent(id="helper", instructions="Help.", tools=[tool(description="Echo.")(_undocumented)])
    assert (agent.name, agent.model, agent.memory, agent.max_steps) == ("helper", None, None, 5)
    assert isinstance(agent.tools, tuple) and agent.memory_options() is None
    remembering = Agent(id="r", instructions="", memory=Memory(last_messages=3))
    assert remembering.memory_options() == Memory(last_messages=3)


@pytest.mark.parametrize(("fields", "message"), [
    ({"id": "has space"}, "must be 1-128 letters"),
    ({"id": "a/b"}, "must be 1-128 letters"),
    ({"model": "gpt-4o"}, "agent 'a': model id must look like 'provider/model'"),
    ({"tools": [_undocumented]}, r"tools\[0\] is a function, not a Tool: decorate it with @dev_server.tool"),
    ({"tools": [tool(description="x")(_undocumented)] * 2}, "two tools are named '_undocumented'"),
    ({"tools": "calculator"}, "tools must be a list"),
    ({"max_steps": 0}, "max_steps must be a positive integer"),
    ({"memory": {"last_messages": 3}}, r"memory must be a dev_server.Memory\(...\)"),
    ({"instructions": None}, "instructions must be a string"),
])
def test_agent_mistakes_are_raised_where_the_agent_is_written(fields: dict[str, Any], message: str) -> None:
    with pytest.raises((TypeError, ValueError), match=message):
        Agent(**{"id": "a", "instructions": "", **fields})


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Path, str]]:
    """A directory with a package of a unique name (the test's own modules), as the current
    directory; the modules imported from it are forgotten afterwards."""
    package = f"userpkg_{uuid.uuid4().hex[:8]}"
    (tmp_path / package).mkdir()
    (tmp_path / package / "__init__.py").write_text("")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))
    yield tmp_path, package
    for name in [name for name in sys.modules if name.startswith((package, "dev_server_agents_"))]:
        del sys.modules[name]


def test_agents_load_from_an_import_string_or_a_file(project: tuple[Path, str]) -> None:
    root, package = project
    (root / package / "agents.py").write_text(TWO_AGENTS)
    (root / package / "listed.py").write_text(TWO_AGENTS + "\nagents = [sales]\n")
    assert [a.id for a in load_agents(f"{package}.agents")] == ["support", "sales"]  # every Agent at the top
    assert [a.id for a in load_agents(f"{package}.listed")] == ["sales"]  # its `agents`
    assert [a.id for a in load_agents(f"{package}.agents:support")] == ["support"]
    (root / "my_agents.py").write_text(TWO_AGENTS)
    first = load_agents("my_agents.py")
    assert [a.id for a in first] == ["support", "sales"] and first[0].tools[0].name == "order_status"
    assert load_agents(str(root / "my_agents.py"))[0] is first[0]  # one file is imported once


@pytest.mark.parametrize(("source", "content", "message"), [
    ("nowhere.agents", None, "agents 'nowhere.agents': no module named 'nowhere'"),
    ("missing.py", None, "agents 'missing.py': no such file"),
    ("not an import!", None, "not an import string"),
    ("{pkg}.mod:other", "from dev_server import Agent\na = Agent(id='a', instructions='')",
     "has no attribute 'other'"),
    ("mod.py", "from dev_server import Agent, Memory\n\nmemory = Memory(observational_memory={'scope': 'world'})\n",
     "agents 'mod.py': ValueError: observationalMemory.scope must be 'thread' or 'resource', not 'world'"
     " (at mod.py:3)"),
    ("{pkg}.mod", "from dev_server import Agent\n\na = Agent(id='a', instructions='', model='gpt4')\n",
     "ValueError: agent 'a': model id must look like 'provider/model', got 'gpt4' (at mod.py:3)"),
    ("mod.py", "agents = ['support']", "agents[0] is a str, not a dev_server.Agent"),
    ("mod.py", "agents = []", "agents is empty"),
    ("mod.py", "from dev_server import Agent\nagents = [Agent(id='a', instructions=''), "
     "Agent(id='a', instructions='')]", "agent id 'a' is defined twice"),
    ("mod.py", "x = 1", "defines no agent"),
    ("mod.py", "agents = [", "SyntaxError: '[' was never closed (at mod.py:1)"),
    ("{pkg}.mod", "import not_installed_anywhere", "ModuleNotFoundError: No module named 'not_installed_anywhere'"),
])
def test_a_bad_agents_source_is_one_line_naming_it(project: tuple[Path, str], source: str, content: str | None,
                                                   message: str) -> None:
    root, package = project
    source = source.format(pkg=package)
    if content is not None:
        (root / package / "mod.py").write_text(content)
        (root / "mod.py").write_text(content)
    with pytest.raises(AgentsError) as raised:
        load_agents(source)
    assert message in str(raised.value) and "\n" not in str(raised.value)


CPU_BOUND = '''
from dev_server import Agent, tool


@tool(cpu_bound=True, timeout_s=20)
def digits(power: int) -> int:
    """How many digits 7 ** power has."""
    return len(str(7 ** power))


agents = [Agent(id="cruncher", instructions="", tools=[digits])]
'''


def test_a_cpu_bound_tool_of_a_file_or_a_module_runs_in_its_child_process(project: tuple[Path, str]) -> None:
    root, package = project
    (root / package / "crunch.py").write_text(CPU_BOUND)
    (root / "crunch.py").write_text(CPU_BOUND)
    for source in (f"{package}.crunch", "crunch.py"):
        [digits] = load_agents(source)[0].tools
        assert digits.cpu_bound
        done = asyncio.run(execute({"digits": digits}, "digits", '{"power": 1000}', CONTEXT))
        assert (done.output, done.error) == (846, None), source


def test_the_app_runs_only_the_users_agents_and_chat_talks_to_the_first(tmp_path: Path) -> None:
    (tmp_path / "my_agents.py").write_text(TWO_AGENTS)
    settings = {"agents": str(tmp_path / "my_agents.py"), "telemetry": False}
    studio = create_app("studio", Settings(data_dir=tmp_path / "data", **settings))
    registry = studio.state.services.agents
    assert [a.id for a in registry] == ["support", "sales"] and registry.default_id == "support"
    assert registry.get("sales").definition.model == "anthropic/claude-haiku-4-5"  # its code's
    assert registry.get("support").definition.model == "openai/gpt-4o-mini"  # DEV_SERVER_MODEL's default
    assert create_app("studio", Settings(data_dir=tmp_path / "data")).state.services.agents.default_id == "chat-agent"
    with serve("gateway", tmp_path / "data", inprocess=True, settings=settings) as gateway:
        result = chat_turn(gateway, [user_message("u1", "use the order_status tool: A-17")])
        assert result["ok"] and result["chunks"][0]["messageMetadata"]["agentId"] == "support"
        assert [c["output"] for c in result["chunks"] if c["type"] == "tool-output-available"] == [
            {"order": "A-17", "status": "shipped"}]
        missing = chat_turn(gateway, [user_message("u2", "hi")], body={"agentId": "chat-agent"})
        assert missing["status"] == 404 and "chat-agent not found" in missing["error"]


def test_without_agents_the_built_in_ones_run(tmp_path: Path) -> None:
    app = create_app("gateway", Settings(data_dir=tmp_path))
    assert [a.id for a in app.state.services.agents] == [d.id for d in DEFINITIONS]


def test_the_command_line_refuses_bad_agents_with_one_line_and_exit_2(tmp_path: Path) -> None:
    (tmp_path / "twice.py").write_text(textwrap.dedent("""
        from dev_server import Agent
        agents = [Agent(id="a", instructions=""), Agent(id="a", instructions="")]
    """))
    env = process_env(tmp_path / "data")
    assert_one_error_line(run_cli(["gateway", "--agents", "twice.py"], env, cwd=tmp_path),
                          "agents 'twice.py': agent id 'a' is defined twice")
    assert_one_error_line(run_cli(["dev"], {**env, "DEV_SERVER_AGENTS": "nowhere.agents"}, cwd=tmp_path),
                          "agents 'nowhere.agents': no module named 'nowhere'")
    assert not (tmp_path / "data").exists()  # refused before anything started
