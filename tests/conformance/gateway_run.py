"""A recorded conversation played on our gateway: ``create_app`` in this process (a real
uvicorn in a thread), the scripted model double answering as the recording's mocks
answered (the actor by turn and step, the observer and the reflector by the order of their
calls; an actor reply ends once background work is done, as the recorder's does), the
recorder's clock (a ``ManualClock`` that ticks 1 ms per read), seeded UUIDs (``tests.conformance.ids``).

The result has the trace's shape (``turns``: events, steps, calls, after), built by
``tests.conformance.adapt``; a conversation our engine refuses to start has ``error``.
A turn whose actor model differs from the last one restarts the gateway with the agent on
that model (same data, same clock), which is how a provider change happens here. Given
``reseed`` (turn index -> Mastra's record after it), the run writes that record over ours
once the turn is captured (``tests.conformance.reseed``: after a declared difference).
"""

from __future__ import annotations

import asyncio
import copy
import json
import os
import sqlite3
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import ExitStack, aclosing, contextmanager
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx

from dev_server.agents.definition import AgentDefinition
from dev_server.kernel.clock import ManualClock
from dev_server.kernel.model import Finish, ModelEvent, ModelRequest, ResolvedModel
from dev_server.kernel.tools import Tool, ToolContext
from dev_server.llm.scripted import Call, Reply, ScriptedModel, purpose_of
from dev_server.memory.options import MemoryOptions
from tests.conformance.adapt import events_of, message_of, prompt_of, record_of, thread_of
from tests.conformance.ids import Labels, steady_uuids
from tests.conformance.reseed import TimeMap, reseed
from tests.kit.chat import chat_turn
from tests.kit.local_http import local_http
from tests.kit.servers import DB_NAME, serve, settings_from_env

AGENT_ID = "chat-agent"


def _rows(db: Path, sql: str, args: tuple[Any, ...] = ()) -> list[dict[str, Any]]:
    with sqlite3.connect(db) as conn:
        conn.row_factory = sqlite3.Row
        return [dict(r) for r in conn.execute(sql, args).fetchall()]


def om_options(script: dict[str, Any]) -> dict[str, Any]:
    """The script's OM options (Mastra's names) with the observer's and reflector's models."""
    options = copy.deepcopy(script["options"])
    options["observation"] = {**options.get("observation", {}), "model": script["models"]["observer"]}
    options["reflection"] = {**options.get("reflection", {}), "model": script["models"]["reflector"]}
    return options


def _tool(spec: dict[str, Any]) -> Tool:
    result = spec["result"]

    async def answer(arguments: Any, context: ToolContext) -> Any:
        return copy.deepcopy(result)

    schema = {"type": "object", "properties": {p: {"type": "string"} for p in spec["parameters"]},
              "required": list(spec["parameters"])}
    return Tool(spec["name"], spec["description"], schema=schema, function=answer)


def _reply(step: dict[str, Any]) -> Reply:
    calls = [Call(c["name"], c["input"], id=c["id"]) for c in step.get("toolCalls", [])]
    return Reply(text=step.get("text", ""), tool_calls=calls)


def _idle(health: dict[str, Any]) -> bool:
    work = health["background"]
    return not work["queued"] and not work["running"]


def _wait_background(url: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not _idle(local_http.get(f"{url}/health", timeout=10).json()):
        if time.monotonic() > deadline:
            raise TimeoutError("the gateway's background work did not finish")
        time.sleep(0.02)


class SettlingModel(ScriptedModel):
    """The scripted model, whose actor replies end (their ``Finish``) only once the gateway's
    background work is done: the answer outlasts the background cycles it started, as the
    recorder's mock actor waits for Mastra's ``settled()`` (docs/om-conformance.md)."""

    url = ""  # the gateway's, once it serves

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        actor = purpose_of(request.messages) == "agent"
        async with aclosing(super().stream(request)) as events:
            async for event in events:
                if actor and isinstance(event, Finish):
                    await self._settle()
                yield event

    async def _settle(self, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        async with httpx.AsyncClient(base_url=self.url, timeout=10) as client:
            while not _idle((await client.get("/health")).json()):
                if time.monotonic() > deadline:
                    raise TimeoutError("the gateway's background work did not finish")
                await asyncio.sleep(0.01)


@contextmanager
def _utc() -> Iterator[None]:
    """The recording ran with TZ=UTC; the observer's transcript and the record's zone read it."""
    before = os.environ.get("TZ")
    os.environ["TZ"] = "UTC"
    time.tzset()
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("TZ", None)
        else:
            os.environ["TZ"] = before
        time.tzset()


class GatewayRun:
    """One conversation on a fresh data dir."""

    def __init__(self, script: dict[str, Any], data: Path, reseed: dict[int, dict[str, Any]] | None = None,
                 mastra_times: dict[str, str] | None = None) -> None:
        self.script = script
        self.reseed = reseed or {}
        self.mastra_times = mastra_times or {}
        self.data = data
        self.db = data / DB_NAME
        self.clock = ManualClock(script["turns"][0]["at"], tick=timedelta(milliseconds=1))
        self.turn: dict[str, Any] = {}
        self.step = 0
        self.steps: list[dict[str, Any]] = []
        self.calls: list[dict[str, Any]] = []
        self.served = {"observer": 0, "reflector": 0}
        self.llm = SettlingModel(self._actor, observer=self._om("observer"), reflector=self._om("reflector"),
                                 extractor=self._om("extractor"), local=False)
        self.options = om_options(script)
        self.tools = tuple(_tool(spec) for spec in script["tools"])
        self.scope = script["options"].get("scope", "thread")
        self.stored: dict[str, str] = {}  # message id -> its form after the last turn (turns keep what changed)

    def thread_of(self, turn: dict[str, Any]) -> str:
        return turn.get("thread") or self.script["name"]

    def _lookup_key(self, thread: str) -> str:
        return f"resource:{self.script['resource']}" if self.scope == "resource" else f"thread:{thread}"

    def _record_row(self, thread: str) -> dict[str, Any] | None:
        found = _rows(self.db, "SELECT * FROM mastra_observational_memory WHERE lookup_key = ?"
                               " ORDER BY generation_count DESC LIMIT 1", (self._lookup_key(thread),))
        return found[0] if found else None

    def _actor(self, request: ModelRequest) -> Reply:
        step = self.step
        self.step += 1
        model = request.model.mastra_id if isinstance(request.model, ResolvedModel) else str(request.model)
        self.steps.append({"step": step, "model": model,
                           "tools": sorted(t["function"]["name"] for t in request.tools),
                           "prompt": prompt_of(request.messages),
                           "record": record_of(self._record_row(self.thread_of(self.turn)))})
        steps = self.turn["steps"]
        return _reply(steps[step]) if step < len(steps) else Reply(text=self.script["fallback"]["actor"])

    def _om(self, purpose: str):
        def answer(request: ModelRequest) -> str | None:
            system = [m for m in request.messages if m["role"] == "system"]
            self.calls.append({"purpose": purpose, "systemChars": sum(len(str(m.get("content", ""))) for m in system),
                               "input": prompt_of([m for m in request.messages if m["role"] != "system"])})
            if purpose not in self.served:
                return None  # an extractor's follow-up call: the recording has none to give
            n = self.served[purpose]
            self.served[purpose] += 1
            replies = self.script[purpose]
            return replies[n] if n < len(replies) else self.script["fallback"][purpose]
        return answer

    def agent(self, model: str) -> AgentDefinition:
        options = self.options
        return AgentDefinition(id=AGENT_ID, name="Chat Agent", instructions=self.script["instructions"], model=model,
                               memory=lambda: MemoryOptions(observational_memory=options),
                               resource=self.script["resource"], tools=self.tools)

    def run(self) -> dict[str, Any]:
        try:
            MemoryOptions(observational_memory=self.options)
        except Exception as exc:  # noqa: BLE001 -- any refusal of the options is the finding
            return {"error": f"our engine refused the options: {type(exc).__name__}: {exc}", "turns": []}
        with _utc(), steady_uuids(self.script["name"]), ExitStack() as stack:
            labels = Labels(t["id"] for t in self.script["turns"])
            threads: list[str] = []
            turns: list[dict[str, Any]] = []
            server, model = None, None
            settings = settings_from_env(self.data, {"DEV_SERVER_TELEMETRY": "false", "DEV_SERVER_OM_AGENTS": ""})
            for index, turn in enumerate(self.script["turns"]):
                wanted = turn.get("model") or self.script["models"]["actor"]
                if wanted != model:
                    stack.close()
                    server = stack.enter_context(serve("gateway", self.data, inprocess=True, settings=settings,
                                                       llm=self.llm, agents=(self.agent(wanted),), clock=self.clock))
                    self.llm.url, model = server.url, wanted
                assert server is not None
                thread = self.thread_of(turn)
                if thread not in threads:
                    threads.append(thread)
                turns.append(self._turn(server.url, index, turn, thread, model, threads, labels))
        return {"turns": turns}

    def _turn(self, url: str, index: int, turn: dict[str, Any], thread: str, model: str, threads: list[str],
              labels: Labels) -> dict[str, Any]:
        self.clock.set(turn["at"])
        self.turn, self.step, self.steps, self.calls = turn, 0, [], []
        parts: list[dict[str, Any]] = [{"type": "text", "text": turn["text"]}]
        parts += [{"type": "file", "mediaType": f["mediaType"], "filename": f["filename"],
                   "url": f"data:{f['mediaType']};base64,{f['data']}"} for f in turn.get("files", [])]
        result = chat_turn(url, [{"id": turn["id"], "role": "user", "parts": parts}],
                           body={"conversationId": thread, "agentId": AGENT_ID}, chat_id=thread)
        _wait_background(url)
        marks = ",".join("?" * len(threads))
        stored = _rows(self.db, f"SELECT * FROM messages WHERE thread_id IN ({marks}) ORDER BY created_at, seq",
                       tuple(threads))
        labels.add_stored(index, stored)
        thread_rows = _rows(self.db, "SELECT * FROM threads WHERE id = ?", (thread,))
        out: dict[str, Any] = {
            "index": index, "thread": thread, "at": turn["at"], "model": model,
            "events": events_of(result["chunks"]), "steps": self.steps, "calls": self.calls,
            "after": {"record": record_of(self._record_row(thread)),
                      "thread": thread_of(thread_rows[0] if thread_rows else None),
                      "messages": self._changed([message_of(r) for r in stored if r["thread_id"] == thread])}}
        if not result["ok"] or result["errorChunks"]:
            out["error"] = result["error"] or "; ".join(map(str, result["errorChunks"]))
        captured = labels.relabel(json.loads(json.dumps(out, default=str)))
        if index in self.reseed:
            ours = {labels.by_id[r["id"]]: r["created_at"] for r in stored if r["id"] in labels.by_id}
            reseed(self.db, self._lookup_key(thread), self.reseed[index],
                   {label: message_id for message_id, label in labels.by_id.items()},
                   TimeMap(self.mastra_times, ours))
        return captured

    def _changed(self, messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """The messages that are new or changed since the last turn (as the recorder keeps them)."""
        changed = []
        for message in messages:
            text = json.dumps(message, sort_keys=True)
            if self.stored.get(message["id"]) != text:
                changed.append(message)
            self.stored[message["id"]] = text
        return changed


def play(script: dict[str, Any], data: Path, reseed: dict[int, dict[str, Any]] | None = None,
         mastra_times: dict[str, str] | None = None) -> dict[str, Any]:
    """The script on our gateway, on the fresh data dir ``data`` (``reseed``: see the module's doc)."""
    data.mkdir(parents=True, exist_ok=True)
    return GatewayRun(script, data, reseed, mastra_times).run()

