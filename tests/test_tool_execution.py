"""Where a tool's work runs and what its results may hold (issue 25, items 2 and 3), in-process.

``execute`` runs a plain function in a thread and a ``cpu_bound`` one in a child process
killed at its deadline (``dev_server.kernel.tool_runs``); the calculator bounds every intermediate
result (``dev_server.agents.calculator``); an output JSON cannot carry is a tool error, and the
serialisers of spans, stored messages and stream chunks write such numbers as valid JSON
(``dev_server.kernel.json_text``). That the event loop is free while a plain function runs is shown
without a clock: the function waits for an event only a coroutine on the loop can set.
The HTTP side, with a bound on /health, is ``tests/test_tools_off_loop.py``.
"""

from __future__ import annotations

import asyncio
import json
import os
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from dev_server.agents.calculator import MAX_DIGITS, calculator
from dev_server.kernel.tools import Tool, ToolContext, execute
from dev_server.observability.spans import to_json
from dev_server.storage.message_writes import content_json
from dev_server.streaming.sse import encode

CALL = ToolContext(call_id="call_1", agent_id="chat-agent", run_id="run_1")


class Nothing(BaseModel):
    pass


class PidFile(BaseModel):
    path: str


def run(tool: Tool, arguments: str = "{}"):
    return asyncio.run(execute({tool.name: tool}, tool.name, arguments, CALL))


def test_a_plain_function_runs_in_a_thread_while_the_loop_goes_on():
    released = threading.Event()

    def waits_for_the_loop(_: Nothing, context: ToolContext) -> dict[str, Any]:
        assert released.wait(10), "the loop never ran while the tool did"
        return {"thread": threading.get_ident(), "call": context.call_id}

    async def main():
        async def release() -> None:
            await asyncio.sleep(0.01)
            released.set()  # runs only if the tool is not holding the loop

        tool = Tool("waits", "waits for the loop", Nothing, waits_for_the_loop)
        outcome, _ = await asyncio.gather(execute({"waits": tool}, "waits", "{}", CALL), release())
        return outcome, threading.get_ident()

    outcome, loop_thread = asyncio.run(main())
    assert outcome.error is None, outcome.error
    assert outcome.output["call"] == "call_1" and outcome.output["thread"] != loop_thread


def test_a_plain_function_past_its_deadline_is_a_timeout_error_and_its_thread_is_left_behind():
    never = threading.Event()

    def blocks(_: Nothing, __: ToolContext) -> str:
        never.wait(30)
        return "late"

    try:
        outcome = run(Tool("blocks", "blocks", Nothing, blocks, timeout_s=0.2))
    finally:
        never.set()
    assert outcome.output is None and outcome.error == "The tool blocks did not finish within 0.2 s"


def test_a_plain_function_that_raises_is_a_tool_error():
    def fails(_: Nothing, __: ToolContext) -> str:
        raise LookupError("no such thing")

    assert run(Tool("fails", "fails", Nothing, fails)).error == "LookupError: no such thing"


# cpu_bound functions are pickled by name into a child process: they live at module level
def child_pid(args: PidFile, context: ToolContext) -> dict[str, Any]:
    return {"pid": os.getpid(), "call": context.call_id, "ask": context.ask_agent is None}


def child_raises(_: PidFile, __: ToolContext) -> None:
    raise ValueError("bad input")


def child_spins(args: PidFile, _: ToolContext) -> None:
    Path(args.path).write_text(str(os.getpid()))
    while True:
        pass


def cpu_tool(function, timeout_s: float = 30.0) -> Tool:
    return Tool(function.__name__, "cpu-bound", PidFile, function, timeout_s=timeout_s, cpu_bound=True)


def test_a_cpu_bound_function_runs_in_a_child_process_with_the_calls_ids(tmp_path: Path):
    outcome = run(cpu_tool(child_pid), json.dumps({"path": str(tmp_path)}))
    assert outcome.error is None, outcome.error
    assert outcome.output["pid"] != os.getpid() and outcome.output == {**outcome.output, "call": "call_1", "ask": True}
    assert run(cpu_tool(child_raises), json.dumps({"path": ""})).error == "ValueError: bad input"


def test_a_cpu_bound_function_past_its_deadline_is_killed(tmp_path: Path):
    # the forkserver is up: the deadline is the tool's
    assert run(cpu_tool(child_pid), json.dumps({"path": ""})).error is None
    pid_file = tmp_path / "pid"
    # the deadline counts the child's start too (it imports this module): a margin for a loaded machine
    outcome = run(cpu_tool(child_spins, timeout_s=5.0), json.dumps({"path": str(pid_file)}))
    assert outcome.error == "The tool child_spins did not finish within 5 s"
    pid = int(pid_file.read_text())
    for _ in range(100):  # its supervising thread kills it within one poll (50 ms) of the deadline, then reaps it
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.05)
    raise AssertionError(f"the tool's process {pid} is still there")


# -- the calculator's bounds -----------------------------------------------------------------

@pytest.mark.parametrize(("expression", "digits"), [("2**1000", 302), ("3**8380", 3999), ("10**3999", 4000),
                                                     ("-(10**3999)*9", 4000)])
def test_the_calculator_computes_results_up_to_its_bound(expression: str, digits: int):
    outcome = run(calculator, json.dumps({"expression": expression}))
    assert outcome.error is None, outcome.error
    assert len(str(abs(outcome.output["result"]))) == digits <= MAX_DIGITS


OVER = "would have more than the 4,000 digits allowed"
INFINITE = "is too large for a number (it overflows to infinity)"


@pytest.mark.parametrize(("expression", "message"), [
    ("((9**99)**99)**99", f"{OVER} (about 9,353)"),
    ("9**9**9**9", OVER),
    ("2**(10**1000)", OVER),
    ("10**4000", f"{OVER} (about 4,001)"),
    ("(10**100)**44", f"{OVER} (about 4,400)"),
    ("-(10**3999)*10", f"{OVER} (about 4,001)"),
    ("(10**2000)*(10**2001)", f"{OVER} (about 4,001)"),
    ("1e308*10", INFINITE),
    ("1e308+1e308", INFINITE),
    ("1e999", INFINITE),
    ("1/1e-320", INFINITE),
    ("(-8)**0.5", "is not a real number"),
])
def test_the_calculator_refuses_a_result_over_its_bound(expression: str, message: str):
    outcome = run(calculator, json.dumps({"expression": expression}))
    assert outcome.output is None and outcome.error == f"ValueError: the result {message}"


# -- numbers JSON cannot carry ---------------------------------------------------------------

def strict(text: str) -> Any:
    def refuse(name: str) -> None:
        raise ValueError(f"{name} is not JSON")

    return json.loads(text, parse_constant=refuse)


@pytest.mark.parametrize("encoder", [to_json, content_json, encode], ids=["span", "stored message", "stream chunk"])
def test_spans_stored_messages_and_chunks_are_valid_json_whatever_numbers_they_hold(encoder):
    value = {"big": [10**5000, -(10**5000)], "inf": float("inf"), "nan": float("nan"), "ok": [1, 2.5, "x", 10**30]}
    assert strict(encoder(value)) == {"big": ["<an integer of 5,001 digits>", "<an integer of 5,001 digits>"],
                                      "inf": None, "nan": None, "ok": [1, 2.5, "x", 10**30]}


@pytest.mark.parametrize(("output", "problem"), [({"x": float("inf")}, "a non-finite number (inf)"),
                                                 ([1, float("nan")], "a non-finite number (nan)"),
                                                 ({"n": 10**5000}, "an integer of 5,001 digits")])
def test_a_tool_output_json_cannot_carry_is_a_tool_error(output: Any, problem: str):
    async def returns(_: Nothing, __: ToolContext) -> Any:
        return output

    outcome = run(Tool("returns", "returns", Nothing, returns))
    assert outcome.output is None and outcome.error == f"The tool returns returned {problem}, which JSON cannot carry"


def test_arguments_with_an_integer_too_long_to_read_are_a_tool_error():
    outcome = run(calculator, '{"expression": ' + "9" * 5000 + "}")
    assert outcome.error == "The arguments are not valid JSON: they hold an integer too long to read"
