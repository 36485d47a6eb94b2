"""Issue 31's comparison with a real Mastra server (bench/mastra_server.py): the same
requests on our studio and on Mastra's, taking turns, each figure as (ours, Mastra's)."""

from __future__ import annotations

import resource

from bench.load_requests import AGENT, burst, create_threads, load, pct, refuse_threads
from bench.servers import Server
from tests.kit.local_http import background_idle

# Mastra's own routes
AGENT_ROUTE = {"chatPath": f"/api/agents/{AGENT}/stream", "format": "mastra", "resource": "bench-burst"}
MASTRA_THREADS = 4_000  # threads each server creates in the comparison, quick or not (two halves each)
VERSUS_CREATED = f"POST /api/memory/threads?agentId={AGENT}, 8 in flight, threads/s"
VERSUS_CREATED_CPU = "server CPU per thread created, ms"
VERSUS_LOADGEN_CPU = "load generator's CPU per thread created (bench/load.mjs, its Node start included), ms"
VERSUS_REFUSED = "the same route refusing a body without resourceId (400, no storage), 8 in flight, requests/s"
VERSUS_REFUSED_CPU = "server CPU per refused request, ms"
VERSUS_FIRST = f"first turn of 32 new threads at once, POST /api/agents/{AGENT}/stream, p50, ms"


def children_cpu_s() -> float:
    """CPU seconds of this process's finished children (each load generator run is one)."""
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


def warm_up(server: Server) -> None:
    """Issue 31's two requests before any is measured (Node's JIT compiles what runs often,
    Python fills caches lazily), the same on our studio and on Mastra's: 40 first turns, four at
    a time, and 1,000 thread creations at 8 in flight."""
    load({"mode": "turns", "base": server.url, "clients": 4, "fresh": True, "count": 10, **AGENT_ROUTE})
    create_threads(server.url, 1_000, 8)


def against_mastra(studio: Server, mastra: Server, threads: int,
                   gateways: tuple[Server, ...] = ()) -> dict[str, tuple[float, float]]:
    """Issue 31's two requests on our studio and, right after, on Mastra's server: thread
    creation at 8 in flight (and the server CPU per thread; then the same route refused
    before any storage, each server's ceiling for it) and 32 first turns at once on
    ``POST /api/agents/chat-agent/stream`` (Mastra's route, which our studio serves too).
    Each figure as (ours, Mastra's)."""
    # Rates of a second or less swing by a third from one to the next on this shared machine:
    # each server creates ``threads`` in two halves, ours and Mastra's taking turns, after our
    # servers' background work (an OM catch-up, the spans of the last phase) has settled.
    for server in (studio, *gateways):
        background_idle(server.url, timeout=600, quiet_polls=5)
    # The load generator shares the machine's two cores: its CPU tells how much of them the
    # servers had (at ~2,800 threads/s, ~0.4 of a core).
    spent = {server.name: [0.0, 0.0, 0, 0.0] for server in (studio, mastra)}  # wall s, CPU s, threads, load gen CPU s
    half = threads // 2
    for _ in range(2):
        for server in (studio, mastra):
            before, generator_before = server.cpu_s(), children_cpu_s()
            rate = create_threads(server.url, half, 8)  # as the load generator timed it (not its start)
            totals = spent[server.name]
            totals[0] += half / rate
            totals[1] += server.cpu_s() - before
            totals[2] += half
            totals[3] += children_cpu_s() - generator_before
    created = {name: (count / wall, cpu / count * 1000, generator / count * 1000)
               for name, (wall, cpu, count, generator) in spent.items()}
    # What the route costs without its write: the ceiling a creation rate can approach
    refused = {}
    for server in (studio, mastra):
        before = server.cpu_s()
        rate = refuse_threads(server.url, half, 8)
        refused[server.name] = (rate, (server.cpu_s() - before) / half * 1000)
    first = {server.name: pct(burst(server.url, 32, AGENT_ROUTE), .5) for server in (studio, mastra)}
    return {VERSUS_CREATED: (created["studio"][0], created["mastra"][0]),
            VERSUS_CREATED_CPU: (created["studio"][1], created["mastra"][1]),
            VERSUS_LOADGEN_CPU: (created["studio"][2], created["mastra"][2]),
            VERSUS_REFUSED: (refused["studio"][0], refused["mastra"][0]),
            VERSUS_REFUSED_CPU: (refused["studio"][1], refused["mastra"][1]),
            VERSUS_FIRST: (first["studio"], first["mastra"])}
