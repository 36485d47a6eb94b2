"""Every element of Mastra's Observational Memory prompts is in ours (docs/observational-memory.md#prompt-coverage).

The docs list the elements, each with the prompt it belongs to and phrases of ours that say it;
this test builds each prompt as OM builds it and finds every phrase in it (whitespace runs
compared as one space). The list is the one place both the docs and this test read.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from dev_server.om.options.config import RetrievalConfig
from dev_server.om.options.extractors import Extractor
from dev_server.om.prompting.context import build_context_system_message, continuation_model_message
from dev_server.om.prompting.prompts import (
    observer_messages,
    observer_system_prompt,
    reflector_messages,
    reflector_system_prompt,
)
from dev_server.om.retrieval.instructions import retrieval_instructions

DOC = Path(__file__).resolve().parents[1] / "docs" / "observational-memory.md"
TOPICS = Extractor(name="topics", instructions="What the user talks about.")
LOG = "Date: Dec 4, 2025\n* 🔴 (14:30) User stated they have two kids"
NOW = datetime(2025, 12, 6, 12, 0, tzinfo=UTC)
_ROW = re.compile(r"^\| ([A-Z]\d+[a-z]?) \| ([^|]+?) \| .+ \| (.+) \|$")
_PHRASE = re.compile(r"`([^`]+)`")


def _task(thread_priors: dict[str, list[tuple[str, str]]] | None = None) -> list[dict[str, Any]]:
    return observer_messages('<thread id="a">\nUser: hi\n</thread>', previous_observations=LOG,
                             prior_current_task="Plan the trip", prior_suggested_response="Ask for dates",
                             prior_thread_title="Trip", prior_extracted=[("topics", "run 1")],
                             thread_priors=thread_priors)


def _several() -> list[dict[str, Any]]:
    return _task({"a": [("current-task", "Trip")], "b": []})


PROMPTS: dict[str, Callable[[], str]] = {
    "observer": observer_system_prompt,
    "observer (title, extractor)": lambda: observer_system_prompt(thread_title=True, extractors=[TOPICS]),
    "observer (several threads)": lambda: observer_system_prompt(multi_thread=True),
    "observer task": lambda: str(_task()[0]["content"]),
    "observer task (several threads)": lambda: str(_several()[0]["content"]),
    "observer history": lambda: str(_task()[1]["content"]),
    "observer history (several threads)": lambda: str(_several()[1]["content"]),
    "reflector": reflector_system_prompt,
    "reflector request": lambda: reflector_messages(LOG, level=0)[0]["content"],
    "reflector request (prior values)": lambda: reflector_messages(LOG, level=0, prior_extracted=[("topics", "tea")],
                                                                   extractors=[TOPICS])[0]["content"],
    "reflector request (level 1)": lambda: reflector_messages(LOG, level=1)[0]["content"],
    "reflector request (level 2)": lambda: reflector_messages(LOG, level=2)[0]["content"],
    "actor context": lambda: build_context_system_message(LOG, now=NOW),
    "actor context (other conversations)": lambda: build_context_system_message(
        LOG, now=NOW, other_conversations=[("t2", "User (9:00 AM): hello")]),
    "actor context (retrieval)": lambda: build_context_system_message(
        LOG, now=NOW, retrieval_instructions=retrieval_instructions(RetrievalConfig())),
    "continuation hint": lambda: str(continuation_model_message()["content"]),
}


def coverage_rows() -> list[tuple[str, str, list[str]]]:
    """(element id, prompt, phrases) of each row of the docs' table."""
    text = DOC.read_text(encoding="utf-8")
    section = text.split("\n## Prompt coverage\n", 1)[1].split("\n## ", 1)[0]
    rows = []
    for line in section.splitlines():
        if match := _ROW.match(line):
            rows.append((match.group(1), match.group(2).strip(), _PHRASE.findall(match.group(3))))
    return rows


ROWS = coverage_rows()


def flat(text: str) -> str:
    return " ".join(text.split())


def test_the_list_holds_every_element_of_mastras_prompts() -> None:
    ids = [row_id for row_id, _, _ in ROWS]
    assert len(ids) == len(set(ids))
    elements = list(dict.fromkeys(re.sub(r"[a-z]$", "", row_id) for row_id in ids))
    groups = {kind: [e for e in elements if e[0] == kind] for kind in "OTRQAC"}
    # observer system 35, its task message 8, reflector system 12, its message 6, actor 8, continuation 5
    assert {kind: len(found) for kind, found in groups.items()} == {"O": 35, "T": 8, "R": 12, "Q": 6, "A": 8, "C": 5}
    assert len(elements) == 74
    for kind, found in groups.items():
        assert found == [f"{kind}{n}" for n in range(1, len(found) + 1)]  # numbered without gaps
    assert all(phrases for _, _, phrases in ROWS)
    assert {prompt for _, prompt, _ in ROWS} == set(PROMPTS)


@pytest.mark.parametrize("row_id, prompt, phrases", ROWS, ids=[row[0] for row in ROWS])
def test_our_prompt_says_it(row_id: str, prompt: str, phrases: list[str]) -> None:
    text = flat(PROMPTS[prompt]())
    missing = [phrase for phrase in phrases if flat(phrase) not in text]
    assert not missing, f"{row_id} ({prompt}) lacks {missing}"
