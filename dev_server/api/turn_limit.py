"""The turn rate limit (``DEV_SERVER_TURN_RATE_LIMIT`` turns per ``DEV_SERVER_TURN_RATE_WINDOW_S``).

Every route that starts a turn (the gateway's chats, the Studio's ``stream``,
``stream-until-idle``, ``generate`` and ``send-message``) depends on ``dev_server.api.deps.LimitTurns``,
which counts the request against its caller before anything else happens: the
authenticated principal, or without auth the client address (behind a proxy, the one its
``X-Forwarded-For`` names when ``DEV_SERVER_FORWARDED_ALLOW_IPS`` trusts it). Past the limit
the answer is ``429 {"error": ...}`` with ``Retry-After`` (seconds until the window ends) and
nothing is stored or run.

The counters are rows in the database (``dev_server.storage.rate_windows``), not process memory,
so the limit is the same whichever worker, replica or process (gateway or studio) a turn
reaches: one budget per caller. That costs one small write transaction per turn, next to
the several a turn already makes (its lease, its messages); off by default, so ``make
dev`` never pays it.
"""

from __future__ import annotations

import math

from dev_server.kernel.errors import TooManyRequests
from dev_server.storage.rate_windows import RateWindows


class TurnLimit:
    def __init__(self, windows: RateWindows, limit: int, window_s: float) -> None:
        self.windows = windows
        self.limit = limit
        self.window_s = window_s

    async def take(self, caller: str) -> None:
        """Count a turn of ``caller``; ``TooManyRequests`` past the limit."""
        hit = await self.windows.hit(f"turns:{caller}", self.limit, max(1, round(self.window_s * 1000)))
        if not hit.allowed:
            retry_s = max(1, math.ceil((hit.window_end_ms - self.windows.clock_ms()) / 1000))
            raise TooManyRequests(f"Too many turns: at most {self.limit} every {self.window_s:g} s; "
                                  f"retry in {retry_s} s", retry_after_s=retry_s)
