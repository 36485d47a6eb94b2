"""Running a cycle's extractors and writing what they found (``dev_server.om.options.extractors`` has the model).

An extractor's ``instructions`` / ``schema`` functions are called once per turn (or manual
call) and thread with the run's ``ExtractorContext`` (``Extraction.resolved``; Mastra calls
them once per observer or reflector call). An observation (or a reflection) asks its model
for the inline extractors in the same call; ``Extraction.run`` then takes those values from
the parsed answer, makes one follow-up call per schema extractor (the answer must be a JSON
object fitting the schema, checked here), and hands every user value to its
``onExtracted`` (a returned value replaces it, after the same check). What fails (a function
that raises, a missing schema answer, an invalid one, an ``onExtracted`` that raises or
returns a value that does not fit, a working memory update that does not fit) is an
*extraction failure*: reported by slug on the cycle's end part, never a failed cycle.

``Extraction.commit`` writes after the cycle's record is stored: user values under their
``metadataKeyPath`` of the thread's OM metadata (one patch with the hints; none with
``metadataKeyPath: false``), the built-ins at
``currentTask`` / ``suggestedResponse`` / ``threadTitle``; a proposed title becomes the
thread's title (trimmed, three characters or more, different, not ``titlePinned``) with a
``data-om-thread-update`` part; the working-memory value goes through the memory's working
memory document (``dev_server.kernel.ports.WorkingMemoryDocument``, the only writer), merged
when the memory has a schema, and is not copied into the metadata.
"""

from __future__ import annotations

import inspect
import json
import logging
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from dev_server.kernel.clock import Clock, now_iso
from dev_server.kernel.events import DataPart
from dev_server.om.engine.parts import OBSERVATION, REFLECTION
from dev_server.om.options.extractors import (
    BUILT_IN_KEYS,
    CURRENT_TASK,
    SUGGESTED_RESPONSE,
    THREAD_TITLE,
    WORKING_MEMORY,
    ExtractedContext,
    Extractor,
    ExtractorContext,
    check_against,
    read_json_object,
    read_path,
    shown,
    structured_messages,
    thread_title_extractor,
    working_memory_extractor,
    write_path,
)

if TYPE_CHECKING:
    from dev_server.kernel.messages import Thread
    from dev_server.kernel.model import ResolvedModel
    from dev_server.kernel.ports import ThreadMessages, WorkingMemoryDocument
    from dev_server.om.engine.cycle_context import CycleContext, ModelCaller
    from dev_server.om.options.config import ObservationalMemoryOptions

log = logging.getLogger(__name__)
MIN_TITLE_CHARS = 3
MAX_TITLE_CHARS = 200


@dataclass
class ExtractionResult:
    values: dict[str, Any] = field(default_factory=dict)  # slug -> value, transformed
    failures: dict[str, str] = field(default_factory=dict)  # slug -> what went wrong
    patch: dict[str, Any] = field(default_factory=dict)  # the thread's OM metadata to write

    @property
    def title(self) -> str | None:
        value = self.values.get(THREAD_TITLE)
        return value if isinstance(value, str) else None


class Extraction:
    """The extractors of one OM configuration, and what they write through: the memory's
    working memory document (None: it has none) and its threads (None: a bare engine).
    ``agent_id`` and ``memory``: the agent and memory this OM belongs to, for the extractors'
    run context (None on the standalone class)."""

    def __init__(self, options: ObservationalMemoryOptions, clock: Clock, working: WorkingMemoryDocument | None = None,
                 threads: ThreadMessages | None = None, *, agent_id: str | None = None, memory: Any = None) -> None:
        self.options = options
        self.clock = clock
        self.working = working
        self.threads = threads
        self.agent_id = agent_id
        self.memory = memory

    # -- which extractors --------------------------------------------------------------

    def working_memory_on(self) -> bool:
        return self.options.observation.manage_working_memory and self.working is not None

    def extractors(self, operation: str) -> list[Extractor]:
        """The extractors beyond the hints of the prompt flags: the user's, the title, working memory."""
        if operation == REFLECTION:
            return list(self.options.reflection.extract)
        found = list(self.options.observation.extract)
        if self.options.observation.thread_title:
            found.append(thread_title_extractor())
        if self.working_memory_on():
            assert self.working is not None
            found.append(working_memory_extractor(self.working.schema))
        return found

    async def resolved(self, ctx: CycleContext, operation: str,
                       resource_id: str | None = None) -> tuple[list[Extractor], dict[str, str]]:
        """The extractors of ``operation`` with their functions called for this run, and the
        failures (by slug) of those whose functions raised; kept on ``ctx`` for the turn."""
        extractors = self.extractors(operation)
        if not any(e.dynamic for e in extractors):
            return extractors, {}
        if operation not in ctx.extractors:
            context = ExtractorContext("reflector" if operation == REFLECTION else "observer", ctx.thread_id,
                                       await self._resource_id(ctx, resource_id), self.agent_id, self.memory)
            found: list[Extractor] = []
            failures: dict[str, str] = {}
            for extractor in extractors:
                try:
                    found.append(await extractor.resolve(context))
                except Exception as exc:
                    failures[extractor.slug] = _message(exc)
                    log.info("extractor %r of thread %s failed: %s", extractor.name, ctx.thread_id, _message(exc))
            ctx.extractors[operation] = (found, failures)
        return ctx.extractors[operation]

    async def _resource_id(self, ctx: CycleContext, given: str | None) -> str | None:
        thread = await self._thread(ctx) if given is None else None
        return thread.resource_id if thread is not None else given

    async def prompt_extractors(self, ctx: CycleContext, operation: str,
                                resource_id: str | None = None) -> list[Extractor]:
        """The inline extractors a prompt describes itself (the title has its own section)."""
        extractors, _ = await self.resolved(ctx, operation, resource_id)
        return [e for e in extractors if e.inline and e.slug != THREAD_TITLE]

    def slugs(self, operation: str) -> list[str]:
        return [e.slug for e in self.extractors(operation)]

    def shared(self, operation: str) -> frozenset[str]:
        """The slugs a resource-scope observation answers once for all its threads rather
        than per thread: working memory, when the user's threads share one document."""
        if operation != OBSERVATION or self.options.scope != "resource" or not self.working_memory_on():
            return frozenset()
        assert self.working is not None  # working_memory_on
        return frozenset({WORKING_MEMORY}) if self.working.scope == "resource" else frozenset()

    async def priors(self, ctx: CycleContext, operation: str, *,
                     slugs: Collection[str] | None = None) -> list[tuple[str, str]]:
        """(slug, shown value) of the extractors whose previous value the next run sees
        (only those of ``slugs`` when given)."""
        hints = ctx.hints or {}
        found: list[tuple[str, str]] = []
        for extractor in await self.prompt_extractors(ctx, operation):
            if not extractor.include_previous or (slugs is not None and extractor.slug not in slugs):
                continue
            value = await self._previous(ctx, extractor, hints)
            if value not in (None, "", {}, []):
                found.append((extractor.slug, shown(value)))
        return found

    async def _previous(self, ctx: CycleContext, extractor: Extractor, hints: dict[str, Any]) -> Any:
        if extractor.slug == WORKING_MEMORY:
            thread = await self._thread(ctx)
            return await self.working.read(thread) if self.working is not None and thread else None
        return read_path(hints, extractor.metadata_key)

    # -- running -----------------------------------------------------------------------

    async def run(self, ctx: CycleContext, operation: str, inline: dict[str, Any], *, ask: ModelCaller,
                  model: ResolvedModel, source: str, resource_id: str | None = None,
                  buffered: bool = False, slugs: Collection[str] | None = None) -> ExtractionResult:
        """The values of this cycle: ``inline`` (the parsed answer's, by slug) for the
        inline extractors and the hints, a follow-up call per schema extractor, each user
        value through its ``onExtracted``; only the extractors of ``slugs`` when given."""
        extractors, unresolved = await self.resolved(ctx, operation, resource_id)
        chosen = [e for e in extractors if slugs is None or e.slug in slugs]
        result = ExtractionResult()
        result.failures.update({s: e for s, e in unresolved.items() if slugs is None or s in slugs})
        # a background (buffered) cycle is asked for no hints; the others' replace the thread's
        # when given (a synchronous reflection's too, as measured on Mastra 1.31)
        hint_slugs = () if buffered else (CURRENT_TASK, SUGGESTED_RESPONSE)
        for slug in hint_slugs:
            if isinstance(inline.get(slug), str) and inline[slug]:
                result.values[slug] = inline[slug]
        hints = ctx.hints or {}
        context = ExtractorContext("reflector" if operation == REFLECTION else "observer", ctx.thread_id,
                                   resource_id, self.agent_id, self.memory)
        for extractor in chosen:
            previous = read_path(hints, extractor.metadata_key) if extractor.include_previous and \
                extractor.metadata_key else None
            try:
                if extractor.inline:
                    value = inline.get(extractor.slug)
                else:
                    value = await self._structured(ctx, extractor, previous, ask=ask, model=model, source=source)
                if value not in (None, "", {}, []) and extractor.on_extracted is not None and not extractor.built_in:
                    value = await _on_extracted(extractor, value, ExtractedContext(
                        context.source, context.thread_id, context.resource_id, context.agent_id, context.memory,
                        extractor=extractor, current=value, previous=previous))
            except Exception as exc:
                result.failures[extractor.slug] = _message(exc)
                log.info("extractor %r of thread %s failed: %s", extractor.name, ctx.thread_id, _message(exc))
                continue
            if value not in (None, "", {}, []):
                result.values[extractor.slug] = value
        for slug, value in result.values.items():
            if slug in BUILT_IN_KEYS:
                result.patch[BUILT_IN_KEYS[slug]] = value
        for extractor in chosen:
            if not extractor.built_in and extractor.metadata_key and extractor.slug in result.values:
                merged = {**hints, **result.patch}
                result.patch.update(write_path(merged, extractor.metadata_key, result.values[extractor.slug]))
        return result

    async def _structured(self, ctx: CycleContext, extractor: Extractor, previous: Any, *, ask: ModelCaller,
                          model: ResolvedModel, source: str) -> dict[str, Any]:
        schema = extractor.schema
        assert isinstance(schema, dict)  # resolved and checked (Extractor.resolve, parse_extractors)
        if extractor.slug == WORKING_MEMORY:
            previous = None
        messages = structured_messages(extractor, schema, source, previous)
        completion = await ask(ctx, f"observational-memory-extractor-{extractor.slug}", model, messages,
                               {"temperature": 0})
        value = read_json_object(completion.text)
        if extractor.slug != WORKING_MEMORY:  # a working memory update is partial: Memory checks the merge
            check_against(schema, value)
        return value

    # -- writing -----------------------------------------------------------------------

    async def commit(self, ctx: CycleContext, result: ExtractionResult, cycle_id: str) -> None:
        """After the cycle's record is stored: the title and working memory (the metadata
        patch goes with the engine's own hint write)."""
        if WORKING_MEMORY in result.values:
            await self._update_working_memory(ctx, result)
        if result.title is not None:
            await self.update_title(ctx, result.title, cycle_id)

    async def _update_working_memory(self, ctx: CycleContext, result: ExtractionResult) -> None:
        thread = await self._thread(ctx)
        if self.working is None or thread is None:
            return
        try:
            await self.working.apply_update(result.values[WORKING_MEMORY], thread)
        except Exception as exc:  # WorkingMemoryInvalid: the stored document is unchanged
            result.failures[WORKING_MEMORY] = _message(exc)
            result.values.pop(WORKING_MEMORY, None)

    async def update_title(self, ctx: CycleContext, proposed: str, cycle_id: str) -> bool:
        """Give the thread the observer's title; True (and a ``data-om-thread-update``) when written."""
        title = " ".join(proposed.split())[:MAX_TITLE_CHARS]
        thread = await self._thread(ctx)
        if self.threads is None or thread is None or len(title) < MIN_TITLE_CHARS or title == thread.title:
            return False
        if (thread.metadata or {}).get("titlePinned") is True:
            return False
        updated = await self.threads.update_thread(thread.id, title=title)
        if updated is None:
            return False
        data: dict[str, Any] = {"cycleId": cycle_id, "threadId": thread.id, "oldTitle": (thread.title or "").strip(),
                                "newTitle": title, "timestamp": now_iso(self.clock)}  # '' for an untitled thread
        # kept as the cycle's markers are (Mastra persists it onto the reply as it streams it)
        ctx.emit(DataPart("om-thread-update", data, transient=True), durable=True)
        return True

    async def _thread(self, ctx: CycleContext) -> Thread | None:
        return await self.threads.get_thread(ctx.thread_id) if self.threads is not None else None


def end_fields(result: ExtractionResult | None) -> dict[str, Any]:
    """``extractedValues`` / ``extractionFailures`` of an end part, when there are any."""
    fields: dict[str, Any] = {}
    if result is not None and result.values:
        fields["extractedValues"] = dict(result.values)
    if result is not None and result.failures:
        fields["extractionFailures"] = dict(result.failures)
    return fields


async def _on_extracted(extractor: Extractor, value: Any, context: ExtractedContext) -> Any:
    """``onExtracted``'s verdict: what it returns replaces ``value`` once it fits (a schema
    extractor's schema; an inline one's must be JSON), None keeps ``value``."""
    assert extractor.on_extracted is not None
    returned = extractor.on_extracted(context)
    if inspect.isawaitable(returned):
        returned = await returned
    if returned is None:
        return value
    if isinstance(extractor.schema, dict):
        if not isinstance(returned, dict):
            raise ValueError(f"onExtracted returned {type(returned).__name__}, not an object fitting the schema")
        check_against(extractor.schema, returned)
        return returned
    try:
        json.dumps(returned)
    except (TypeError, ValueError):
        raise ValueError(f"onExtracted returned a value that is not JSON: {returned!r}"[:500]) from None
    return returned


def _message(exc: BaseException) -> str:
    return (str(exc) or type(exc).__name__)[:500]


def observed_source(observations: str, messages: Sequence[Any]) -> str:
    """What a schema extractor of an observation reads: the new observations and the messages."""
    from dev_server.om.prompting.transcript import format_transcript  # the transcript module imports storage types

    transcript, _ = format_transcript(list(messages))
    return f"New observations:\n{observations.strip()}\n\nMessages observed:\n{transcript.strip()}"
