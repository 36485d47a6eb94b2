"""Every setting in one place, read from the environment (prefix ``DEV_SERVER_``) and an
optional ``.env`` at the package root. Nothing else in the code reads ``os.environ`` for
configuration; the settings object is built once and passed into ``create_app``.
"""

from __future__ import annotations

from functools import cached_property
from pathlib import Path
from typing import Literal

from pydantic import Field, ValidationError
from pydantic_settings import BaseSettings, SettingsConfigDict

from app import paths

ENV_PREFIX = "DEV_SERVER_"


class SettingsError(Exception):
    """Invalid configuration; the message is one line naming the variable."""


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix=ENV_PREFIX, extra="ignore", frozen=True, populate_by_name=True)

    data_dir: Path | None = Field(None, description="Directory of the databases (default <package root>/.temp)")
    db_url: str | None = Field(None, description="Conversation DB: file:PATH (default file:<data dir>/dev-server.db)")
    observability_url: str | None = Field(
        None, description="Traces DB: file:PATH (default file:<data dir>/observability.duckdb)"
    )
    host: str = Field("127.0.0.1", description="Interface both processes listen on")
    gateway_port: int = Field(8787, ge=0, le=65535, description="Port of the gateway (chat over SSE)")
    studio_port: int = Field(4111, ge=0, le=65535, description="Port of the studio (Mastra REST + UI)")
    log_level: Literal["debug", "info", "warning", "error"] = Field("info", description="Log level")
    busy_timeout_ms: int = Field(5000, ge=0, description="SQLite busy_timeout for concurrent writers")
    max_body_bytes: int = Field(4_500_000, ge=1024, description="Largest accepted request body")
    local_model_only: bool = Field(
        False, description="Answer every agent with the built-in local model, even when provider keys are set"
    )
    studio_ui_dir: Path | None = Field(
        None, description="Directory of the Studio web build (default <package root>/studio-ui, made by make studio-ui)"
    )
    environment: str = Field("development", description="deployment.environment of spans and logs")
    telemetry: bool = Field(True, description="Record spans and logs of agent runs")
    telemetry_queue_size: int = Field(10_000, ge=100, description="Spans (and logs) kept while the receiver is down")
    trace_retention_days: int | None = Field(None, ge=1, description="Drop spans and logs older than this (studio)")
    # The standard OpenTelemetry variables, read here so nothing else reads the environment:
    # when one is set, the gateway's exporters use it instead of the studio's receiver.
    otel_endpoint: str | None = Field(None, validation_alias="OTEL_EXPORTER_OTLP_ENDPOINT")
    otel_traces_endpoint: str | None = Field(None, validation_alias="OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
    otel_logs_endpoint: str | None = Field(None, validation_alias="OTEL_EXPORTER_OTLP_LOGS_ENDPOINT")
    auth_tokens: str | None = Field(
        None, description="Comma-separated token=principal pairs; when set, auth is on (Bearer tokens)"
    )

    @classmethod
    def load(cls, env_file: Path | None = None) -> "Settings":
        if env_file is None:
            root = paths.find_package_root()
            env_file = root / ".env" if root else None
        try:
            return cls(_env_file=env_file if env_file and env_file.is_file() else None)
        except ValidationError as exc:
            raise SettingsError(_one_line(exc)) from None

    @cached_property
    def resolved_data_dir(self) -> Path:
        return paths.resolve_data_dir(self.data_dir)

    @cached_property
    def default_db_url(self) -> str:
        return paths.database_url(self.db_url, self.resolved_data_dir, "dev-server.db")

    @cached_property
    def observability_db_url(self) -> str:
        return paths.database_url(self.observability_url, self.resolved_data_dir, "observability.duckdb")

    @cached_property
    def resolved_studio_ui_dir(self) -> Path | None:
        if self.studio_ui_dir is not None:
            return self.studio_ui_dir.expanduser().resolve()
        root = paths.find_package_root()
        return root / "studio-ui" if root else None

    def port_for(self, role: str) -> int:
        return self.gateway_port if role == "gateway" else self.studio_port


def _one_line(exc: ValidationError) -> str:
    error = exc.errors()[0]
    field = str(error["loc"][0]) if error["loc"] else "?"
    value = error.get("input")
    return f"invalid setting {ENV_PREFIX}{field.upper()}={value!r}: {error['msg']}"
