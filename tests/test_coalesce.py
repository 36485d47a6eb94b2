"""``dev_server.streaming.coalesce``: frames ready together leave as one body chunk, frames that
come apart leave apart, and closing the joined stream runs the frames' own cleanup."""

from __future__ import annotations

import asyncio

import pytest
from sse_starlette import ServerSentEvent

from dev_server.streaming.coalesce import coalesced

pytestmark = pytest.mark.anyio


def frame(n: int) -> ServerSentEvent:
    return ServerSentEvent(data=f"frame {n}", id=str(n), sep="\n")


async def test_frames_ready_together_are_one_chunk_and_spaced_ones_are_not():
    async def burst_then_pause():
        for n in range(5):  # never waits: all five are queued before the response asks
            yield frame(n)
        await asyncio.sleep(0.05)
        yield frame(5)

    chunks = [chunk async for chunk in coalesced(burst_then_pause())]
    assert chunks == [b"".join(frame(n).encode() for n in range(5)), frame(5).encode()]


async def test_a_failing_generator_still_sends_what_it_made_then_raises():
    async def breaks():
        yield frame(1)
        raise RuntimeError("encoder broke")

    joined = coalesced(breaks())
    assert await anext(joined) == frame(1).encode()
    with pytest.raises(RuntimeError, match="encoder broke"):
        await anext(joined)


async def test_closing_early_runs_the_frames_cleanup():
    cleaned = asyncio.Event()

    async def endless():
        try:
            n = 0
            while True:
                yield frame(n)
                n += 1
                await asyncio.sleep(0.01)
        finally:
            cleaned.set()

    joined = coalesced(endless())
    await anext(joined)
    await joined.aclose()
    assert cleaned.is_set()
