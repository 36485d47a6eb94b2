"""When buffered work activates below its threshold: ``activateAfterIdle`` and
``activateOnProviderChange``, where Mastra reads them (docs/observational-memory.md#cold-cache).

They are given at three places: the top level, ``observation`` and ``reflection``. Which of
them is in force depends on who runs OM, as in Mastra:

* an agent's memory (Mastra's ``new Memory(...)``): the top-level values, for observations
  only. ``observation.*`` and ``reflection.*`` are checked and have no effect (Mastra's
  ``Memory`` does not pass them on);
* the standalone ``ObservationalMemory`` (``dev_server.om.manual``): ``observation.*``,
  falling back to the top-level values (``false`` turns an inherited one off), for
  observations; ``reflection.*`` for a buffered reflection (reflections never inherit).

``ObservationalMemoryOptions.observation_triggers`` / ``reflection_triggers`` give the values
in force. ``activateAfterIdle`` is milliseconds, a duration (``"5m"``, ``"1hr"``, ``"90s"``),
``"auto"`` (the actor's provider's prompt-cache lifetime, ``dev_server.om.engine.idle``) or
``false``.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

IdleSetting = int | Literal["auto"] | None  # resolved activateAfterIdle: milliseconds, "auto", or off
Fail = Callable[[str, str], ValueError]

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([a-z]+)\s*$")
_UNIT_MS = {**dict.fromkeys(("ms", "msec", "msecs", "millisecond", "milliseconds"), 1),
            **dict.fromkeys(("s", "sec", "secs", "second", "seconds"), 1000),
            **dict.fromkeys(("m", "min", "mins", "minute", "minutes"), 60_000),
            **dict.fromkeys(("h", "hr", "hrs", "hour", "hours"), 3_600_000),
            **dict.fromkeys(("d", "day", "days"), 86_400_000)}  # days: ours, Mastra stops at hours


@dataclass(frozen=True)
class Triggers:
    """What activates buffered work early: idle time (None: never) and a new actor model."""

    after_idle: IdleSetting = None
    on_provider_change: bool = False


NO_TRIGGERS = Triggers()


def parse_idle(name: str, value: Any, fail: Fail) -> IdleSetting:
    """``activateAfterIdle``: milliseconds (0 and up, as in Mastra), a duration, ``"auto"``,
    or false/None (off)."""
    if value is None or value is False:
        return None
    if value == "auto":
        return "auto"
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        if not value >= 0 or value == float("inf"):
            raise fail(name, f"must be a number of milliseconds (0 or more), not {value!r}")
        return int(value)
    if isinstance(value, str):
        match = _DURATION.match(value.lower())
        if match and match.group(2) in _UNIT_MS:
            return int(float(match.group(1)) * _UNIT_MS[match.group(2)])
    raise fail(name, f"must be milliseconds, a duration like '5m' or '1hr', 'auto' or false, not {value!r}")


def parse_flag(name: str, value: Any, fail: Fail) -> bool | None:
    """``activateOnProviderChange``: true, false, or None (not given)."""
    if value is not None and not isinstance(value, bool):
        raise fail(name, "must be true or false")
    return value


def top_triggers(given: dict[str, Any], fail: Fail) -> Triggers:
    return Triggers(parse_idle("activateAfterIdle", given.get("activateAfterIdle"), fail),
                    bool(parse_flag("activateOnProviderChange", given.get("activateOnProviderChange"), fail)))


def section_triggers(section: str, given: dict[str, Any], fallback: Triggers, fail: Fail) -> Triggers:
    """``observation.*`` (``fallback``: the top level's) or ``reflection.*`` (``fallback``:
    none): a key given here wins, ``false`` included."""
    idle = fallback.after_idle
    if "activateAfterIdle" in given and given["activateAfterIdle"] is not None:
        idle = parse_idle(f"{section}.activateAfterIdle", given["activateAfterIdle"], fail)
    change = parse_flag(f"{section}.activateOnProviderChange", given.get("activateOnProviderChange"), fail)
    return Triggers(idle, fallback.on_provider_change if change is None else change)
