"""``GET /health`` on both processes: public (no credential needed), cheap, always JSON.

It answers as soon as the port is open. ``status`` is ``"starting"`` while the models warm
up in the background (the local model run once, well under a second; plus litellm's import, 3-10 s,
when an agent's model needs litellm: a chat for it waits for that import), ``"ok"`` once a
chat is answered at once (also after a failed warm-up: then the first chat tries again),
``"unavailable"`` when the conversation store is not open. ``models.litellmLoaded`` says
whether this process has imported litellm (never, while every model answers locally). ``make dev``'s
banner, ``python -m dev_server health`` and the image's HEALTHCHECK (deploy/healthcheck.py) wait for
``"ok"``. ``background`` counts the process's background jobs (``dev_server.background``: queued,
running, failed, dropped); ``semanticRecall`` names the embedder in use and the index's
vectors, backlog (a backfill's progress) and failures.
Everything here is the answering process's own: with ``DEV_SERVER_WORKERS`` above one, the
gateway's ``worker`` says which one answered (``pid``, ``index`` of ``count``); the studio's
says it is always one process.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from dev_server import __version__
from dev_server.api.deps import Services, ServicesDep

router = APIRouter()


@router.get("/health")
async def health(services: ServicesDep) -> dict[str, Any]:
    storage = services.storage
    readiness = services.readiness
    return {
        "status": "unavailable" if not storage.default.is_open else "ok" if readiness.ready else "starting",
        "role": services.role,
        "version": __version__,
        "dataDir": str(services.settings.resolved_data_dir),
        "stores": storage.health(),
        "models": services.llm.status() | readiness.report(),
        "telemetry": services.telemetry.stats() if services.telemetry else None,
        "background": services.background.stats(),
        "worker": services.worker.report(services.role),
        "semanticRecall": await _recall(services),
    }


async def _recall(services: Services) -> dict[str, Any]:
    """The embedder in use, the index's size and backlog, the failures counted (provider down)."""
    index = services.semantic_index
    if index is None:
        return {"enabled": False, "embedder": None}
    try:
        return {"enabled": True, **await index.health()}
    except Exception as exc:  # the store is closing or busy: /health still answers
        return {"enabled": True, "error": f"{type(exc).__name__}: {exc}"}
