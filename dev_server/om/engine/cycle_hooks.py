"""``HookedCycles``: the ``CycleHooks`` (``dev_server.om.engine.cycle_context``) that call
``observationalMemory.hooks`` around every cycle.

Each cycle runs inside a ``CycleRun`` (``dev_server.om.options.hooks``): its parts are tapped
on their way out (``-start``: the cycle really started; ``-failed``: its error; ``-end``:
success), so the hooks see exactly what the stream sees, and the end hook runs after the
cycle, never inside it. A synchronous cycle (a turn's or a manual one) has the trigger of
its context; a background one (``dev_server.om.engine.buffering``) is ``async-buffer``, and
its start hook ran when it was queued (its ``-start`` part was streamed then).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import replace
from typing import Any

from dev_server.kernel.events import DataPart
from dev_server.om.engine.cycle_context import CycleContext, JobParts, describe_error
from dev_server.om.options.hooks import CycleRun, CycleTrigger, Hooks, current_run, current_trigger
from dev_server.storage.om_records import OMRecord


def _tap(run: CycleRun, part: DataPart) -> None:
    name = part.name
    if name.endswith("-start"):
        run.started = True
    elif name.endswith("-failed"):
        run.started = True
        run.error = str((part.data or {}).get("error") or "failed")
    elif name.endswith("-end"):
        run.error = None


class HookedCycles:
    """Every cycle of one engine, reported to ``hooks``."""

    def __init__(self, hooks: Hooks) -> None:
        self.hooks = hooks

    @asynccontextmanager
    async def cycle(self, ctx: CycleContext, record: OMRecord, operation: str,
                    trigger: CycleTrigger | None = None) -> AsyncIterator[CycleContext]:
        async with self._run(ctx, record, operation, trigger or current_trigger.get()) as (run_ctx, _):
            yield run_ctx

    @asynccontextmanager
    async def background(self, ctx: CycleContext, record: OMRecord, operation: str,
                         sink: JobParts) -> AsyncIterator[tuple[CycleContext, JobParts]]:
        token = current_trigger.set("async-buffer")
        try:
            async with self._run(ctx, record, operation, "async-buffer", started=True) as (_, run):
                tap = _TapSink(sink, run)
                yield replace(ctx, emit=tap.emit), tap
        finally:
            current_trigger.reset(token)

    @asynccontextmanager
    async def _run(self, ctx: CycleContext, record: OMRecord, operation: str, trigger: CycleTrigger, *,
                   started: bool = False) -> AsyncIterator[tuple[CycleContext, CycleRun]]:
        """Run one cycle under a ``CycleRun``: its parts tapped, its end hook called after it."""
        run = CycleRun(self.hooks, operation, trigger, ctx.thread_id, record.resource_id, record.id,
                       started=started)
        emit = ctx.emit

        def tapped(part: DataPart, *args: Any, **kwargs: Any) -> None:
            _tap(run, part)
            emit(part, *args, **kwargs)

        token = current_run.set(run)
        try:
            yield replace(ctx, emit=tapped), run
        except BaseException as exc:
            run.error = run.error or describe_error(exc)
            raise
        finally:
            current_run.reset(token)
            await run.finish()


class _TapSink:
    """A job's ``JobParts`` whose parts a ``CycleRun`` also sees."""

    def __init__(self, sink: JobParts, run: CycleRun) -> None:
        self.sink, self.run = sink, run

    def emit(self, part: DataPart, durable: bool = True) -> None:
        _tap(self.run, part)
        self.sink.emit(part, durable)

    def store(self, part: DataPart) -> None:
        self.sink.store(part)

    async def flush(self) -> None:
        await self.sink.flush()
