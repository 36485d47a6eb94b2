"""Speed of Observational Memory's token estimates (``dev_server.om.tokens.counting``).

``estimate_tokens`` (the tokenx 1.3.0 port) against tiktoken's ``cl100k_base`` encoder, in
the same run, over a ~2 MB generated corpus of English prose, Python code and JSON (and, as
an extra row, ~0.5 MB of German, French, Polish, Japanese and emoji text). Each is timed as
the best of several passes; MB is 10^6 characters. The token totals are printed too, as a
reminder that tokenx is an estimate. Then ``count_messages`` over 1,000 stored messages (user
text, assistant text, tool calls with JSON results, reasoning, data parts): cold (no cached
estimates: every payload hashed, estimated and its estimate written into the part), warm
(every estimate read back) and without the cache (``cache=False``: estimated, not hashed).
tiktoken loads its encodings from litellm's bundled files (``dev_server.llm.offline``), offline.
Run: .venv/bin/python bench/om_tokens.py [passes]
"""

from __future__ import annotations

import copy
import json
import random
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from dev_server.kernel.messages import Message  # noqa: E402
from dev_server.llm.offline import prepare_litellm  # noqa: E402
from dev_server.om.tokens.counting import count_messages, estimate_tokens  # noqa: E402

CORPUS_CHARS = 2_000_000
WORDS = ("the of and to in is that for it as was with be by on not he this are or his from at which but have an "
         "they you were her she there been one all we their has would when if so no will can more other into time "
         "only new some could these two may first then do any like my now over such our man me even most made after "
         "also did many before must through back years where much your way well down should because each just those "
         "people how too little state good very make world still own see men work long get here between both life "
         "observation reflection memory thread resource message assistant").split()
IDENTIFIERS = ("user_id", "thread", "message", "observe", "payload", "tokens", "result", "config", "handler")
WIDE_WORDS = ("über", "Straße", "Müdigkeit", "déjà", "garçon", "œuvre", "żółć", "Dvořák", "łódź", "日本語の",
              "テキスト", "観察記憶", "한국어", "🔴", "✅", "naïve", "fiancée")


def english(rng: random.Random) -> str:
    sentence = " ".join(rng.choice(WORDS) for _ in range(rng.randint(6, 24))).capitalize()
    money = f" In {rng.randint(1990, 2030)} it cost ${rng.randint(1, 99_999):,}.{rng.randint(0, 99):02d}." \
        if rng.random() < 0.1 else ""
    return sentence + rng.choice(".,!?") + money + (" " if rng.random() < 0.8 else "\n\n")


def code(rng: random.Random) -> str:
    name, other = rng.choice(IDENTIFIERS), rng.choice(IDENTIFIERS)
    return (f"def {name}_{rng.randint(0, 999)}(self, {other}: int = {rng.randint(0, 100)}) -> dict[str, int]:\n"
            f"    if self.{other} >= {rng.randint(0, 10**6)}:  # {rng.choice(WORDS)} {rng.choice(WORDS)}\n"
            f"        return {{\"{name}\": self._{other}[{rng.randint(0, 9)}] * 2}}\n"
            f"    raise ValueError(f\"bad {{{name}!r}}\")\n\n")


def json_record(rng: random.Random) -> str:
    record = {"id": f"msg-{rng.randint(0, 10**9)}", "role": rng.choice(["user", "assistant"]),
              "createdAt": f"2026-01-{rng.randint(1, 28):02d}T14:{rng.randint(0, 59):02d}:00.000Z",
              "content": {"format": 2, "parts": [{"type": "text", "text": " ".join(rng.sample(WORDS, 8))}]},
              "score": round(rng.random(), 4), "tags": rng.sample(IDENTIFIERS, 3)}
    return json.dumps(record, indent=2 if rng.random() < 0.5 else None) + "\n"


def corpus(chars: int, seed: int = 7) -> str:
    rng = random.Random(seed)
    chunks, total = [], 0
    while total < chars:
        pick = rng.random()
        chunk = english(rng) if pick < 0.5 else code(rng) if pick < 0.75 else json_record(rng)
        chunks.append(chunk)
        total += len(chunk)
    return "".join(chunks)


def wide_corpus(chars: int, seed: int = 11) -> str:
    rng = random.Random(seed)
    words = [rng.choice(WIDE_WORDS) if rng.random() < 0.4 else rng.choice(WORDS) for _ in range(chars // 6)]
    return " ".join(words)[:chars]


def stored_messages(count: int, seed: int = 3) -> list[Message]:
    rng = random.Random(seed)
    messages = []
    for index in range(count):
        created = f"2026-01-01T14:{index // 60 % 60:02d}:{index % 60:02d}.000Z"
        if index % 2 == 0:
            said = "".join(english(rng) for _ in range(rng.randint(1, 4))).strip()
            content = {"format": 2, "parts": [{"type": "text", "text": said}], "content": said}
            messages.append(Message(f"m{index}", "t1", "r1", "user", content, created))
            continue
        parts: list[dict] = [{"type": "step-start"}]
        if rng.random() < 0.3:
            parts.append({"type": "reasoning", "reasoning": english(rng), "details": []})
        if rng.random() < 0.5:
            rows = [{"title": " ".join(rng.sample(WORDS, 5)), "url": f"https://example.com/{rng.randint(0, 10**6)}",
                     "score": round(rng.random(), 3)} for _ in range(rng.randint(1, 8))]
            parts.append({"type": "tool-invocation", "toolInvocation": {
                "state": "result", "toolCallId": f"call-{index}", "toolName": "webSearch",
                "args": {"query": " ".join(rng.sample(WORDS, 4)), "limit": 8}, "result": {"results": rows}}})
            parts.append({"type": "step-start"})
        parts.append({"type": "text", "text": "".join(english(rng) for _ in range(rng.randint(1, 6))).strip()})
        if rng.random() < 0.2:
            parts.append({"type": "data-om-status", "data": {"tokens": rng.randint(0, 30_000)}})
        messages.append(Message(f"m{index}", "t1", "r1", "assistant", {"format": 2, "parts": parts}, created))
    return messages


def best_seconds(run, passes: int) -> float:
    best = float("inf")
    for _ in range(passes):
        started = time.perf_counter()
        run()
        best = min(best, time.perf_counter() - started)
    return best


def main(passes: int) -> None:
    prepare_litellm()  # tiktoken reads litellm's bundled encodings, no download
    import tiktoken

    encoding = tiktoken.get_encoding("cl100k_base")
    print(f"best of {passes} passes; MB = 10^6 characters")
    for label, text in (("english/code/json", corpus(CORPUS_CHARS)), ("non-ASCII mix", wide_corpus(500_000))):
        ours = best_seconds(lambda text=text: estimate_tokens(text), passes)
        theirs = best_seconds(lambda text=text: encoding.encode(text, disallowed_special=()), passes)
        estimated, encoded = estimate_tokens(text), len(encoding.encode(text, disallowed_special=()))
        mb = len(text) / 1e6
        print(f"{label:18s} {mb:5.2f} MB  estimate_tokens {mb / ours:7.1f} MB/s   cl100k encode "
              f"{mb / theirs:6.1f} MB/s   speed ratio {theirs / ours:5.2f}x   "
              f"tokens {estimated:,} vs {encoded:,} ({estimated / encoded:.2f})")

    messages = stored_messages(1000)
    chars = sum(len(json.dumps(message.content)) for message in messages)
    cold_copies = [copy.deepcopy(messages) for _ in range(passes)]
    cold = best_seconds(lambda: count_messages(cold_copies.pop()), passes)
    warm_set = copy.deepcopy(messages)
    total = count_messages(warm_set)
    warm = best_seconds(lambda: count_messages(warm_set), passes)
    uncached = best_seconds(lambda: count_messages(messages, cache=False), passes)
    assert count_messages(messages, cache=False) == total
    print(f"count_messages     1,000 messages ({chars / 1e6:.2f} MB of content JSON), {total:,} tokens")
    for label, seconds in (("cold (cache empty)", cold), ("warm (cache filled)", warm), ("cache=False", uncached)):
        print(f"  {label:20s} {seconds * 1e3:7.2f} ms   {seconds * 1e6 / len(messages):6.2f} us/message")
    print(f"  warm / cold {warm / cold:.2f}   cache=False / cold {uncached / cold:.2f}")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 5)
