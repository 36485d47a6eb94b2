"""Working memory (issue 10 item 5): the document, its processor, its routes, its scopes.

Merge semantics and the processor's per-step caching are tested on the real modules (the
processor on a real SQLite store). Turns go through live gateways (apps in this process,
over real HTTP) with the real ``ai`` package (``chat_client.mjs``) and the built-in local
model, whose working-memory phrases ("remember that ...", "what do you know about me?")
are documented in ``dev_server.llm.local_model``. The Studio's routes are driven by the real
``@mastra/client-js`` (``working_memory_client.mjs``).
"""

from __future__ import annotations

import asyncio
import json
import shutil
from pathlib import Path

import httpx
import pytest

from dev_server.agents.definition import AgentDefinition
from dev_server.factory import create_app, storage_for
from dev_server.kernel.processors import StepContext
from dev_server.kernel.tools import ToolContext, execute
from dev_server.memory.memory import Memory, MemoryOptions
from dev_server.memory.working_document import (
    DEFAULT_TEMPLATE,
    TOOL_NAME,
    WorkingMemoryInvalid,
    WorkingMemoryOptions,
    merge,
)
from dev_server.settings import Settings, SettingsError
from dev_server.storage.conversations import ConversationStore
from tests.kit.local_http import local_http
from tests.kit.servers import serving
from tests.support import JS_DIR, LiveApp, run_node, sqlite_rows, user_message

needs_node = pytest.mark.skipif(shutil.which("node") is None or not (JS_DIR / "node_modules" / "ai").exists(),
                                reason="needs node and tests/js/node_modules")
SCHEMA = {"type": "object", "additionalProperties": False,
          "properties": {"name": {"type": "string"}, "age": {"type": "integer"},
                         "prefs": {"type": "object", "additionalProperties": {"type": "boolean"}},
                         "tags": {"type": "array", "items": {"type": "string"}}}}


# -- the document -------------------------------------------------------------------------


def test_merge_merges_objects_deletes_nulls_and_replaces_arrays():
    base = {"name": "Ada", "prefs": {"tea": True, "milk": True}, "tags": ["a", "b"], "keep": 1}
    update = {"prefs": {"milk": None, "sugar": False}, "tags": ["c"], "name": None, "new": {"x": None, "y": 2}}
    assert merge(base, update) == {"prefs": {"tea": True, "sugar": False}, "tags": ["c"], "keep": 1,
                                   "new": {"y": 2}}
    assert base == {"name": "Ada", "prefs": {"tea": True, "milk": True}, "tags": ["a", "b"], "keep": 1}
    assert merge({"prefs": {"tea": True}}, {"prefs": "none"}) == {"prefs": "none"}  # a scalar replaces an object


def test_options_refuse_a_template_with_a_schema_and_an_invalid_schema():
    with pytest.raises(ValueError, match="not both"):
        WorkingMemoryOptions(template="# Me", schema=SCHEMA)
    with pytest.raises(ValueError, match="not a valid JSON schema"):
        WorkingMemoryOptions(schema={"type": "no-such-type"})
    with pytest.raises(ValueError, match="scope"):
        WorkingMemoryOptions(scope="everywhere")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        MemoryOptions(working_memory=True)  # type: ignore[arg-type]
    assert MemoryOptions().working is None and MemoryOptions(
        working_memory=WorkingMemoryOptions(enabled=False)).working is None


def test_a_schema_update_is_merged_then_validated():
    options = WorkingMemoryOptions(schema=SCHEMA)
    first = options.apply(None, {"name": "Ada", "prefs": {"tea": True}})
    second = options.apply(first, {"prefs": {"milk": False}, "name": None})
    assert json.loads(second) == {"prefs": {"tea": True, "milk": False}}
    with pytest.raises(WorkingMemoryInvalid, match="age"):
        options.apply(second, {"age": "old"})
    with pytest.raises(WorkingMemoryInvalid, match="schema"):
        options.apply(second, {"unknown": 1})
    with pytest.raises(WorkingMemoryInvalid):
        options.apply(second, "a string")
    assert WorkingMemoryOptions().apply("old", "# new") == "# new"  # Markdown is replaced whole


def test_describe_reports_scope_and_template_or_schema():
    assert MemoryOptions().describe()["workingMemory"] == {"enabled": False}
    assert MemoryOptions(working_memory=WorkingMemoryOptions()).describe()["workingMemory"] == {
        "enabled": True, "scope": "resource", "template": DEFAULT_TEMPLATE.strip()}
    assert MemoryOptions(working_memory=WorkingMemoryOptions(scope="thread", schema=SCHEMA)).describe()[
        "workingMemory"] == {"enabled": True, "scope": "thread", "schema": SCHEMA}


def test_the_setting_names_agents_and_scopes(monkeypatch):
    monkeypatch.setenv("DEV_SERVER_WORKING_MEMORY", " chat-agent, docs-agent:thread ")
    assert Settings.load().working_memory_agents == {"chat-agent": "resource", "docs-agent": "thread"}
    monkeypatch.setenv("DEV_SERVER_WORKING_MEMORY", "chat-agent:everywhere")
    with pytest.raises(SettingsError, match="DEV_SERVER_WORKING_MEMORY"):
        Settings.load()
    monkeypatch.delenv("DEV_SERVER_WORKING_MEMORY")
    assert Settings().working_memory_agents == {}


@pytest.mark.anyio
async def test_the_processor_reads_once_per_turn_and_the_tool_updates_its_copy(settings: Settings, monkeypatch):
    storage = storage_for("gateway", settings)
    await storage.open()
    try:
        store = ConversationStore(storage.default)
        memory = Memory(MemoryOptions(working_memory=WorkingMemoryOptions()), store, agent_id="chat-agent",
                        agent_resource="ai-chat")
        thread = await store.ensure_thread("t1", "r1", agent_id="chat-agent")
        await store.set_working_memory("# Me\n- likes tea", resource_id="r1")
        reads = []
        real_read = store.working_memory

        async def counted(**kwargs):
            reads.append(kwargs)
            return await real_read(**kwargs)

        monkeypatch.setattr(store, "working_memory", counted)
        [history, working] = memory.processors
        step = StepContext("chat-agent", "run-1", "Be brief.", thread=thread, resource_id="r1")
        working = working.start_turn(step)
        systems = []
        for index in range(3):
            step.begin_step(index)
            await working.before_step(step)
            systems.append(step.system[-1])
            if index == 0:
                outcome = await execute(step.tools, TOOL_NAME, json.dumps({"memory": "# Me\n- likes coffee"}),
                                        ToolContext("call_0", "chat-agent", "run-1", "t1", "r1"))
                assert outcome.output == {"success": True}, outcome
        assert len(reads) == 1 and reads[0] == {"resource_id": "r1"}
        assert "likes tea" in systems[0]["content"] and "likes coffee" in systems[1]["content"]
        assert systems[1] is systems[2]  # no update in between: the rendered message is reused
        assert step.tools[TOOL_NAME].json_schema()["properties"]["memory"]["type"] == "string"
        assert await real_read(resource_id="r1") == "# Me\n- likes coffee"
    finally:
        await storage.close()


@pytest.mark.anyio
async def test_two_turns_merging_one_resources_memory_at_once_both_land(settings: Settings):
    """Two threads of one user, served by two processes (two stores on one file), each merge
    a key into the shared JSON memory at the same moment: neither update is lost."""
    stores = [storage_for("gateway", settings), storage_for("studio", settings)]
    for storage in stores:
        await storage.open()
    try:
        memories = []
        for index, storage in enumerate(stores):
            memory = Memory(MemoryOptions(working_memory=WorkingMemoryOptions(schema=SCHEMA)),
                            ConversationStore(storage.default), agent_id="chat-agent", agent_resource="ai-chat")
            memories.append((memory, await memory.store.ensure_thread(f"t{index}", "r1", agent_id="chat-agent")))
        await memories[0][0].update_working_memory(json.dumps({"tags": ["start"]}), memories[0][1])
        updates = [{"name": "Ada"}, {"age": 36}, {"prefs": {"tea": True}}, {"prefs": {"jazz": True}}]
        await asyncio.gather(*(memories[i % 2][0].apply_working_memory_update(update, memories[i % 2][1])
                               for i, update in enumerate(updates)))
        stored = json.loads(await memories[1][0].get_working_memory(memories[1][1]))
        assert stored == {"tags": ["start"], "name": "Ada", "age": 36, "prefs": {"tea": True, "jazz": True}}
    finally:
        for storage in stores:
            await storage.close()


# -- turns through the gateway --------------------------------------------------------------


def say(url: str, conversation: str, message_id: str, text: str, token: str | None = None,
        agent: str | None = None) -> tuple[str, list[dict]]:
    """One turn judged by the real ``ai`` package: the reply text and its UI parts."""
    payload = {"api": f"{url}/api/chat", "messages": [user_message(message_id, text)],
               "body": {"conversationId": conversation, **({"agentId": agent} if agent else {})},
               "headers": {"authorization": f"Bearer {token}"} if token else {},
               "trigger": "submit-message", "chatId": conversation}
    result = run_node("chat_client.mjs", payload)
    assert result["ok"], result["error"]
    parts = result["message"]["parts"]
    return "".join(p.get("text", "") for p in parts if p["type"] == "text"), parts


def tool_parts(parts: list[dict]) -> list[dict]:
    return [p for p in parts if p["type"] == f"tool-{TOOL_NAME}"]


@needs_node
def test_resource_scope_shares_the_document_across_threads_and_a_restart(data_dir: Path):
    env = {"DEV_SERVER_WORKING_MEMORY": "chat-agent"}
    with serving("gateway", data_dir, env) as gateway:
        text, parts = say(gateway.url, "wm-a", "u1", "Remember that my name is Ada.")
        [tool] = tool_parts(parts)
        assert tool["state"] == "output-available" and tool["output"] == {"success": True}
        assert "Ada" in tool["input"]["memory"] and "# User Information" in tool["input"]["memory"]
        assert f"The {TOOL_NAME} tool returned" in text
        answer, parts = say(gateway.url, "wm-b", "u2", "What do you know about me?")
        assert "Ada" in answer and not tool_parts(parts), answer
        db = data_dir / "dev-server.db"
        [(stored,)] = sqlite_rows(db, "SELECT working_memory FROM resources WHERE id = 'ai-chat'")
        assert "my name is Ada" in stored
        assert sqlite_rows(db, "SELECT working_memory FROM threads WHERE id IN ('wm-a', 'wm-b')") == [(None,), (None,)]

    with serving("gateway", data_dir, env) as again:  # a new app on the same files
        answer, _ = say(again.url, "wm-c", "u3", "What do you know about me?")
        assert "Ada" in answer, answer
        plain, _ = say(again.url, "wm-d", "u4", "What do you know about me?", agent="docs-agent")
        assert "Ada" not in plain  # docs-agent keeps its minimal memory


@needs_node
def test_thread_scope_keeps_threads_apart(data_dir: Path):
    with serving("gateway", data_dir, {"DEV_SERVER_WORKING_MEMORY": "chat-agent:thread"}) as gateway:
        say(gateway.url, "th-a", "u1", "remember that my name is Ada")
        same, _ = say(gateway.url, "th-a", "u2", "what do you know about me?")
        other, _ = say(gateway.url, "th-b", "u3", "what do you know about me?")
        assert "Ada" in same and "Ada" not in other and "empty" in other, (same, other)


@needs_node
def test_two_users_never_see_each_others_memory(data_dir: Path):
    env = {"DEV_SERVER_WORKING_MEMORY": "chat-agent", "DEV_SERVER_AUTH_TOKENS": "ta=alice,tb=bob"}
    with serving("gateway", data_dir, env) as gateway:
        say(gateway.url, "alice-1", "a1", "remember that my name is Ada", token="ta")
        bobs, _ = say(gateway.url, "bob-1", "b1", "what do you know about me?", token="tb")
        assert "Ada" not in bobs and "empty" in bobs, bobs
        say(gateway.url, "bob-1", "b2", "remember that my name is Bob", token="tb")
        alices, _ = say(gateway.url, "alice-2", "a2", "what do you know about me?", token="ta")
        assert "Ada" in alices and "Bob" not in alices, alices
        rows = dict(sqlite_rows(data_dir / "dev-server.db", "SELECT id, working_memory FROM resources"))
        assert "Ada" in rows["user:alice"] and "Bob" in rows["user:bob"] and "ai-chat" not in rows


PROFILE = AgentDefinition(
    id="profile-agent", name="Profile Agent", instructions="Keep the user's profile.", model="openai/gpt-4o-mini",
    memory=lambda: MemoryOptions(working_memory=WorkingMemoryOptions(scope="thread", schema=SCHEMA)))


@needs_node
def test_an_update_that_does_not_fit_the_schema_is_returned_to_the_model(data_dir: Path):
    app = create_app("gateway", Settings(data_dir=data_dir), agents=[PROFILE])
    with LiveApp(app) as server:
        first = json.dumps({"memory": {"name": "Ada", "prefs": {"tea": True, "milk": True}, "tags": ["a"]}})
        _, parts = say(server.url, "p1", "u1", f"call {TOOL_NAME} with {first}", agent="profile-agent")
        assert tool_parts(parts)[0]["state"] == "output-available"
        second = json.dumps({"memory": {"prefs": {"milk": None}, "tags": ["b", "c"]}})
        say(server.url, "p1", "u2", f"call {TOOL_NAME} with {second}", agent="profile-agent")
        db = data_dir / "dev-server.db"
        def read():
            return json.loads(sqlite_rows(db, "SELECT working_memory FROM threads WHERE id = 'p1'")[0][0])
        merged = {"name": "Ada", "prefs": {"tea": True}, "tags": ["b", "c"]}
        assert read() == merged
        text, parts = say(server.url, "p1", "u3", f'call {TOOL_NAME} with {{"memory": {{"age": "old"}}}}',
                          agent="profile-agent")
        [tool] = tool_parts(parts)
        assert tool["state"] == "output-error" and "does not fit the working memory schema at age" in tool["errorText"]
        assert "does not fit" in text  # the model got the error back
        assert read() == merged
        answer, _ = say(server.url, "p1", "u4", "what do you know about me?", agent="profile-agent")
        assert "name: Ada" in answer and "tags: b, c" in answer, answer


# -- the Studio -----------------------------------------------------------------------------


def test_a_studio_write_to_a_schemad_memory_must_fit_the_schema(data_dir: Path):
    app = create_app("studio", Settings(data_dir=data_dir), agents=[PROFILE])
    with LiveApp(app) as server, httpx.Client(base_url=server.url) as client:
        client.post("/api/memory/threads?agentId=profile-agent", json={"threadId": "s1", "resourceId": "r1"})
        path = "/api/memory/threads/s1/working-memory?agentId=profile-agent"
        assert client.post(path, json={"workingMemory": json.dumps({"name": "Ada"})}).json() == {"success": True}
        refused = client.post(path, json={"workingMemory": json.dumps({"age": "old"})})
        assert refused.status_code == 400 and "age" in json.dumps(refused.json()), refused.text
        assert client.post(path, json={"workingMemory": "not json"}).status_code == 400
        answer = client.get(path + "&resourceId=r1").json()
        assert json.loads(answer["workingMemory"]) == {"name": "Ada"} and answer["source"] == "thread"
        assert answer["workingMemoryTemplate"] == {"format": "json", "content": json.dumps(SCHEMA)}
        config = client.get("/api/memory/config", params={"agentId": "profile-agent"}).json()["config"]
        assert config["workingMemory"] == {"enabled": True, "scope": "thread", "schema": SCHEMA}


def studio_ops(url: str, ops: list[dict], token: str | None = None) -> list[dict]:
    result = run_node("working_memory_client.mjs", {"baseUrl": url, "ops": ops, **({"token": token} if token else {})})
    assert result["ok"], result
    return result["results"]


def test_memory_config_reports_the_truth(data_dir: Path):
    app = create_app("studio", Settings(data_dir=data_dir, working_memory="chat-agent, docs-agent:thread"))
    with LiveApp(app) as server, httpx.Client(base_url=server.url) as client:
        def config(agent):
            return client.get("/api/memory/config", params={"agentId": agent}).json()["config"]
        assert config("chat-agent")["workingMemory"] == {"enabled": True, "scope": "resource",
                                                         "template": DEFAULT_TEMPLATE.strip()}
        assert config("docs-agent")["workingMemory"] == {"enabled": True, "scope": "thread",
                                                         "template": DEFAULT_TEMPLATE.strip()}
    plain = create_app("studio", Settings(data_dir=data_dir))
    with LiveApp(plain) as server:
        answer = local_http.get(f"{server.url}/api/memory/config", params={"agentId": "chat-agent"}).json()
        assert answer["config"]["workingMemory"] == {"enabled": False}


@needs_node
def test_studio_routes_read_and_write_both_scopes_and_the_model_sees_them(data_dir: Path):
    env = {"DEV_SERVER_WORKING_MEMORY": "chat-agent,docs-agent:thread"}
    with serving("studio", data_dir, env) as studio:
        chat, docs = "chat-agent", "docs-agent"
        results = studio_ops(studio.url, [
            {"op": "createThread", "agentId": chat, "threadId": "s-t1", "resourceId": "r1"},
            {"op": "update", "agentId": chat, "threadId": "s-t1", "workingMemory": "# Notes\n- likes tea",
             "resourceId": "r1"},
            {"op": "get", "agentId": chat, "threadId": "s-not-yet", "resourceId": "r1"},
            {"op": "createThread", "agentId": chat, "threadId": "s-t2", "resourceId": "r1"},
            {"op": "get", "agentId": chat, "threadId": "s-t2", "resourceId": "r1"},
            {"op": "createThread", "agentId": docs, "threadId": "s-d1", "resourceId": "r1"},
            {"op": "update", "agentId": docs, "threadId": "s-d1", "workingMemory": "# Thread one", "resourceId": "r1"},
            {"op": "get", "agentId": docs, "threadId": "s-d1", "resourceId": "r1"},
            {"op": "createThread", "agentId": docs, "threadId": "s-d2", "resourceId": "r1"},
            {"op": "get", "agentId": docs, "threadId": "s-d2", "resourceId": "r1"},
            {"op": "update", "agentId": docs, "threadId": "s-none", "workingMemory": "x", "resourceId": "r1"},
            # the gateway's conversations live in ai-chat: written here before any of its threads exist
            {"op": "update", "agentId": chat, "threadId": "g-new", "workingMemory": "- my name is Grace",
             "resourceId": "ai-chat"},
        ])
        assert results[1] == {"value": {"success": True}}
        template = {"format": "markdown", "content": DEFAULT_TEMPLATE.strip()}
        assert results[2]["value"] == {"workingMemory": "# Notes\n- likes tea", "source": "resource",
                                       "workingMemoryTemplate": template, "threadExists": False}
        assert results[4]["value"] == {**results[2]["value"], "threadExists": True}
        assert results[7]["value"] == {"workingMemory": "# Thread one", "source": "thread",
                                       "workingMemoryTemplate": template, "threadExists": True}
        assert results[9]["value"]["workingMemory"] is None and results[9]["value"]["source"] == "thread"
        assert results[10]["status"] == 404
        assert results[11] == {"value": {"success": True}}
        with serving("gateway", data_dir, env) as gateway:
            answer, _ = say(gateway.url, "g-new", "u1", "what do you know about me?")
            assert "my name is Grace" in answer, answer


@needs_node
def test_studio_routes_under_auth_stay_in_the_callers_resource(data_dir: Path):
    env = {"DEV_SERVER_WORKING_MEMORY": "chat-agent", "DEV_SERVER_AUTH_TOKENS": "ta=alice,tb=bob"}
    with serving("studio", data_dir, env) as studio:
        chat = "chat-agent"
        alice = studio_ops(studio.url, [
            {"op": "createThread", "agentId": chat, "threadId": "au-a1", "resourceId": "anything"},
            {"op": "update", "agentId": chat, "threadId": "au-a1", "workingMemory": "alice's notes"},
        ], token="ta")
        assert alice[1] == {"value": {"success": True}}
        bob = studio_ops(studio.url, [
            {"op": "update", "agentId": chat, "threadId": "au-a1", "workingMemory": "bob was here"},
            {"op": "get", "agentId": chat, "threadId": "au-a1", "resourceId": "user:alice"},
            {"op": "update", "agentId": chat, "threadId": "au-b-new", "workingMemory": "bob's notes",
             "resourceId": "user:alice"},
            {"op": "get", "agentId": chat, "threadId": "au-b-new", "resourceId": "user:alice"},
        ], token="tb")
        assert bob[0]["status"] == 404
        assert bob[1]["value"]["threadExists"] is False and bob[1]["value"]["workingMemory"] is None
        assert bob[2] == {"value": {"success": True}}  # forced into user:bob
        assert bob[3]["value"]["workingMemory"] == "bob's notes"
        [again] = studio_ops(studio.url, [{"op": "get", "agentId": chat, "threadId": "au-a1"}], token="ta")
        assert again["value"]["workingMemory"] == "alice's notes" and again["value"]["threadExists"] is True


@pytest.mark.e2e
def test_the_real_studio_chats_with_working_memory_on(start_server):
    from tests.kit.studio_ui import CHROMIUM, chat_through_gateway, ensure_studio_build, run_studio

    if not CHROMIUM.exists():
        pytest.skip("Debian chromium is not installed (apt-get install -y chromium)")
    env = {"DEV_SERVER_STUDIO_UI_DIR": str(ensure_studio_build()), "DEV_SERVER_LOCAL_MODEL_ONLY": "true",
           "DEV_SERVER_WORKING_MEMORY": "chat-agent"}
    gateway, studio = start_server("gateway", env=env), start_server("studio", env=env)
    chat_through_gateway(gateway.url, "ui-wm", "remember that my name is Ada")
    # every request the Studio makes (config, working memory, the turn) must succeed
    result = run_studio(studio, threadId="ui-wm", expectThreadText="remember that my name is Ada",
                        sendText="what do you know about me?")
    assert "Ada" in result["replyText"], result["replyText"]
    asked = [r for r in result["requests"] if "/working-memory" in r["url"]]
    assert asked and all(r["status"] == 200 for r in asked), result["requests"]
