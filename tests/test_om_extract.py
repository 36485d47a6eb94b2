"""OM extractors, observer titles and OM-managed working memory (issue 14, items 1-3, 7, 8):
option checks, parsing, and a live gateway (real uvicorn, real SQLite in a temp dir, the
local model observing). The extractors and the agent that runs them are in
``tests.kit.om_agents``; the streamed title (``data-om-thread-update``, judged by the real
``ai`` package) is tested in ``tests/test_om_gateway.py``."""

from __future__ import annotations

import dataclasses
import json
import re
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from dev_server.agents import chat_agent
from dev_server.memory.memory import MemoryOptions
from dev_server.memory.working_document import WorkingMemoryOptions
from dev_server.om.options.config import observational_memory_options
from dev_server.om.options.extractors import take_inline_values
from dev_server.om.prompting.parsing import parse_observer_output
from dev_server.om.prompting.prompts import observer_system_prompt, reflector_system_prompt
from dev_server.settings import Settings
from tests.kit.chat import turn
from tests.kit.om import FACT, parts, settled, stored_messages, thread_om
from tests.kit.om_agents import EXTRACTORS, Summary, broken, extracting_agent
from tests.kit.servers import InProcessServer, serve, server_fixture

# -- option checks ----------------------------------------------------------------------


@pytest.mark.parametrize(("extract", "field"), [
    ([{"name": "Topics", "instructions": "a"}, {"name": "topics!", "instructions": "b"}],
     "observation.extract[1].name"),
    ([{"name": "Current Task", "instructions": "a"}], "observation.extract[0].name"),
    ([{"name": "observations", "instructions": "a"}], "observation.extract[0].name"),
    ([{"name": "x", "instructions": "a", "schema": {"type": "string"}}], "observation.extract[0].schema"),
    ([{"name": "x", "instructions": "a", "schema": {"type": "object", "properties": 3}}],
     "observation.extract[0].schema"),
    ([{"name": "x", "instructions": ""}], "observation.extract[0].instructions"),
    ([{"name": "x", "instructions": "a", "onExtracted": "no"}], "observation.extract[0].onExtracted"),
    ([{"name": "x", "instructions": "a", "metadataKeyPath": "currentTask"}], "observation.extract[0].metadataKeyPath"),
    ([{"name": "x", "instructions": "a", "transform": str.upper}], "observation.extract[0].transform"),
    ([{"name": "x", "instructions": "a", "metadataKey": "extracted.x"}], "observation.extract[0].metadataKey"),
    ([{"name": "1st", "instructions": "a"}], "observation.extract[0].name"),
    ([{"name": "x", "instructions": "a", "colour": 1}], "observation.extract[0].colour"),
    ({"name": "x"}, "observation.extract"),
])
def test_bad_extractors_fail_at_construction_naming_the_field(extract: Any, field: str) -> None:
    with pytest.raises(ValueError, match=re.escape(f"observationalMemory.{field} ")):
        observational_memory_options({"observation": {"extract": extract}})


def test_options_resolve_in_either_scope() -> None:
    om = observational_memory_options({"observation": {"extract": EXTRACTORS, "threadTitle": True},
                                       "reflection": {"extract": [{"name": "Summary", "instructions": "s"}]}})
    assert [e.slug for e in om.observation.extract] == ["topics", "profile", "broken", "fresh"]
    assert om.observation.extract[1].schema["properties"]["statements"]["type"] == "integer"
    assert om.observation.extract[0].metadata_key_path == "extracted.topics" and om.observation.thread_title
    assert om.reflection.extract[0].slug == "summary"
    resource = observational_memory_options({"scope": "resource", "observation": {
        "threadTitle": True, "manageWorkingMemory": True, "extract": EXTRACTORS}})
    assert resource.observation.thread_title and len(resource.observation.extract) == 4
    with pytest.raises(ValueError, match="observationalMemory.observation.threadTitle must be true or false"):
        observational_memory_options({"observation": {"threadTitle": "yes"}})


def test_the_thread_title_setting_turns_it_on() -> None:
    settings = Settings(om_thread_title=True, telemetry=False)
    assert observational_memory_options(settings.observational_memory).observation.thread_title
    assert not observational_memory_options(Settings(telemetry=False).observational_memory).observation.thread_title


def test_manage_working_memory_takes_the_tool_from_the_agent() -> None:
    managed = MemoryOptions(working_memory=WorkingMemoryOptions(),
                            observational_memory={"observation": {"manageWorkingMemory": True}})
    assert managed.working_memory_roles() == (False, True)
    assert managed.describe()["workingMemory"]["agentManaged"] is False
    explicit = dataclasses.replace(managed, working_memory=WorkingMemoryOptions(agent_managed=True))
    assert explicit.working_memory_roles() == (True, True)
    assert MemoryOptions(working_memory=WorkingMemoryOptions()).working_memory_roles() == (True, False)


# -- prompts and parsing ------------------------------------------------------------------


def test_inline_values_the_json_object_first_then_the_last_section() -> None:
    raw = ("<observations>\n* 🔴 (10:00) x\n</observations>\n<topics>first</topics>\n<topics>second</topics>\n"
           '<extracted-values>{"mood": {"level": 3}}</extracted-values>\n<mood>ignored</mood>')
    values, rest = take_inline_values(raw, ["topics", "mood"])
    assert values == {"topics": "second", "mood": {"level": 3}} and "<topics>" not in rest
    output = parse_observer_output(raw, ["topics", "mood"])
    assert output.observations == "* 🔴 (10:00) x" and output.extracted["topics"] == "second"


def test_instructions_are_appended_and_extractor_sections_described() -> None:
    om = observational_memory_options({"observation": {"extract": EXTRACTORS}})
    prompt = observer_system_prompt(instruction="Track pets.", extractors=om.observation.extract[:1])
    assert "<topics>\nWhat the user talks about.\n</topics>" in prompt
    assert prompt.endswith("=== CUSTOM INSTRUCTIONS ===\n\nTrack pets.")
    assert "<topics>" in reflector_system_prompt(extractors=om.observation.extract[:1])


# -- through a live gateway ---------------------------------------------------------------


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("om-extract")


server = server_fixture("gateway", data="data", inprocess=True, settings={"telemetry": False},
                        agents=(extracting_agent(),))


def observe_twice(server: InProcessServer, thread: str) -> list[dict[str, Any]]:
    ends = []
    for i in range(1, 12):
        result = turn(server, thread, f"{thread}-{i}", f"Turn {i}. {FACT}")
        ends += [p for p in parts(result, "observation-end") if p["operationType"] == "observation"]
        if len(ends) >= 2:
            return ends
    raise AssertionError("fewer than two observations")


def test_extractors_run_with_each_observation(server: InProcessServer, data: Path) -> None:
    first, second = observe_twice(server, "ex")
    values = first["extractedValues"]
    # inline, through onExtracted; the next run saw the previous value (run 2), "fresh" never does
    assert values["topics"].startswith("run 1: ") and values["topics"].endswith(" [checked]")
    assert second["extractedValues"]["topics"].startswith("run 2: ")
    assert first["extractedValues"]["fresh"].startswith("run 1: ")
    assert second["extractedValues"]["fresh"].startswith("run 1: ")
    # the schema extractor's follow-up answered JSON that fits the Pydantic model
    assert set(values["profile"]) == {"name", "statements"} and values["profile"]["statements"] >= 1
    assert "Turn" in values["profile"]["name"]
    # a raising onExtracted is a failure, not a failed cycle
    assert first["extractionFailures"] == {"broken": "onExtracted refused it"} and "broken" not in values
    assert values["current-task"] == first["currentTask"]
    _, om = thread_om(data, "ex")
    assert om["extracted"]["topics"] == second["extractedValues"]["topics"]
    assert om["extracted"]["profile"] == second["extractedValues"]["profile"]
    assert "broken" not in om["extracted"] and "working-memory" not in om["extracted"]
    assert om["currentTask"] and om["threadTitle"] == second["extractedValues"]["thread-title"]


def test_working_memory_is_kept_by_the_observer(server: InProcessServer, data: Path) -> None:
    observe_twice(server, "wm")
    _, om = thread_om(data, "wm")
    assert "working-memory" not in json.dumps(om)  # the payload is not duplicated under OM's metadata
    with sqlite3.connect(data / "dev-server.db") as conn:
        [document] = conn.execute("SELECT working_memory FROM threads WHERE id = 'wm'").fetchone()
    assert "- Turn 1. My name is Ada Lovelace" in document and "- Turn 2." in document


def summarised(context: Any) -> Any:
    return {**context.current, "checked": True}


def test_a_buffered_reflection_runs_the_reflection_extractors(tmp_path: Path) -> None:
    options = {"observation": {"messageTokens": 600, "bufferTokens": 200},
               "reflection": {"observationTokens": 500, "extract": [
                   {"name": "Summary", "instructions": "What the log is about.", "schema": Summary,
                    "onExtracted": summarised},
                   {"name": "Broken", "instructions": "Anything.", "schema": Summary, "onExtracted": broken}]}}
    agent = dataclasses.replace(chat_agent.definition, memory=lambda: MemoryOptions(
        last_messages=10, observational_memory=options))
    db = tmp_path / "dev-server.db"
    results = []
    with serve("gateway", tmp_path, inprocess=True, settings={"telemetry": False}, agents=(agent,)) as server:
        for i in range(1, 16):
            results.append(turn(server, "reflect-ex", f"rx{i}", f"Turn {i}. {FACT}"))
            settled(db, "reflect-ex")
            if any(p["operationType"] == "reflection" for r in results for p in parts(r, "activation")):
                break
    starts = [p for r in results for p in parts(r, "buffering-start") if p["operationType"] == "reflection"]
    assert starts, "no buffered reflection"
    stored = stored_messages(db, "reflect-ex")
    ends = [p["data"] for m in stored for p in m.content["parts"] if p["type"] == "data-om-buffering-end"]
    ends += [p for r in results for p in parts(r, "buffering-end")]
    ends = [e for e in ends if e["operationType"] == "reflection"]
    assert ends and {e["cycleId"] for e in ends} <= {s["cycleId"] for s in starts}
    end = ends[0]
    # the schema extractor's follow-up call answered, onExtracted ran; a raising one is a failure
    assert end["extractedValues"]["summary"]["checked"] is True and end["extractedValues"]["summary"]["summary"]
    assert end["extractionFailures"] == {"broken": "onExtracted refused it"}
    assert "suggested-response" not in end["extractedValues"]  # a buffered reflector gives no hints
    # written as for a synchronous reflection: under the extractor's metadata key
    _, om = thread_om(tmp_path, "reflect-ex")
    assert om["extracted"]["summary"] == ends[-1]["extractedValues"]["summary"] and "broken" not in om["extracted"]
