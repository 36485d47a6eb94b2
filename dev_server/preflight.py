"""What a process checks before it binds its port: settings whose mistake would otherwise
show only later, as a server open to anyone, or as every turn (or every OM cycle) failing.

Each failure is a ``SettingsError`` whose one line names the setting; ``dev_server.__main__``
prints it as ``error: ...`` and exits 2. What a setting alone can tell (types, ranges,
database URL schemes, token pairs, ``DEV_SERVER_AUTH`` against the tokens) fails earlier,
in ``Settings.load``. These checks need more: the host the process will listen on, the
agents it runs, and which model providers exist.

- **Exposure** (docs/install.md#listening-beyond-this-machine). Listening on anything but a
  loopback address without auth tokens refuses to start unless ``DEV_SERVER_AUTH=off`` says
  so (as Jupyter refuses without a token): without auth every caller is the same anonymous
  user of the ``ai-chat`` resource, so anyone who reaches the port reads and writes every
  conversation and its working memory.
- **Agents.** A setting that names agents names agents this process runs, of the kind it
  applies to: ``DEV_SERVER_AGENT_MODELS`` any agent, ``DEV_SERVER_WORKING_MEMORY`` and
  ``DEV_SERVER_SEMANTIC_RECALL`` agents with memory, ``DEV_SERVER_AGENT_OM_MODELS`` and a
  ``DEV_SERVER_OM_AGENTS`` that was set agents with Observational Memory. (An app built in a
  process of one's own, ``create_app``, logs the same as warnings: ``dev_server.agents.registry``.)
- **Models.** Every model id a setting names (``DEV_SERVER_MODEL``, ``DEV_SERVER_AGENT_MODELS``,
  ``DEV_SERVER_OM_MODEL``, ``DEV_SERVER_AGENT_OM_MODELS``, the models of
  ``DEV_SERVER_OM_OPTIONS``, ``DEV_SERVER_EMBEDDER``) has a provider that exists; its shape
  (``provider/model``) the settings check themselves. ``dev_server.llm.models.check_model_id``
  imports litellm only for a provider outside the table of ``dev_server.llm.known_providers``,
  which that model needs anyway.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable, Iterator

from dev_server.agents.definition import AgentDefinition
from dev_server.llm.models import check_model_id
from dev_server.om.options.models import ModelByInputTokens, ModelChoice, parse_model_choice
from dev_server.settings import Settings, SettingsError


def preflight(settings: Settings, host: str, definitions: Iterable[AgentDefinition]) -> None:
    """SettingsError (one line naming the setting) for the first problem found."""
    check_exposure(settings, host)
    check_agent_names(settings, tuple(definitions))
    check_models(settings)


def is_loopback(host: str) -> bool:
    """Whether ``host`` is reachable from this machine only. A name other than ``localhost``
    may resolve to anything, and ``""``/``0.0.0.0``/``::`` are every interface."""
    if host.strip().lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip().strip("[]")).is_loopback
    except ValueError:
        return False


def check_exposure(settings: Settings, host: str) -> None:
    if settings.auth_tokens or settings.auth == "off" or is_loopback(host):
        return
    raise SettingsError(
        f"refusing to listen on {host or 'every interface'} without auth: anyone who reaches it would read and "
        "write every conversation; set DEV_SERVER_AUTH_TOKENS=token=principal,... or DEV_SERVER_AUTH=off")


def check_agent_names(settings: Settings, definitions: tuple[AgentDefinition, ...]) -> None:
    memories = {d.id: d.memory_options() for d in definitions}
    everyone = list(memories)
    with_memory = [agent_id for agent_id, options in memories.items() if options is not None]
    with_om = [agent_id for agent_id, options in memories.items() if options is not None and options.om is not None]
    om = "with Observational Memory"
    named = [("DEV_SERVER_AGENT_MODELS", settings.agent_models or {}, everyone, ""),
             ("DEV_SERVER_WORKING_MEMORY", settings.working_memory_agents, with_memory, "with memory"),
             ("DEV_SERVER_SEMANTIC_RECALL", settings.semantic_recall_agents, with_memory, "with memory"),
             ("DEV_SERVER_AGENT_OM_MODELS", settings.agent_om_models or {}, with_om, om)]
    if "om_agents" in settings.model_fields_set:  # its default, chat-agent, may name no agent of the user's
        named.append(("DEV_SERVER_OM_AGENTS", settings.om_agent_ids, with_om, om))
    for variable, agent_ids, known, kind in named:
        for agent_id in sorted(set(agent_ids) - set(known)):
            agents = f"agents {kind}".rstrip()
            raise SettingsError(f"invalid setting {variable}: {agent_id!r} is not one of the {agents} here "
                                f"({', '.join(known) or 'none'})")


def check_models(settings: Settings) -> None:
    for variable, mastra_id in model_settings(settings):
        try:
            check_model_id(mastra_id)
        except ValueError as exc:
            raise SettingsError(f"invalid setting {variable}: {exc}") from None


def model_settings(settings: Settings) -> Iterator[tuple[str, str]]:
    """(setting, model id) for every model id the settings name (``default`` is the engine's own)."""
    yield "DEV_SERVER_MODEL", settings.model
    for agent_id, model in (settings.agent_models or {}).items():
        yield f"DEV_SERVER_AGENT_MODELS ({agent_id})", model
    if settings.om_model and settings.om_model != "default":
        yield "DEV_SERVER_OM_MODEL", settings.om_model
    for agent_id, model in (settings.agent_om_models or {}).items():
        if model != "default":
            yield f"DEV_SERVER_AGENT_OM_MODELS ({agent_id})", model
    options = settings.om_options or {}
    for path, value in (("model", options.get("model")),
                        ("observation.model", (options.get("observation") or {}).get("model")),
                        ("reflection.model", (options.get("reflection") or {}).get("model"))):
        if value is not None:  # a shape the settings already accepted: parsing cannot fail here
            for mastra_id in _ids(parse_model_choice(path, value)):
                yield f"DEV_SERVER_OM_OPTIONS ({path})", mastra_id
    yield "DEV_SERVER_EMBEDDER", settings.embedder


def _ids(choice: ModelChoice) -> Iterator[str]:
    for candidate in choice.candidates:
        if isinstance(candidate.model, ModelByInputTokens):
            yield from (model for _, model in candidate.model.tiers)
        else:
            yield candidate.model
