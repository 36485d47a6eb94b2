"""The ``data-om-*`` stream parts (docs/observational-memory.md#stream-parts), built in one place.

Every part is streamed ``transient`` (the UI shows it; the stream's own persistence skips
it). The observation and reflection markers (``-start``, ``-end``, ``-failed``) are also kept
*durably*: a copy goes into the parts of the reply being written (the last assistant
message), which is what marks the messages before it as observed (1.4, mechanism 3).
``data-om-status`` is never kept. Field names and meanings follow the table of section 6;
times are ISO strings, durations milliseconds.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

from dev_server.kernel import ids
from dev_server.kernel.clock import SYSTEM_CLOCK, Clock, epoch_ms, now_iso
from dev_server.kernel.events import DataPart
from dev_server.om.options.config import ObservationalMemoryOptions
from dev_server.storage.om_records import OMRecord

OBSERVATION = "observation"
REFLECTION = "reflection"
# The stored copy of a part keeps at most this much of its ``observations`` text: the copy is
# decoded by every later turn that reads its reply, and a backlog's observation can be
# megabytes. The streamed part and the record keep the whole text
# (docs/observational-memory.md#deliberate-differences D48).
STORED_OBSERVATIONS_CHARS = 4_000


def with_observations(name: str, data: dict[str, Any]) -> DataPart:
    """A transient part; when its ``observations`` text is longer than
    ``STORED_OBSERVATIONS_CHARS``, its durable copy keeps only that many characters and says
    how many it left out (``observationsOmittedChars``)."""
    observations = data.get("observations")
    if not isinstance(observations, str) or len(observations) <= STORED_OBSERVATIONS_CHARS:
        return DataPart(name, data, transient=True)
    kept = {**data, "observations": observations[:STORED_OBSERVATIONS_CHARS],
            "observationsOmittedChars": len(observations) - STORED_OBSERVATIONS_CHARS}
    return DataPart(name, data, transient=True, kept_data=kept)


def marker_config(options: ObservationalMemoryOptions) -> dict[str, Any]:
    """``ObservationMarkerConfig``: the configured thresholds (with a shared budget the
    messages' largest, the whole budget, as Mastra's ``getMaxThreshold`` reports it), the
    scope, and the configured ``activateAfterIdle`` (milliseconds or ``"auto"``) when there
    is one, as Mastra writes it on every marker (a TTL activation puts the milliseconds it
    used instead)."""
    config: dict[str, Any] = {"messageTokens": options.message_threshold(0),
                              "observationTokens": options.reflection.observation_tokens, "scope": options.scope}
    if options.observation_triggers.after_idle is not None:
        config["activateAfterIdle"] = options.observation_triggers.after_idle
    return config


def status_part(options: ObservationalMemoryOptions, record: OMRecord, *, pending_tokens: int,
                step: int, projected_removal: int = 0, thread_id: str | None = None) -> DataPart:
    """``thread_id``: the turn's thread, which Mastra names also in resource scope (where the
    record belongs to no thread)."""
    buffered_chunks = record.buffered_observation_chunks or []
    chunk_message_tokens = sum(int(c.get("messageTokens") or 0) for c in buffered_chunks)
    chunk_observation_tokens = sum(int(c.get("tokenCount") or 0) for c in buffered_chunks)
    observations_status = ("running" if record.is_buffering_observation else "complete" if buffered_chunks
                           else "idle")
    reflection_status = ("running" if record.is_buffering_reflection else "complete" if record.buffered_reflection
                         else "idle")
    data = {
        "windows": {
            "active": {
                "messages": {"tokens": pending_tokens,
                             "threshold": options.message_threshold(record.observation_token_count)},
                "observations": {"tokens": record.observation_token_count,
                                 "threshold": options.reflection_threshold_for_status(record.observation_token_count)},
            },
            "buffered": {
                "observations": {"chunks": len(buffered_chunks),
                                 "messageTokens": min(chunk_message_tokens, pending_tokens),
                                 "projectedMessageRemoval": projected_removal,
                                 "observationTokens": chunk_observation_tokens,
                                 "status": observations_status},
                "reflection": {"inputObservationTokens": record.buffered_reflection_input_tokens or 0,
                               "observationTokens": record.buffered_reflection_tokens or 0,
                               "status": reflection_status},
            },
        },
        "recordId": record.id, "threadId": thread_id or record.thread_id, "stepNumber": step,
        "generationCount": record.generation_count,
    }
    return DataPart("om-status", data, transient=True)


@dataclass
class Cycle:
    """One observation or reflection attempt, from its start part to its end or failure."""

    operation: str
    record: OMRecord
    thread_id: str
    config: dict[str, Any]
    tokens: int  # tokens to observe (messages) or to reflect (observations)
    id: str = field(default_factory=lambda: str(ids.uuid4()))
    clock: Clock = field(default=SYSTEM_CLOCK, repr=False)
    thread_ids: list[str] | None = None  # every thread the cycle observes (resource scope); None: this one
    started: float = field(init=False)

    def __post_init__(self) -> None:
        self.started = self.clock.monotonic()

    def _duration_ms(self) -> int:
        return round((self.clock.monotonic() - self.started) * 1000)

    def start(self) -> DataPart:
        return DataPart("om-observation-start", {
            "cycleId": self.id, "operationType": self.operation, "startedAt": now_iso(self.clock),
            "tokensToObserve": self.tokens, "recordId": self.record.id, "threadId": self.thread_id,
            "threadIds": self.thread_ids or [self.thread_id], "config": self.config}, transient=True)

    def end(self, *, record: OMRecord, observation_tokens: int, observations: str | None,
            current_task: str | None = None, suggested_response: str | None = None,
            extra: dict[str, Any] | None = None) -> DataPart:
        """``extra``: the extraction's ``extractedValues`` / ``extractionFailures``."""
        data: dict[str, Any] = {
            "cycleId": self.id, "operationType": self.operation, "completedAt": now_iso(self.clock),
            "durationMs": self._duration_ms(), "tokensObserved": self.tokens,
            "observationTokens": observation_tokens, "recordId": record.id, "threadId": self.thread_id}
        if observations is not None:
            data["observations"] = observations
        if current_task:
            data["currentTask"] = current_task
        if suggested_response:
            data["suggestedResponse"] = suggested_response
        data.update(extra or {})
        return with_observations("om-observation-end", data)

    def failed(self, error: str) -> DataPart:
        return DataPart("om-observation-failed", {
            "cycleId": self.id, "operationType": self.operation, "failedAt": now_iso(self.clock),
            "durationMs": self._duration_ms(), "tokensAttempted": self.tokens, "error": error[:2000],
            "recordId": self.record.id, "threadId": self.thread_id}, transient=True)


def _cycle_id(prefix: str, clock: Clock) -> str:
    return f"{prefix}-{epoch_ms(clock)}-{random.randbytes(5).hex()[:9]}"


@dataclass
class BufferCycle:
    """One background run (``dev_server.om.engine.buffering``): its ``data-om-buffering-*`` parts."""

    operation: str
    record: OMRecord
    thread_id: str
    config: dict[str, Any]
    tokens: int  # message tokens to buffer, or the observation tokens of the slice to reflect
    id: str = ""
    clock: Clock = field(default=SYSTEM_CLOCK, repr=False)
    started: float = field(init=False)

    def __post_init__(self) -> None:
        self.id = self.id or _cycle_id("buffer-obs" if self.operation == OBSERVATION else "reflect-buf", self.clock)
        self.started = self.clock.monotonic()

    def _duration_ms(self) -> int:
        return round((self.clock.monotonic() - self.started) * 1000)

    def start(self) -> DataPart:
        return DataPart("om-buffering-start", {
            "cycleId": self.id, "operationType": self.operation, "startedAt": now_iso(self.clock),
            "tokensToBuffer": self.tokens, "recordId": self.record.id, "threadId": self.thread_id,
            "threadIds": [self.thread_id], "config": self.config}, transient=True)

    def end(self, *, buffered_tokens: int, observations: str | None, extra: dict[str, Any] | None = None) -> DataPart:
        """``observations``: the chunk's, or the buffered reflection's text (the stored copy
        keeps its head only: ``with_observations``, D48)."""
        data = {"cycleId": self.id, "operationType": self.operation, "completedAt": now_iso(self.clock),
                "durationMs": self._duration_ms(), "tokensBuffered": self.tokens, "bufferedTokens": buffered_tokens,
                "recordId": self.record.id, "threadId": self.thread_id}
        if observations is not None:
            data["observations"] = observations
        data.update(extra or {})
        return with_observations("om-buffering-end", data)

    def failed(self, error: str) -> DataPart:
        return DataPart("om-buffering-failed", self._failure(error), transient=True)

    def observation_failed(self, error: str) -> DataPart:
        """The ``data-om-observation-failed`` copy of a failed background observation, which
        is stored on the reply but not streamed (2.4, "On failure")."""
        return DataPart("om-observation-failed", self._failure(error), transient=True)

    def _failure(self, error: str) -> dict[str, Any]:
        return {
            "cycleId": self.id, "operationType": self.operation, "failedAt": now_iso(self.clock),
            "durationMs": self._duration_ms(), "tokensAttempted": self.tokens, "error": error[:2000],
            "recordId": self.record.id, "threadId": self.thread_id}


def activation_part(*, cycle_id: str | None, operation: str, record: OMRecord, thread_id: str, clock: Clock,
                    config: dict[str, Any], tokens_activated: int, observation_tokens: int,
                    messages_activated: int, triggered_by: str, observations: str | None = None,
                    details: dict[str, Any] | None = None) -> DataPart:
    """``data-om-activation``: one buffered chunk (or a buffered reflection) swapped in;
    ``record`` is the record after the swap, ``details`` the trigger's own fields."""
    data: dict[str, Any] = {
        "cycleId": cycle_id, "operationType": operation, "activatedAt": now_iso(clock), "chunksActivated": 1,
        "tokensActivated": tokens_activated, "observationTokens": observation_tokens,
        "messagesActivated": messages_activated, "recordId": record.id, "threadId": thread_id,
        "generationCount": record.generation_count, "config": config, "triggeredBy": triggered_by,
        **(details or {})}
    if observations is not None:
        data["observations"] = observations
    return with_observations("om-activation", data)
