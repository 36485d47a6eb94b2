"""Wiring in one pass (``dev_server.factory``): ``create_app`` builds every part from what
it built before, nothing is set on a part afterwards, and the lifespan opens the parts in
order and closes them in reverse, the stores last."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from dev_server.factory import create_app
from dev_server.llm.scripted import ScriptedModel
from dev_server.settings import Settings
from tests.kit.local_http import local_http
from tests.support import LiveApp


def test_services_are_built_once_and_never_changed(settings: Settings) -> None:
    app = create_app("gateway", settings.model_copy(update={"telemetry": True}), llm=ScriptedModel())
    services = app.state.services
    with pytest.raises(dataclasses.FrozenInstanceError):
        services.telemetry = None  # type: ignore[misc]
    # the runner got the telemetry's tracer when it was built, not from the lifespan later
    assert services.telemetry is not None and services.runner.tracer is services.telemetry.tracer
    assert services.turns.runner is services.runner and services.llm is services.runner.llm


def test_the_lifespan_opens_in_order_and_closes_in_reverse_with_the_stores_last(data_dir: Path) -> None:
    closed: list[str] = []

    class Recording(ScriptedModel):
        async def aclose(self) -> None:
            # the stores are still open when the model client closes (they close last)
            closed.append(f"model client (stores open: {services.storage.default.is_open})")

    app = create_app("gateway", Settings(data_dir=data_dir, telemetry=False), llm=Recording())
    services = app.state.services
    assert not services.storage.default.is_open  # building an app does no I/O
    with LiveApp(app) as live:
        assert local_http.get(f"{live.url}/health").json()["models"]["ready"] in (True, False)
        assert services.storage.default.is_open
    assert closed == ["model client (stores open: True)"] and not services.storage.default.is_open
