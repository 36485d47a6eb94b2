"""Every setting in one place, read from the environment (prefix ``DEV_SERVER_``) and an
optional ``.env``: at the package root in a source checkout, else (an installed ``dev-server``)
in the working directory, as other development servers read theirs. Nothing else in the code
reads ``os.environ`` for configuration; the settings object is built once and passed into
``create_app``.
"""

from __future__ import annotations

import os
from functools import cached_property
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit

from pydantic import Field, ValidationError, ValidationInfo, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from dev_server import paths
from dev_server.auth_tokens import service_token, token_principals
from dev_server.kernel.model import DEFAULT_AGENT_MODEL
from dev_server.llm.models import split_model_id
from dev_server.om.options.config import merged_options, observational_memory_options
from dev_server.provider_env import collect_provider_env
from dev_server.recall.options import semantic_recall_options

ENV_PREFIX = "DEV_SERVER_"
class SettingsError(Exception):
    """Invalid configuration; the message is one line naming the variable."""


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix=ENV_PREFIX, extra="ignore", frozen=True, populate_by_name=True)

    agents: str | None = Field(
        None, description="Your own agents instead of the built-in ones: an import string (mypkg.agents, or"
        " mypkg.agents:name) or a .py file; the --agents option sets it too (README.md, Your own agent)")
    data_dir: Path | None = Field(None, description="Directory of the databases (default <package root>/.temp in a"
                                  " source checkout, else the per-user data directory)")
    db_url: str | None = Field(None, description="Conversation DB: file:PATH (default file:<data dir>/dev-server.db),"
                               " or a libsql server: http(s)://host:port, libsql://host, ws(s)://")
    db_auth_token: str | None = Field(None, description="Bearer token for a libsql server that asks for one")
    db_timeout_s: float = Field(10.0, gt=0, description="A libsql server unanswered this long: 503")
    observability_url: str | None = Field(
        None, description="Traces DB: file:PATH (default file:<data dir>/observability.duckdb)"
    )
    host: str = Field("127.0.0.1", description="Interface both processes listen on")
    gateway_port: int = Field(8787, ge=0, le=65535, description="Port of the gateway (chat over SSE)")
    studio_port: int = Field(4111, ge=0, le=65535, description="Port of the studio (Mastra REST + UI)")
    log_level: Literal["debug", "info", "warning", "error"] = Field("info", description="Log level")
    busy_timeout_ms: int = Field(5000, ge=0, description="SQLite busy_timeout for concurrent writers")
    db_write_group: int = Field(64, ge=1, le=1000, description="Writes queued while the writer is busy that share"
                                " one transaction, at most (group commit); 1: one transaction per write")
    max_body_bytes: int = Field(4_500_000, ge=1024, description="Largest accepted request body")
    local_model_only: bool = Field(
        False, description="Answer every agent with the built-in local model, even when provider keys are set"
    )
    studio_ui_dir: Path | None = Field(
        None, description="Directory of the Studio web build (default <package root>/studio-ui in a source checkout,"
        " else studio-ui in the per-user data directory; fetched by dev-server studio-ui)"
    )
    environment: str = Field("development", description="deployment.environment of spans and logs")
    telemetry: bool = Field(True, description="Record spans and logs of agent runs")
    trace_input_chars: int = Field(32_000, ge=0, description="Characters of text a model generation's span records "
                                   "of its input (the system messages, then the newest messages, each within "
                                   "half); 0: all of it")
    telemetry_queue_size: int = Field(10_000, ge=100, description="Spans (and logs) kept while the receiver is down")
    telemetry_queue_mb: int = Field(64, ge=1, description="Megabytes of spans (and of logs) kept while the receiver "
                                                         "is down or behind; past either bound the oldest go")
    trace_retention_days: int | None = Field(None, ge=1, description="Drop spans and logs older than this (studio)")
    trace_memory_mb: int = Field(0, ge=0, description="Memory the studio's observability store (DuckDB) may use; "
                                 "0: what its key indexes need (64 bytes a stored span) plus 32 MB (twice that, "
                                 "up to 1 GB, after a checkpoint needed more), followed as they grow. The indexes "
                                 "stay in memory: without trace retention a fixed limit ends ingestion once they "
                                 "outgrow it")
    studio_url: str | None = Field(
        None, description="Where the gateway reaches the studio's OTLP receivers (default http://<host>:<studio port>)"
    )
    # The standard OpenTelemetry variables, read here so nothing else reads the environment:
    # when one is set, the gateway's exporters use it instead of the studio's receiver.
    otel_endpoint: str | None = Field(None, validation_alias="OTEL_EXPORTER_OTLP_ENDPOINT")
    otel_traces_endpoint: str | None = Field(None, validation_alias="OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
    otel_logs_endpoint: str | None = Field(None, validation_alias="OTEL_EXPORTER_OTLP_LOGS_ENDPOINT")
    auth_tokens: str | None = Field(
        None, description="Comma-separated token=principal pairs; when set, auth is on (Bearer tokens)"
    )
    auth: Literal["on", "off"] | None = Field(
        None, description="on: DEV_SERVER_AUTH_TOKENS must be set; off: no auth even on a non-loopback host, where"
        " a process without tokens otherwise refuses to start. Unset: on exactly when tokens are set")

    @field_validator("auth_tokens")
    @classmethod
    def _tokens_are_pairs(cls, value: str | None) -> str | None:
        if value is not None:
            token_principals(value)  # ValueError: what is wrong, never the tokens themselves
        return value

    @field_validator("db_url")
    @classmethod
    def _db_url_is_supported(cls, value: str | None) -> str | None:
        if value is not None:
            paths.check_database_url(value, remote=True)
        return value

    @field_validator("observability_url")
    @classmethod
    def _observability_url_is_a_file(cls, value: str | None) -> str | None:
        if value is not None:
            paths.check_database_url(value, remote=False)
        return value

    @model_validator(mode="after")
    def _provider_base_urls_are_urls(self) -> Settings:
        for name, value in self.provider_env.items():
            if name.endswith(("_BASE_URL", "_API_BASE")):
                parts = urlsplit(value)
                if parts.scheme not in ("http", "https") or not parts.hostname:
                    raise ValueError(f"{name} must be an http:// or https:// URL (a provider's base URL)")
        return self

    @model_validator(mode="after")
    def _auth_mode_fits_the_tokens(self) -> Settings:
        if self.auth == "on" and not self.auth_tokens:
            raise ValueError("DEV_SERVER_AUTH=on needs DEV_SERVER_AUTH_TOKENS (token=principal pairs, comma-separated)")
        if self.auth == "off" and self.auth_tokens:
            raise ValueError("DEV_SERVER_AUTH=off contradicts DEV_SERVER_AUTH_TOKENS: unset one of them")
        return self
    # -- model providers (dev_server.llm) ----------------------------------------------------------
    local_fallback: bool = Field(
        True, description="Answer with the local model when an agent's provider is not configured; "
                          "false: such a turn fails with a 503 naming the missing variables")
    model_timeout_s: float = Field(60.0, gt=0, description="Timeout of each HTTP read from a model provider")
    model_first_token_timeout_s: float = Field(
        30.0, gt=0, description="Deadline for a provider's first text, per attempt (then a timeout error)")
    model_total_timeout_s: float = Field(
        300.0, gt=0, description="Deadline for a whole model call, retries included (then a timeout error)")
    model_retries: int = Field(
        1, ge=0, le=10, description="Retries of a call that failed (connection, 429, 5xx) before any text; "
                                    "the provider SDK's own retries are off")
    scripted_model: Path | None = Field(
        None, description="A JSON script (dev_server.llm.scripted): a scripted model answers the model calls "
                          "instead of the providers, for tests of a server process; never on unless set")
    provider_env: dict[str, str] = Field(
        default_factory=dict, exclude=True,
        description="Provider variables (*_API_KEY, *_API_BASE, OPENAI_BASE_URL, AWS_*, AZURE_*, VERTEXAI_*, ...) "
                    "from the .env and the environment (the environment wins); filled by load()")
    # The HTTP layer: CORS and connection reuse.
    cors_origins: str | None = Field(
        None, description="Origins that may read responses in a browser: comma-separated scheme://host[:port], "
        "or * (any origin, without credentials); default localhost, 127.0.0.1 and [::1] on any port"
    )
    workers: int | None = Field(
        None, ge=1, le=256, description="Gateway processes serving its port (default: one per core, os.cpu_count());"
        " the studio is always one process (it alone opens the DuckDB file)")
    keep_alive_s: int = Field(
        75, ge=1, le=3600, description="Seconds an idle keep-alive connection stays open (advertised in Keep-Alive)"
    )
    # Slow clients and floods (dev_server.connection_limits; the turn rate limit is dev_server.api.turn_limit).
    header_timeout_s: float = Field(
        10.0, gt=0, le=3600, description="A request's line and headers must arrive within this of the connection"
        " (or of its first byte after a keep-alive pause), else 408 and the connection is closed")
    body_timeout_s: float = Field(
        60.0, gt=0, le=3600, description="A request's whole body must arrive within this of its headers, else 408"
        " and the connection is closed")
    max_connections: int | None = Field(
        1000, ge=1, description="Connections (or running requests) one process serves; a request beyond them gets"
        " 503 with Retry-After. Unset (empty): no cap")
    forwarded_allow_ips: str = Field(
        "127.0.0.1,::1", description="Proxies trusted to name the client in X-Forwarded-For (the turn rate"
        " limit's key without auth): comma-separated addresses or networks, or * for any")
    turn_rate_limit: int | None = Field(
        None, ge=1, description="Turns each principal (without auth: each client address) may start per"
        " DEV_SERVER_TURN_RATE_WINDOW_S, counted in the database across processes; then 429. Unset: no limit")
    turn_rate_window_s: float = Field(60.0, gt=0, le=86400, description="The window of DEV_SERVER_TURN_RATE_LIMIT")

    @field_validator("max_connections", "turn_rate_limit", "scripted_model", "agents", "auth_tokens", "auth",
                     "db_url", "observability_url", mode="before")
    @classmethod
    def _empty_is_unset(cls, value: Any) -> Any:
        return None if isinstance(value, str) and not value.strip() else value

    @field_validator("cors_origins")
    @classmethod
    def _origins_are_origins(cls, value: str | None) -> str | None:
        if value is None or not value.strip():
            return None
        items = [item.strip().rstrip("/") for item in value.split(",") if item.strip()]
        if items != ["*"]:
            for item in items:
                scheme, sep, rest = item.partition("://")
                if scheme not in ("http", "https") or not sep or not rest or "/" in rest or "*" in rest:
                    raise ValueError(f"{item!r} is not an origin (scheme://host[:port]); * must stand alone")
        return ",".join(items)

    # Turns on one thread are serialised across processes by a lease row (dev_server.agents.turns).
    turn_wait_s: float = Field(
        30.0, gt=0, description="How long a turn waits for another turn on the same thread before a 409"
    )
    turn_lease_s: float = Field(
        15.0, gt=0, description="Expiry of a thread's turn lease, renewed while the reply streams; a killed"
        " process's lease is taken over after this"
    )
    checkpoint_interval_s: float = Field(
        1.0, gt=0, description="A streaming reply is saved at most this often, so a crash keeps what was streamed"
    )
    # Chat streams are recorded in the database while they run (dev_server.streaming.recorder).
    stream_resume: bool = Field(
        True, description="Record chat streams so GET /api/chat/{chatId}/stream resumes them on any process; a"
        " client that hangs up no longer stops its reply. false: a hang-up interrupts the reply, resume answers 204"
    )
    stream_retention_s: float = Field(
        30.0, gt=0, description="How long a finished chat stream's chunks are kept for a late resume"
    )
    stream_dead_after_s: float = Field(
        10.0, ge=0.5, description="A running chat stream whose producer has not written for this long is dead:"
        " resume says so, and its partial reply is rebuilt into the thread from its recorded frames"
    )

    working_memory: str | None = Field(
        None, description="Agents whose memory keeps a working memory: comma-separated agent ids, each optionally "
        "with :thread or :resource (the default), e.g. chat-agent,docs-agent:thread")

    @field_validator("working_memory")
    @classmethod
    def _working_memory_items(cls, value: str | None) -> str | None:
        if value is None or not value.strip():
            return None
        items = [item.strip() for item in value.split(",") if item.strip()]
        for item in items:
            agent, _, scope = item.partition(":")
            if not agent or scope not in ("", "thread", "resource"):
                raise ValueError(f"{item!r} is not <agent id> or <agent id>:thread|resource")
        return ",".join(items)

    semantic_recall: str | None = Field(
        None, description="Agents whose memory has semantic recall (off by default): comma-separated agent ids,"
        " each optionally with :thread or :resource (the default), e.g. chat-agent,docs-agent:thread")
    semantic_recall_options: dict[str, Any] | None = Field(
        None, description="Mastra's semanticRecall options as a JSON object, for every agent of"
        " DEV_SERVER_SEMANTIC_RECALL, e.g. {\"topK\": 6, \"messageRange\": {\"before\": 1, \"after\": 2}}")
    embedder: str = Field(
        "openai/text-embedding-3-small", description="Embedding model (Mastra id) of semantic recall; without its"
        " provider's key the built-in local embedder (all-MiniLM-L6-v2 on the CPU) embeds instead")

    @field_validator("semantic_recall")
    @classmethod
    def _semantic_recall_items(cls, value: str | None) -> str | None:
        return cls._working_memory_items(value)

    @model_validator(mode="after")
    def _semantic_recall_options_are_valid(self) -> Settings:
        if self.semantic_recall_options is not None:
            try:
                semantic_recall_options(self.semantic_recall_options)
            except ValueError as exc:
                raise ValueError(f"DEV_SERVER_SEMANTIC_RECALL_OPTIONS: {exc}") from None
        return self

    @property
    def semantic_recall_agents(self) -> dict[str, dict[str, Any]]:
        """Agent id -> its ``semanticRecall`` options object, from ``semantic_recall``."""
        found = {}
        for item in (self.semantic_recall or "").split(","):
            if item:
                agent, _, scope = item.partition(":")
                options = dict(self.semantic_recall_options or {})
                if scope:
                    options["scope"] = scope
                found[agent] = options
        return found

    # Observational Memory of the agents DEV_SERVER_OM_AGENTS names: dev_server.om.options.config's options.
    om_agents: str = Field(
        "chat-agent", description="Agents the DEV_SERVER_OM_* settings below apply to, over the Observational"
        " Memory options their code gives: comma-separated agent ids (default chat-agent, the built-in agent with OM;"
        " empty: none). Agents not named keep their code's options")
    om_enabled: bool = Field(
        True, description="Observational Memory on the agents of DEV_SERVER_OM_AGENTS (false: their last-messages"
        " window only)")
    om_message_tokens: int | None = Field(
        None, ge=1, description="Unobserved message tokens that trigger an observation (default 30000)")
    om_observation_tokens: int | None = Field(
        None, ge=1, description="Observation tokens that trigger a reflection (default 40000)")
    om_buffer_tokens: str | None = Field(
        None, description="Async buffering interval: a token count, a fraction of the message tokens, or false"
        " (default 0.2)")
    om_scope: Literal["thread", "resource"] | None = Field(
        None, description="OM record per thread (default) or resource")
    om_thread_title: bool = Field(
        False, description="The observer proposes each thread's title (observation.threadTitle), shown in the"
        " Studio's thread list")
    om_options: dict[str, Any] | None = Field(
        None, description="Any of Mastra's observationalMemory options as a JSON object, merged over the"
        " DEV_SERVER_OM_* values above, e.g. {\"activateAfterIdle\": \"5m\", \"temporalMarkers\": true}")
    # Models (docs/configuration.md#models): defaults fill in what an agent's code leaves open; the
    # per-agent mappings name agents and win over their code.
    model: str = Field(
        DEFAULT_AGENT_MODEL, description="The model of every agent whose code names none (the built-in agents"
        " name none), Mastra's provider/model form, e.g. anthropic/claude-haiku-4-5 or ollama/llama3.2")
    agent_models: dict[str, str] | None = Field(
        None, description="Agents' models over what their code says: a JSON object of agent id ->"
        " model, e.g. {\"support-agent\": \"ollama/llama3.2\"}")
    om_model: str | None = Field(
        None, description="The Observational Memory observer's and reflector's model of every agent whose code"
        " names none (default: google/gemini-2.5-flash when its key is set, else the agent's own model)")
    agent_om_models: dict[str, str] | None = Field(
        None, description="Agents' observer and reflector model over what their code says: a JSON"
        " object of agent id -> model")

    @field_validator("model", "om_model")
    @classmethod
    def _model_id(cls, value: str | None, info: ValidationInfo) -> str | None:
        if value is None or not value.strip():
            if info.field_name == "model":
                raise ValueError("must be a model id like 'openai/gpt-4o-mini'")
            return None
        return _checked_model_id(value, allow_default=info.field_name == "om_model")

    @field_validator("agent_models", "agent_om_models")
    @classmethod
    def _model_ids_by_agent(cls, value: dict[str, str] | None, info: ValidationInfo) -> dict[str, str] | None:
        if value is None:
            return None
        checked = {}
        for agent_id, model in value.items():
            if not agent_id.strip():
                raise ValueError("an agent id is empty")
            try:
                checked[agent_id] = _checked_model_id(model, allow_default=info.field_name == "agent_om_models")
            except ValueError as exc:
                raise ValueError(f"{agent_id!r}: {exc}") from None
        return checked

    @field_validator("om_agents")
    @classmethod
    def _agent_ids(cls, value: str) -> str:
        return ",".join(item.strip() for item in value.split(",") if item.strip())

    @property
    def om_agent_ids(self) -> frozenset[str]:
        """The agents the ``DEV_SERVER_OM_*`` settings apply to (``om_agents``)."""
        return frozenset(item for item in self.om_agents.split(",") if item)

    @field_validator("om_buffer_tokens")
    @classmethod
    def _buffer_tokens(cls, value: str | None) -> str | None:
        if value is None or not value.strip():
            return None
        value = value.strip().lower()
        if value != "false":
            try:
                float(value)
            except ValueError:
                raise ValueError(f"{value!r} is not a token count, a fraction or false") from None
        return value

    @field_validator("scripted_model")
    @classmethod
    def _script_is_valid(cls, value: Path | None) -> Path | None:
        if value is None:
            return None
        from dev_server.llm.scripted_file import load_script  # only when set

        load_script(value)  # ValueError: one line naming what is wrong
        return value.resolve()

    @model_validator(mode="after")
    def _om_options_are_valid(self) -> Settings:
        if self.observational_memory is not False:
            try:
                observational_memory_options(self.observational_memory)
            except ValueError as exc:
                raise ValueError(f"DEV_SERVER_OM_*: {exc}") from None
        return self

    @property
    def observational_memory(self) -> dict[str, Any] | Literal[False]:
        """The ``DEV_SERVER_OM_*`` settings as Mastra's options object, or False (off); the
        models are apart (``om_model``, ``agent_om_models``)."""
        if not self.om_enabled:
            return False
        options: dict[str, Any] = {}
        observation: dict[str, Any] = {}
        if self.om_scope:
            options["scope"] = self.om_scope
        if self.om_message_tokens:
            observation["messageTokens"] = self.om_message_tokens
        if self.om_buffer_tokens:
            number = None if self.om_buffer_tokens == "false" else float(self.om_buffer_tokens)
            observation["bufferTokens"] = False if number is None else int(number) if number >= 1 else number
        if self.om_thread_title:
            observation["threadTitle"] = True
        if observation:
            options["observation"] = observation
        if self.om_observation_tokens:
            options["reflection"] = {"observationTokens": self.om_observation_tokens}
        return merged_options(options, self.om_options or {})  # one level deep: observation / reflection merge

    @property
    def working_memory_agents(self) -> dict[str, str]:
        """Agent id -> working memory scope, from ``working_memory``."""
        found = {}
        for item in (self.working_memory or "").split(","):
            if item:
                agent, _, scope = item.partition(":")
                found[agent] = scope or "resource"
        return found

    @classmethod
    def load(cls, env_file: Path | None = None) -> Settings:
        if env_file is None:  # a source checkout's at its root; an installed command's in the working directory
            env_file = (paths.find_package_root() or Path.cwd()) / ".env"
        env_file = env_file if env_file and env_file.is_file() else None
        try:
            return cls(_env_file=env_file, provider_env=collect_provider_env(os.environ, env_file))
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
    def resolved_studio_ui_dir(self) -> Path:
        if self.studio_ui_dir is not None:
            return self.studio_ui_dir.expanduser().resolve()
        return paths.default_studio_ui_dir()

    @property
    def cors_origin_list(self) -> tuple[str, ...] | None:
        """The configured origins (``("*",)`` for any), or None for the local default."""
        return tuple(self.cors_origins.split(",")) if self.cors_origins else None

    def workers_for(self, role: str) -> int:
        """How many processes serve ``role``: ``workers`` (default one per core) for the
        gateway, always one for the studio."""
        if role != "gateway":
            return 1
        return self.workers or os.cpu_count() or 1

    def port_for(self, role: str) -> int:
        return self.gateway_port if role == "gateway" else self.studio_port


def otlp_target(settings: Settings, signal: str) -> tuple[str, dict[str, str] | None]:
    """The URL the gateway's ``signal`` (``traces`` or ``logs``) exporter posts to, and its headers.

    The standard variables win, as the OTLP exporter specification reads them: the
    per-signal ``OTEL_EXPORTER_OTLP_<SIGNAL>_ENDPOINT`` as is, else ``OTEL_EXPORTER_OTLP_ENDPOINT``
    plus ``/v1/<signal>``. They come from the settings (the environment or the .env), so a
    value in the .env is honoured too; the exporter would only look at the environment.
    Otherwise the studio's receiver, which with auth on wants the service token. Headers of
    None let the exporter read ``OTEL_EXPORTER_OTLP_HEADERS`` for a collector.
    """
    specific = settings.otel_traces_endpoint if signal == "traces" else settings.otel_logs_endpoint
    if specific:
        return specific, None
    if settings.otel_endpoint:
        return f"{settings.otel_endpoint.rstrip('/')}/v1/{signal}", None
    base = (settings.studio_url or f"http://{settings.host}:{settings.studio_port}").rstrip("/")
    headers = {"Authorization": f"Bearer {service_token(settings.auth_tokens)}"} if settings.auth_tokens else None
    return f"{base}/v1/{signal}", headers


def _checked_model_id(value: str, *, allow_default: bool = False) -> str:
    """``value`` stripped, if it is a model id (``provider/model``; ``default`` too where the
    engine has a default of its own); else a ValueError saying so."""
    value = value.strip()
    if allow_default and value == "default":
        return value
    split_model_id(value)
    return value


# Settings whose value an error message never repeats (a database URL can hold credentials).
_SECRETS = frozenset({"auth_tokens", "db_auth_token", "db_url", "observability_url"})


def _one_line(exc: ValidationError) -> str:
    error = exc.errors()[0]
    message = error["msg"].removeprefix("Value error, ")
    if not error["loc"]:  # a check across settings (the DEV_SERVER_OM_* options): its message names them
        return f"invalid setting: {message}"
    field = str(error["loc"][0])
    shown = "" if field in _SECRETS else f"={error.get('input')!r}"
    return f"invalid setting {ENV_PREFIX}{field.upper()}{shown}: {message}"
