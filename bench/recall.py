"""Semantic recall at 100,000 messages: embedding and index build rates, query latency,
recall@k against brute force, and the memory of the in-memory copy.

One thread of N messages (default 100,000; ``--quick`` 5,000), 10-80 words each, inserted
through ``ConversationStore`` into a SQLite file in a temp dir. Embedding them all with the
local model would take far too long, so a pool of distinct texts is embedded by the real
``LocalEmbedder`` and message i gets pool text i mod pool with that text's vector plus
Gaussian noise, re-normalised, written by ``VectorIndex.store`` 64 a transaction as the
indexer does. ``Indexer.run_once`` is timed end to end on a sample in another resource.
Query latencies are set against a raw read of the thread's newest 10 messages in the same
run; recall@k against a float64 brute-force scan of the script's own vectors.
Run: ``.venv/bin/python bench/recall.py [--messages N] [--quick] [--out PATH]``
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.report import commit, machine  # noqa: E402
from dev_server.kernel.messages import Message  # noqa: E402
from dev_server.llm.local_embedder import LocalEmbedder  # noqa: E402
from dev_server.recall.indexer import BATCH, Indexer  # noqa: E402
from dev_server.recall.matrix import VectorCache  # noqa: E402
from dev_server.recall.service import SemanticIndex  # noqa: E402
from dev_server.storage.conversations import ConversationStore  # noqa: E402
from dev_server.storage.libsql import LibSQLStore  # noqa: E402
from dev_server.storage.message_vectors import Embedded, VectorIndex, text_hash  # noqa: E402

NOISE = 0.015  # per dimension: |noise| ~ 0.3, cosine to the pool vector ~0.96
RESOURCE, THREAD, AGENT = "bench-user", "bench-thread", "bench-agent"
NEWEST_10 = ("SELECT seq, id, role, content, created_at FROM messages WHERE thread_id = ?"
             " ORDER BY created_at DESC, seq DESC LIMIT 10")
SLOTS = {"name": "Ana Clara Marco Priya Tom Yuki Sam Lena Omar Ines".split(),
         "place": "Lisbon Porto Kyoto Berlin Oaxaca Edinburgh Seville Oslo Hanoi".split(),
         "day": ["on Monday", "on Friday", "next week", "in April", "before the summer", "tomorrow"],
         "num": "3 5 12 20 30 45 90 150 400 2000".split(),
         "thing": ["bookshelf", "bike", "laptop", "passport", "cello", "sofa", "rice cooker", "running shoes"]}
USER = ("I'm planning a trip to {place} with {name} {day} and we love food markets.|Our budget is about {num} "
        "euros, flights included.|The billing migration to the new database has to be finished {day}.|{name} asked "
        "me to present the migration plan {day}.|My dog needs a vet appointment {day}; she gets anxious in the car."
        "|I practise the cello for {num} minutes before work.|I'm allergic to shellfish, keep that in mind.|I run "
        "{num} kilometres a week for the half marathon.|We are replacing the old {thing} in the living room.|Could "
        "you put together a packing list for {place}?|My parents visit {day} and my dad has trouble with stairs."
        "|Is {num} euros a fair price for a used {thing}?").split("|")
ASSISTANT = ("Sure, here is what I would suggest for {place}.|Since {name} prefers quiet places, avoid the main "
             "square.|A budget of {num} euros covers a mid-range hotel and most meals.|First, list the tables the "
             "billing service writes; then plan a dual-write period.|For the vet, a short drive and a familiar "
             "blanket usually help.|Practising {num} minutes a day is plenty if you keep it regular.|Here are three "
             "restaurants in {place} that handle shellfish allergies well.|You said the {thing} should arrive {day}."
             "|Pack light layers: evenings in {place} can be cool.|Ground-floor rooms would suit your dad.").split("|")
QUERIES = ("What is my budget for the trip?|Which city am I travelling to?|When is the migration deadline?|What am "
           "I allergic to?|How long do I practise the cello?|What did the vet say about my dog?|How far do I run each "
           "week?|What furniture are we replacing?|Where should my parents stay?").split("|")


def fill(rng: random.Random, template: str) -> str:
    return template.format(**{k: rng.choice(v) for k, v in SLOTS.items() if "{" + k + "}" in template})


def texts(rng: random.Random, count: int, seen: set[str]) -> list[str]:
    """Distinct chat messages of 10-80 words; even indices user turns, odd assistant."""
    out: list[str] = []
    while len(out) < count:
        bank, words, target = ASSISTANT if len(out) % 2 else USER, [], rng.randint(10, 80)
        while len(words) < target:
            words += fill(rng, rng.choice(bank)).split()
        if (text := " ".join(words[:target])) not in seen:
            seen.add(text)
            out.append(text)
    return out


def messages(thread: str, resource: str, bodies: list[str], start: int) -> list[Message]:
    return [Message(f"{thread}-{start + i}", thread, resource, "user" if (start + i) % 2 == 0 else "assistant",
                    {"format": 2, "parts": [{"type": "text", "text": t}], "content": t},
                    time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(1.7e9 + start + i)) + ".000Z")
            for i, t in enumerate(bodies)]


def perturbed(base: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    out = base + rng.normal(0.0, NOISE, base.shape).astype(np.float32)
    return (out / np.linalg.norm(out, axis=1, keepdims=True)).astype(np.float32)


async def queued(db: LibSQLStore, thread: str) -> list[tuple[int, int]]:
    rows = await db.fetch_all("SELECT q.message_seq, q.version FROM embedding_queue q JOIN messages m ON"
                              " m.seq = q.message_seq WHERE m.thread_id = ? ORDER BY q.message_seq", (thread,))
    return [(r[0], r[1]) for r in rows]


async def store_vectors(index: VectorIndex, key: str, thread: str, todo: list[tuple[int, int]],
                        bodies: list[str], vectors: np.ndarray) -> float:
    """Write precomputed vectors as the indexer does (64 a transaction); seconds spent in store."""
    results = [Embedded(seq, version, thread, text_hash(body), [np.asarray(v, dtype="<f4").tobytes()])
               for (seq, version), body, v in zip(todo, bodies, vectors, strict=False)]
    started = time.perf_counter()
    for at in range(0, len(results), BATCH):
        assert await index.store(key, results[at:at + BATCH]) == len(results[at:at + BATCH])
    return time.perf_counter() - started


async def timed(calls: list, keep: list | None = None) -> list[float]:
    out, results = [], keep if keep is not None else []
    for call in calls:
        started = time.perf_counter()
        results.append(await call())
        out.append(time.perf_counter() - started)
    return out


def pct(values: list[float], q: float) -> float:
    return sorted(values)[min(len(values) - 1, int(q * len(values)))]


def rss_kb(field: str = "VmRSS") -> int:
    line = next(x for x in Path("/proc/self/status").read_text().splitlines() if x.startswith(field + ":"))
    return int(line.split()[1])


async def run(n: int, quick: bool) -> tuple[dict, dict, list]:
    pool_n, sample_n, query_n, rounds = (200, 128, 40, 5) if quick else (2000, 2000, 200, 20)
    rng, nrng, seen = random.Random(7), np.random.default_rng(7), set()
    pool, sample = texts(rng, pool_n, seen), texts(rng, sample_n, seen)
    query_texts = [f"{QUERIES[i % len(QUERIES)]} ({fill(rng, '{place}, {name}')})" for i in range(query_n)]
    f, lat = {"n": n, "pool": pool_n, "sample": sample_n, "queries": query_n, "rounds": rounds}, {}
    embedder, started = LocalEmbedder(), time.perf_counter()
    embedder.load()
    f["load_s"] = time.perf_counter() - started
    await embedder.embed(pool[:8])  # warm-up, not counted
    f["words"] = sum(len(t.split()) for t in pool) / pool_n
    f["tokens"] = sum(sum(e.attention_mask) for e in embedder._tokenizer.encode_batch(pool)) / pool_n  # unpadded
    started, parts = time.perf_counter(), []
    for at in range(0, pool_n, BATCH):  # as Indexer.run_once: one embed call per claimed batch
        parts.append(await embedder.embed(pool[at:at + BATCH]))
    f["embed_rate"], pool_vectors = pool_n / (time.perf_counter() - started), np.vstack(parts)
    with tempfile.TemporaryDirectory() as tmp:
        db = LibSQLStore(f"file:{Path(tmp) / 'recall.db'}")
        await db.open()
        store, index, key = ConversationStore(db), VectorIndex(db, agents=frozenset({AGENT})), embedder.key
        await store.ensure_thread("sample-thread", "sample-user", agent_id=AGENT)
        await store.append_messages("sample-thread", messages("sample-thread", "sample-user", sample, 0))
        indexer, started = Indexer(index, embedder), time.perf_counter()
        while await indexer.run_once():
            pass
        f["indexer_rate"], f["indexer_written"] = sample_n / (time.perf_counter() - started), indexer.embedded
        await store.ensure_thread(THREAD, RESOURCE, agent_id=AGENT)
        bodies, started = [pool[i % pool_n] for i in range(n)], time.perf_counter()
        for at in range(0, n, 1000):
            await store.append_messages(THREAD, messages(THREAD, RESOURCE, bodies[at:at + 1000], at))
        f["insert_rate"] = n / (time.perf_counter() - started)
        vectors = np.vstack([perturbed(pool_vectors[np.arange(at, min(n, at + 10_000)) % pool_n], nrng)
                             for at in range(0, n, 10_000)])
        head = min(n, 10_000)
        f["cosine"] = float(np.mean(np.sum(vectors[:head] * pool_vectors[np.arange(head) % pool_n], axis=1)))
        todo = await queued(db, THREAD)
        assert len(todo) == n, (len(todo), n)
        f["store_rate"] = n / await store_vectors(index, key, THREAD, todo, bodies, vectors)
        seqs = np.array([seq for seq, _ in todo], dtype=np.int64)
        semantic = SemanticIndex(db, embedder, agents=frozenset({AGENT}), poll_s=3600.0)
        assert await semantic.ready() and (await index.stats(key))["backlog"] == 0
        qv = embedder.embed_sync(query_texts)

        def vector_query(i: int, k: int = 4, thread: str | None = None):
            return lambda: semantic.search_vector(qv[i % query_n], resource_id=RESOURCE, thread_id=thread, top_k=k)

        lat["baseline"] = (await timed([lambda: db.fetch_all(NEWEST_10, (THREAD,))] * (query_n + 10)))[10:]
        lat["cold"] = []
        for attempt in range(3):  # a fresh copy each time: the first query of a process
            semantic.cache, before = VectorCache(index), rss_kb()
            with contextlib.suppress(OSError):
                Path("/proc/self/clear_refs").write_text("5")  # resets VmHWM, the peak RSS
            lat["cold"] += await timed([vector_query(attempt)])
            if attempt == 0:
                f["rss_before"], f["rss_peak"], f["rss_after"] = before, rss_kb("VmHWM"), rss_kb()
        copy = semantic.cache._copies[(key, RESOURCE)]  # the resource's copy the cache keeps
        f["copy_bytes"], f["copy_rows"] = copy.nbytes, copy.size
        hits: dict[tuple[str, int], list] = {}
        for scope, thread in (("thread", THREAD), ("resource", None)):
            for k in (4, 10):
                hits[(scope, k)] = []
                lat[f"{scope}{k}"] = await timed([vector_query(i, k, thread) for i in range(query_n)], hits[(scope, k)])
        lat["cache"] = await timed([lambda i=i: semantic.cache.search(key, 384, RESOURCE, qv[i], 4)
                                    for i in range(query_n)])
        lat["scan"] = []
        for i in range(query_n):
            started = time.perf_counter()
            copy.top(qv[i], 4, None, set())
            lat["scan"].append(time.perf_counter() - started)
        lat["embed"] = await timed([lambda i=i: embedder.embed([query_texts[i]]) for i in range(query_n)])
        lat["search"] = await timed([lambda i=i: semantic.search(query_texts[i], resource_id=RESOURCE,
                                                                 thread_id=THREAD) for i in range(query_n)])
        truth = []  # top 10 rows per query, by a float64 scan of the script's own vectors
        for qa in range(0, query_n, 25):
            q64 = qv[qa:qa + 25].astype(np.float64).T
            scores = np.vstack([vectors[at:at + 10_000].astype(np.float64) @ q64 for at in range(0, n, 10_000)])
            for column in scores.T:
                best = np.argpartition(-column, 10)[:10]
                truth.append(best[np.argsort(-column[best], kind="stable")])
        recall = []
        for (scope, k), found in hits.items():
            exact = [list(seqs[row[:k]]) for row in truth]
            got = [[h.message.seq for h in result] for result in found]
            recall.append((scope, k, np.mean([len(set(g) & set(e)) / k for g, e in zip(got, exact, strict=False)]),
                           np.mean([g == e for g, e in zip(got, exact, strict=False)])))
        lat["append"] = []
        for r in range(rounds):  # 64 new messages and their vectors, then one query
            at = n + r * BATCH
            new = [pool[i % pool_n] for i in range(at, at + BATCH)]
            await store.append_messages(THREAD, messages(THREAD, RESOURCE, new, at))
            fresh = perturbed(pool_vectors[np.arange(at, at + BATCH) % pool_n], nrng)
            await store_vectors(index, key, THREAD, await queued(db, THREAD), new, fresh)
            before = rss_kb()
            lat["append"] += await timed([vector_query(r)])
            if r == 0:
                f["grown_bytes"], f["grown_rows"], f["rss_grown"] = copy.nbytes, len(copy.ids), rss_kb() - before
        f["append_rows"] = copy.size
        await semantic.stop()
        await db.close()
    return f, lat, recall


def report(f: dict, lat: dict, recall: list, quick: bool, load: str) -> str:
    base, n, q, mib = pct(lat["baseline"], 0.5), f["n"], f["queries"], 2 ** 20

    def row(label: str, values: list[float]) -> str:
        p50 = pct(values, 0.5)
        return f"| {label} | {p50 * 1000:.2f} | {pct(values, 0.99) * 1000:.2f} | {p50 / base:.1f}x |"

    lines = [
        f"# bench/recall.py --messages {n}{' --quick' if quick else ''}, "
        f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}", "", *(f"- {line}" for line in machine()),
        f"- load average (1, 5, 15 min) at start: {load}; at end: {', '.join(f'{v:.2f}' for v in os.getloadavg())}",
        f"- one thread of {n:,} messages (user/assistant, 10-80 words, {f['words']:.0f} words and {f['tokens']:.0f} "
        "tokens on average), alone in its resource (thread scope: a mask of every row), inserted through "
        "ConversationStore into a SQLite file (WAL)",
        f"- vectors: {f['pool']:,} distinct texts embedded by the local embedder (all-MiniLM-L6-v2 int8, onnxruntime, "
        f"1 intra-op thread); message i has pool text i mod {f['pool']:,} and its vector plus N(0, {NOISE}^2) noise "
        f"per dimension, re-normalised (mean cosine to the pool vector {f['cosine']:.3f}): embedding all {n:,} "
        f"would take ~{n / f['embed_rate'] / 60:.0f} min at the rate below", "",
        "## Build", "", "| figure | value |", "|---|---:|",
        f"| local embedder: texts/s ({f['pool']:,} texts, {BATCH} a call as the indexer) | {f['embed_rate']:,.1f} |",
        f"| index build end to end: messages/s (Indexer.run_once: claim, embed, store; {f['sample']:,} messages) "
        f"| {f['indexer_rate']:,.1f} |",
        f"| index build, storage side: messages/s (VectorIndex.store, {BATCH} a transaction, {n:,} messages) "
        f"| {f['store_rate']:,.0f} |",
        f"| messages inserted through ConversationStore: messages/s (1,000 a transaction; context) "
        f"| {f['insert_rate']:,.0f} |",
        f"| Indexer.run_once: messages written of the sample | {f['indexer_written']:,} |",
        f"| model load (s, once per process) | {f['load_s']:.2f} |", "",
        f"## Query latency (ms; {q} queries, nearest-rank percentiles; ratio: p50 over the baseline's p50)", "",
        "| query | p50 | p99 | ratio |", "|---|---:|---:|---:|",
        row("baseline: thread's newest 10 messages (raw SQLite read)", lat["baseline"]),
        *(row(f"search_vector, {scope} scope, top {k} (warm, embedding excluded)", lat[f"{scope}{k}"])
          for scope in ("thread", "resource") for k in (4, 10)),
        row("VectorCache.search alone, resource, top 4 (positions read + scan)", lat["cache"]),
        row("numpy scan alone (the copy's top, top 4)", lat["scan"]),
        row("embedding one query text (local embedder)", lat["embed"]),
        row("search, thread scope, top 4 (query text embedded)", lat["search"]),
        row(f"cold: first query, loads the copy of {n:,} vectors ({len(lat['cold'])} fresh copies)", lat["cold"]),
        row(f"first query after {BATCH} new vectors ({f['rounds']} rounds)", lat["append"]), "",
        f"- cold queries: {', '.join(f'{v * 1000:.0f}' for v in lat['cold'])} ms; after appends, first round "
        f"{lat['append'][0] * 1000:.1f} ms (the copy's capacity grows), the others "
        f"{pct(lat['append'][1:] or lat['append'], 0.5) * 1000:.1f} ms p50",
        f"- search with the query embedded, p50 {pct(lat['search'], 0.5) * 1000:.2f} ms, against the sum of its parts "
        f"measured alone (embedding + thread-scope search_vector): "
        f"{(pct(lat['embed'], 0.5) + pct(lat['thread4'], 0.5)) * 1000:.2f} ms", "",
        f"## recall@k against a brute-force float64 scan of the script's {n:,} vectors ({q} queries)", "",
        "| scope | k | recall@k | identical top-k order |", "|---|---:|---:|---:|",
        *(f"| {scope} | {k} | {r:.4f} | {same:.4f} |" for scope, k, r, same in recall), "",
        "## Memory of the in-memory copy", "",
        f"- at {n:,}: {f['copy_bytes']:,} bytes ({f['copy_bytes'] / mib:.1f} MiB; _Copy.nbytes, what the LRU "
        f"counts) for {f['copy_rows']:,} vectors; float32 matrix alone {f['copy_rows'] * 384 * 4 / mib:.1f} MiB",
        f"- process RSS around the first load: {f['rss_before'] / 1024:.0f} MiB before, peak "
        f"{f['rss_peak'] / 1024:.0f} MiB during, {f['rss_after'] / 1024:.0f} MiB after",
        f"- after the first append of {BATCH}: capacity {f['grown_rows']:,} rows, nbytes {f['grown_bytes']:,} "
        f"({f['grown_bytes'] / mib:.1f} MiB), RSS {f['rss_grown'] / 1024:+.0f} MiB across that query; "
        f"{f['append_rows']:,} vectors at the end"]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--messages", type=int, help="messages in the thread (default 100,000; --quick 5,000)")
    parser.add_argument("--quick", action="store_true", help="smaller pool, sample and query count")
    parser.add_argument("--out", type=Path, help="result file (default bench/results/<date>-<commit>-recall.md)")
    args = parser.parse_args()
    n = args.messages or (5_000 if args.quick else 100_000)
    at_start, load = commit(), ", ".join(f"{v:.2f}" for v in os.getloadavg())
    f, lat, recall = asyncio.run(run(n, args.quick))
    text = report(f, lat, recall, args.quick, load)
    changed = subprocess.run(["git", "diff", "--name-only", "HEAD"], cwd=REPO, capture_output=True, text=True).stdout
    loaded = {Path(m.__file__).resolve().relative_to(REPO).as_posix() for m in list(sys.modules.values())
              if getattr(m, "__file__", None) and Path(m.__file__).resolve().is_relative_to(REPO)}
    if changed := changed.split():  # other people's work in the tree: does this run load any of it?
        text += (f"\nUncommitted changes to tracked files at the end: {', '.join(changed)}; loaded by this run: "
                 f"{', '.join(sorted(set(changed) & loaded)) or 'none of them'}.\n")
    if commit() != at_start:
        text += f"\nNote: the checkout changed during the run (commit {at_start} at start).\n"
    print(text)
    suffix = ("-quick" if args.quick else "") + ("" if n == 100_000 else f"-{n}")
    day = time.strftime("%Y-%m-%d", time.gmtime())
    out = args.out or REPO / "bench" / "results" / f"{day}-{at_start}-recall{suffix}.md"
    out.write_text(text)
    print(f"written to {out}")


if __name__ == "__main__":
    main()
