"""chat-agent's turns driven in-process for the Observational Memory benches (bench/om_long_thread.py).

``TurnBench`` opens a real SQLite file in a temporary directory, builds chat-agent's memory as
the gateway builds it from ``Settings`` (OM on or off, any ``messageTokens``), warms up as the
server process does (``dev_server.factory.warm_up`` with ``freeze_heap``), and runs turns as
``dev_server.agents.turns`` does without HTTP (``TurnRunner.prepare`` + ``run``). The built-in
local model answers as actor, observer and reflector (no network). ``TimedLLM`` separates the
time spent inside the model client from the rest of a turn; ``turn`` also measures the
process's CPU time for the turn.
"""

from __future__ import annotations

import asyncio
import logging
import tempfile
import time
import uuid
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from dev_server.agents.registry import DEFINITIONS, AgentRegistry, memory_options
from dev_server.agents.runner import TurnRunner
from dev_server.api.deps import Readiness
from dev_server.background import BackgroundWork
from dev_server.factory import memory_settings, storage_for, warm_up
from dev_server.kernel.clock import now_iso
from dev_server.kernel.convert import ui_to_stored
from dev_server.kernel.events import DataPart
from dev_server.kernel.messages import Message, Thread
from dev_server.llm import LiteLLMClient
from dev_server.settings import Settings
from dev_server.storage.conversations import ConversationStore

TOPICS = [
    "I'm planning a trip to Lisbon in April with my partner Ana; we love food markets and long walks.",
    "My sister Clara is getting married in June, and I still need to book a hotel near Porto.",
    "I started learning the cello last month and practise for thirty minutes before work.",
    "Work is busy: I'm leading the migration of our billing system to a new database this quarter.",
    "My dog Pixel needs a vet appointment for her vaccinations sometime next week.",
    "I want to run a half marathon in October, so I'm running three times a week right now.",
    "We're repainting the living room a pale green and replacing the old bookshelf.",
    "My budget for the Lisbon trip is about 2,000 euros, flights included.",
    "I'm allergic to shellfish, so restaurant suggestions need to take that into account.",
    "My manager asked me to present the migration plan to the leadership team on Friday.",
    "I've been reading a novel by Fernando Pessoa to get in the mood for Portugal.",
    "My parents are visiting in May and my dad has trouble with stairs.",
    "I'm thinking about switching to a four-day work week after the billing project ends.",
    "Ana prefers quiet hotels; last time a noisy street ruined our sleep for three nights.",
    "I need to renew my passport before the trip; it expires in August.",
    "My cello teacher suggested a small recital in September, which makes me nervous.",
    "I cook vegetarian on weekdays and try a new recipe every Sunday.",
    "Pixel gets anxious in cars, so long drives with her are hard.",
    "I want to save for a new bike; my current one is twelve years old.",
    "Could you help me put together a packing list for a week in Lisbon in spring?",
]
REPLY = ("That sounds like a lot to juggle; let's take it one piece at a time, starting with what is "
         "most urgent for you this week, and I'll keep the details in mind for later.")


class TimedLLM:
    """Delegates to the real client; times ``stream`` steps run on ``turn_task`` and keeps
    the messages of the turn's first actor call (the one offering tools: step 0)."""

    def __init__(self, real: LiteLLMClient) -> None:
        self._real = real
        self.turn_task: asyncio.Task | None = None
        self.model_s, self.om_calls, self.step0 = 0.0, 0, None
        self.model_cpu = 0.0
        self.actor_s = 0.0  # CPU seconds of the actor's calls since the start (a running sum)
        self.memory_model_s = 0.0  # ... and of the observer's and reflector's calls, wherever they run

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real, name)

    def start_turn(self) -> None:
        self.turn_task, self.model_s, self.model_cpu = asyncio.current_task(), 0.0, 0.0
        self.om_calls, self.step0 = 0, None

    async def stream(self, request: Any):
        on_turn = asyncio.current_task() is self.turn_task
        actor = bool(request.tools)  # the observer's and reflector's calls offer no tools
        if on_turn and not request.tools:
            self.om_calls += 1  # observer / reflector: the actor's calls offer chat-agent's tools
        elif on_turn and self.step0 is None:
            self.step0 = list(request.messages)
        inner = self._real.stream(request)
        if not actor:  # an observer or reflector, the turn's or a background one: read whole, timed as one call
            started = time.perf_counter(), time.thread_time()
            try:
                async for event in inner:
                    yield event
            finally:
                self._spent(started, on_turn, actor)
            return
        try:
            while True:
                started = time.perf_counter(), time.thread_time()
                try:
                    event = await anext(inner)
                except StopAsyncIteration:
                    return
                finally:
                    self._spent(started, on_turn, actor)
                yield event
        finally:
            started = time.perf_counter(), time.thread_time()
            await inner.aclose()
            self._spent(started, on_turn, actor)

    def _spent(self, started: tuple[float, float], on_turn: bool, actor: bool) -> None:
        """Wall time, and CPU time of this thread (the local model runs on the event loop's)."""
        wall, cpu = time.perf_counter() - started[0], time.thread_time() - started[1]
        self.model_s += wall if on_turn else 0.0
        self.model_cpu += cpu if on_turn else 0.0
        self.actor_s += cpu if actor else 0.0  # the actor's calls, wherever they run
        self.memory_model_s += 0.0 if actor else cpu


class Watch(logging.Handler):
    """Warnings and errors logged, and the garbage collector's pauses (seconds, running sum)."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.seen: Counter[str] = Counter()
        self.gc_s, self._gc_started = 0.0, 0.0

    def emit(self, record: logging.LogRecord) -> None:
        self.seen[f"{record.levelname} {record.name}: {record.getMessage()[:160]}"] += 1

    def gc_event(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._gc_started = time.perf_counter()
        else:
            self.gc_s += time.perf_counter() - self._gc_started


class TurnBench:
    """One process's chat-agent over a fresh database: ``async with TurnBench(settings) as bench``."""

    def __init__(self, settings: Settings, watch: Watch | None = None) -> None:
        self.settings = settings
        self.watch = watch
        self._tmp = tempfile.TemporaryDirectory()

    async def __aenter__(self) -> TurnBench:
        settings = self.settings.model_copy(update={"data_dir": Path(self._tmp.name), "telemetry": False})
        self.storage = storage_for("gateway", settings)
        await self.storage.open()
        self.llm = TimedLLM(LiteLLMClient(force_local=True))
        await warm_up(self.llm, Readiness(), freeze_heap=True)  # as the server process starts
        self.background = BackgroundWork()
        await self.background.start()
        memories = memory_options(DEFINITIONS, memory_settings(settings))
        self.store = ConversationStore(self.storage.default)
        registry = AgentRegistry(DEFINITIONS, self.store, memories, background=self.background)
        self.runner, self.agent = TurnRunner(self.llm, agents=registry), registry.get("chat-agent")
        assert self.agent is not None and self.agent.memory is not None
        self.resource = self.agent.definition.resource
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.background.drain(120.0)
        await self.storage.close()
        self._tmp.cleanup()

    async def settle(self, timeout_s: float = 600.0) -> None:
        """Wait until no background job is queued or running (the work keeps accepting)."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            stats = self.background.stats()
            if not stats["queued"] and not stats["running"]:
                return
            await asyncio.sleep(0.005)

    def new_thread(self) -> str:
        return f"om-bench-{uuid.uuid4().hex[:8]}"

    async def import_messages(self, thread_id: str, count: int) -> None:
        """``count`` messages, user and assistant in turn, one a minute up to an hour ago, saved
        as the Studio's ``save-messages`` saves them (``ConversationStore.save_messages``)."""
        start = datetime.now(UTC) - timedelta(minutes=count + 60)
        thread = Thread(thread_id, self.resource, "", None, agent_id="chat-agent")
        for first in range(0, count, 5_000):
            batch = []
            for index in range(first, min(count, first + 5_000)):
                text = f"(message {index}) {TOPICS[index % len(TOPICS)]}" if index % 2 == 0 else REPLY
                at = (start + timedelta(minutes=index)).isoformat(timespec="milliseconds").replace("+00:00", "Z")
                batch.append(Message(f"imp-{thread_id}-{index}", thread_id, self.resource,
                                     "user" if index % 2 == 0 else "assistant",
                                     {"format": 2, "parts": [{"type": "text", "text": text}], "content": text}, at))
            await self.store.save_messages([thread], batch)

    async def turn(self, thread_id: str, index: int) -> dict[str, Any]:
        """One turn: wall time, time inside the model client, the rest (``own``), CPU time
        (``cpu``; without the turn's model calls, ``cpu_own``; without the actor's calls,
        ``cpu_memory``: the local model's cost grows with the context it is given, which OM's
        window makes larger by design), OM parts."""
        text = f"(turn {index}) {TOPICS[(index - 1) % len(TOPICS)]}"
        incoming = [ui_to_stored({"id": f"u-{uuid.uuid4()}", "role": "user",
                                  "parts": [{"type": "text", "text": text}]}, thread_id, self.resource, now_iso())]
        row: dict[str, Any] = {"turn": index, "parts": Counter()}
        self.llm.start_turn()
        gc_before = self.watch.gc_s if self.watch else 0.0
        cpu, started, actor = time.process_time(), time.perf_counter(), self.llm.actor_s
        turn = await self.runner.prepare(self.agent, thread_id=thread_id, resource_id=self.resource,
                                         incoming=incoming, client_context=[])
        async for event in self.runner.run(turn):
            if isinstance(event, DataPart):
                row["parts"][event.name] += 1
                if event.name == "om-status" and "pending" not in row:
                    row["pending"] = event.data["windows"]["active"]["messages"]["tokens"]
                    row["generation"] = event.data["generationCount"]
        total = time.perf_counter() - started
        cpu = time.process_time() - cpu
        row.update(total=total, cpu=cpu, cpu_memory=cpu - (self.llm.actor_s - actor),
                   cpu_own=cpu - self.llm.model_cpu, model=self.llm.model_s, own=total - self.llm.model_s,
                   gc=(self.watch.gc_s if self.watch else 0.0) - gc_before, om_calls=self.llm.om_calls,
                   step0=self.llm.step0)
        return row

    async def cpu_per_turn(self, thread_id: str, turns: int, first_index: int = 1) -> tuple[float, float, float]:
        """Process CPU seconds per turn over ``turns`` turns, the background work they started
        included: all of it, without the time spent in the actor's model calls, and without
        any model call's (the observer's and reflector's too: the local model's work, which an
        instant mock model or a remote provider would not put on this process)."""
        await self.settle()
        started, actor, memory = time.process_time(), self.llm.actor_s, self.llm.memory_model_s
        for index in range(first_index, first_index + turns):
            await self.turn(thread_id, index)
        await self.settle()
        spent = time.process_time() - started
        actor, memory = self.llm.actor_s - actor, self.llm.memory_model_s - memory
        return spent / turns, (spent - actor) / turns, (spent - actor - memory) / turns
