"""The history window, token tier 1: the thread's last N messages, read from storage.

A processor of the step loop. Its turn object reads the window once, on the turn's first
step (the thread does not change under a turn: the turn holds its lease), and the context
keeps it for the later steps, whose own tool rounds the loop appends after it.
"""

from __future__ import annotations

from collections.abc import Callable

from dev_server.kernel.convert import to_model_messages
from dev_server.kernel.ports import ThreadMessages
from dev_server.kernel.processors import StepContext, TurnProcessor
from dev_server.kernel.text import repair_value


class HistoryWindow:
    """``window_size(input_count)``: how many stored messages the model sees when the turn
    stored ``input_count`` (``MemoryOptions.window``)."""

    name = "history"

    def __init__(self, messages: ThreadMessages, window_size: Callable[[int], int]) -> None:
        self.messages = messages
        self.window_size = window_size

    def start_turn(self, step: StepContext) -> HistoryTurn:
        return HistoryTurn(self)


class HistoryTurn(TurnProcessor):
    name = "history"

    def __init__(self, window: HistoryWindow) -> None:
        self.window = window
        self.loaded = False

    async def before_step(self, step: StepContext) -> None:
        if self.loaded or step.thread is None:
            return
        self.loaded = True
        messages = await self.window.messages.recent_messages(step.thread.id,
                                                              self.window.window_size(step.input_count))
        step.history = repair_value(to_model_messages(messages))
        step.window = messages
