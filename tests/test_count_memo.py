"""``CountMemo``: counts of texts remembered by the texts' hashes, never the texts
(a cache keyed by the text held 50 MB of a soaked gateway worker's heap)."""

from __future__ import annotations

import gc
import sys
import tracemalloc

from dev_server.kernel.count_memo import CountMemo
from dev_server.kernel.tokenx import estimate_tokens
from dev_server.llm.local_model import compose_reply
from dev_server.llm.local_om_budget import line_tokens


def test_a_text_is_counted_once_while_it_is_among_the_last_used() -> None:
    counted: list[str] = []
    memo = CountMemo(lambda text: counted.append(text) or len(text), 2)
    assert [memo("a"), memo("bb"), memo("a")] == [1, 2, 1]
    assert counted == ["a", "bb"]
    memo("ccc"), memo("a")  # "a" was used after "bb": it stays, "bb" is dropped next
    memo("dddd")
    assert len(memo) <= 4
    memo("a"), memo("dddd"), memo("bb")
    assert counted == ["a", "bb", "ccc", "dddd", "bb"]


def test_the_memo_holds_at_most_twice_its_size() -> None:
    memo = CountMemo(len, 100)
    for i in range(1_000):
        memo(str(i))
        assert len(memo) <= 200
    assert all(memo(str(i)) == len(str(i)) for i in range(900, 1_000))


def test_an_equal_text_in_another_string_object_is_the_same_text() -> None:
    memo = CountMemo(estimate_tokens, 8)
    text = "".join(["an equal ", "text"])
    memo(text)
    copy = "".join(["an equal text"])
    assert copy is not text
    assert memo(copy) == estimate_tokens(text) and len(memo) == 1


def test_the_memo_holds_no_reference_to_a_text() -> None:
    memo = CountMemo(estimate_tokens, 8)
    text = "x" * 10_000 + "a text only this test holds"
    before = sys.getrefcount(text)
    memo(text), memo(text)
    assert sys.getrefcount(text) == before


def test_texts_the_local_model_priced_are_freed_when_the_turns_are_done() -> None:
    """4,096 distinct 8 KB messages and 8,192 log lines through the local model's counts: what
    stays allocated is the memo's integers, not the texts (32 MB and more if it kept them)."""
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for i in range(4_096):
            compose_reply([{"role": "user", "content": f"message {i} " + "words of a long message " * 330}])
        for i in range(8_192):
            line_tokens(f"* 🟡 (14:{i % 60:02d}) an observation line number {i} about the user's plans")
        gc.collect()
        kept = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert kept < 4 * 1024 * 1024, f"{kept / 1e6:.1f} MB kept"
