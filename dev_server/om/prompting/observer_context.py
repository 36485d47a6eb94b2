"""The previous observations the observer is shown, cut to ``previousObserverTokens``.

Mastra keeps a helper for this (docs/observational-memory.md#thresholds, ``prepareObserverContext``)
that its current release no longer calls: the observer gets the whole log. Here it runs
only when ``observation.truncatePreviousObservations`` is on (off by default, as Mastra
behaves). Then a log over the budget keeps its newest lines whole (the raw tail, half the
budget), plus, from the older lines, the newest 🔴 (user facts, open goals) and ✅
(completed) ones that still fit, in their original order; where lines were dropped a
``[N observations truncated here]`` line says how many. Date headers survive with the
lines they head, so every kept line keeps its day.
"""

from __future__ import annotations

from dev_server.kernel.tokenx import estimate_tokens

KEPT_MARKERS = ("🔴", "✅")


def _is_header(line: str) -> bool:
    return line.startswith("Date:")


def truncate_previous_observations(observations: str, budget: int) -> str:
    if budget <= 0 or estimate_tokens(observations) <= budget:
        return observations
    lines = observations.split("\n")
    keep = [False] * len(lines)
    spent = 0
    tail_start = len(lines)
    for index in range(len(lines) - 1, -1, -1):  # the raw tail: newest lines, up to half the budget
        cost = estimate_tokens(lines[index]) + 1
        if spent + cost > budget // 2:
            break
        spent += cost
        keep[index] = True
        tail_start = index
    for index in range(tail_start - 1, -1, -1):  # then the newest important lines of the head
        if any(marker in lines[index] for marker in KEPT_MARKERS):
            cost = estimate_tokens(lines[index]) + 1
            if spent + cost > budget:
                break
            spent += cost
            keep[index] = True
    header: int | None = None
    for index, line in enumerate(lines):  # a kept line keeps its date header
        if _is_header(line):
            header = index
        elif keep[index] and header is not None:
            keep[header] = True
    result: list[str] = []
    dropped = 0
    for index, line in enumerate(lines):
        if keep[index]:
            if dropped:
                result.append(f"[{dropped} observations truncated here]")
                dropped = 0
            result.append(line)
        elif line.strip():
            dropped += 1
    if dropped:
        result.append(f"[{dropped} observations truncated here]")
    return "\n".join(result)
