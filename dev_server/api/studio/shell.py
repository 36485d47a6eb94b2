"""Routes the Studio shell and its pages call (Mastra's Studio REST API: Studio shell, other shell routes).

Most are features this server does not have (workflows, MCP, voice, datasets, experiments,
stored prompt blocks, ...): they answer the valid empty body Mastra's own server gives with
no data, because a 404 here means an error screen ("Failed to load ...") or a refetch storm
in the Studio. Their paging parameters are read as Mastra reads them (non-negative
integers, echoed back; anything else a 400). ``system/packages`` advertises what we do have.
Which page calls what, and where the answers differ from Mastra's: docs/studio.md#pages,
docs/studio.md#differences-from-mastra.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fastapi import APIRouter

from dev_server.api.deps import MastraQuery, ServicesDep, StorageDep
from dev_server.api.query import Query
from dev_server.kernel.errors import invalid

router = APIRouter(prefix="/api")

PROMPT_BLOCK_STATUSES = ("draft", "published", "archived")
EXPERIMENT_TARGET_TYPES = ("agent", "workflow", "scorer", "processor")


def _paging(query: Query, default_per_page: int) -> tuple[int, int]:
    return query.int("page", 0), query.int("perPage", default_per_page)


def _empty_page(page: int, per_page: int) -> dict[str, Any]:
    return {"total": 0, "page": page, "perPage": per_page, "hasMore": False}


def _one_of(query: Query, name: str, allowed: tuple[str, ...]) -> None:
    value = query.str(name)
    if value is not None and value not in allowed:
        raise invalid("query", name, f"must be one of {', '.join(allowed)}")


@router.get("/auth/capabilities")
async def auth_capabilities(services: ServicesDep) -> dict[str, Any]:
    # Authentication itself happened before this route (dev_server.auth.AuthMiddleware).
    return {"enabled": services.auth_enabled, "login": None}


@router.get("/auth/me")
async def auth_me() -> None:
    return None


def installed_packages(ui_dir: Path | None) -> list[dict[str, str]]:
    """The Mastra packages that run here, as Mastra's ``{name, version}`` list: the Studio
    build this process serves (``make studio-ui`` writes ``mastra@<version>`` into its
    VERSION file), none without one. Only npm packages belong in it: the Studio looks each
    name up on the npm registry to flag updates, so this server (no npm package) is not
    listed; /health and /openapi.json give its version."""
    try:
        marker = (ui_dir / "VERSION").read_text(encoding="utf-8").strip() if ui_dir is not None else ""
    except OSError:
        return []
    name, at, version = marker.rpartition("@")
    return [{"name": name, "version": version}] if at and name and version else []


@router.get("/system/packages")
async def system_packages(services: ServicesDep, storage: StorageDep) -> dict[str, Any]:
    settings = services.settings
    return {
        "packages": installed_packages(settings.resolved_studio_ui_dir),
        # As `mastra dev` says it: the Studio shows its version badge (the first package's) only then.
        "isDev": settings.environment == "development",
        "cmsEnabled": False,
        "liveKitConnectionRouteEnabled": False,
        "observabilityEnabled": True,
        "storageType": "LibSQLStore",
        "observabilityStorageType": "DuckDBStore",
        "observabilityStorageCapabilities": {
            "metrics": storage.has("observability"),
            "logs": storage.has("observability"),
            "traceQueryDiscovery": storage.has("observability"),
        },
    }


_EMPTY_OBJECTS = ("/workflows", "/workflows/run-counts", "/processors", "/scores/scorers")  # /tools: tools.py


def _empty_object() -> dict[str, Any]:
    return {}


for _path in _EMPTY_OBJECTS:
    router.add_api_route(_path, _empty_object, methods=["GET"])


@router.get("/mcp/v0/servers")
async def mcp_servers() -> dict[str, Any]:
    return {"servers": [], "total_count": 0, "next": None}


@router.get("/workspaces")
async def workspaces() -> dict[str, Any]:
    return {"workspaces": []}


@router.get("/vectors")
async def vectors() -> dict[str, Any]:
    return {"vectors": []}


@router.get("/embedders")
async def embedders() -> dict[str, Any]:
    return {"embedders": []}


@router.get("/editor/builder/settings")
async def builder_settings() -> dict[str, Any]:
    return {"enabled": False, "modelPolicy": {"active": False}}


@router.get("/editor/builder/models/available")
async def builder_models() -> dict[str, Any]:
    return {"providers": []}


@router.get("/channels/platforms")
async def channel_platforms() -> list[Any]:
    return []


@router.get("/experiments/review-summary")
async def experiments_review_summary() -> dict[str, Any]:
    return {"counts": []}


@router.get("/datasets")
async def datasets(query: MastraQuery) -> dict[str, Any]:
    return {"datasets": [], "pagination": _empty_page(*_paging(query, 10))}


@router.get("/experiments")
async def experiments(query: MastraQuery) -> dict[str, Any]:
    _one_of(query, "targetType", EXPERIMENT_TARGET_TYPES)
    return {"experiments": [], "pagination": _empty_page(*_paging(query, 10))}


@router.get("/stored/prompt-blocks")
async def stored_prompt_blocks(query: MastraQuery) -> dict[str, Any]:
    _one_of(query, "status", PROMPT_BLOCK_STATUSES)
    return {"promptBlocks": [], **_empty_page(*_paging(query, 100))}
