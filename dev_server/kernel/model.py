"""The model port: plain values that cross the model seam, and the client protocol.

The loop, the memory features and the tests speak only these types; nothing here knows
about litellm, so the rest of the app can be read (and faked) without it. A stream from
``LLMClient.stream`` is zero or more ``TextDelta`` / ``ReasoningDelta`` / ``ToolCallDelta``
(a tool call's argument text as it streams), then the step's ``ToolCall``s (assembled from
those deltas, in index order), then exactly one ``Finish``.

``LLMClient`` is everything the app asks of its model layer, so nothing probes a client
for what it can do: the loop and the memory features call ``resolve`` and ``stream``, the
app's lifespan ``warm_up`` and ``aclose``, ``/health`` ``status``, semantic recall
``embedder``. ``dev_server.llm.base.ModelClientBase`` gives a client that needs no
warm-up, no closing and the built-in embedder those as defaults.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    import numpy as np

# The model of an agent whose code names none (the built-in agents), unless DEV_SERVER_MODEL says otherwise.
DEFAULT_AGENT_MODEL = "openai/gpt-4o-mini"


@dataclass(frozen=True)
class ModelRequest:
    """One call to a model.

    ``model`` is the ``ResolvedModel`` the turn resolved (once), or Mastra's
    ``provider/model`` form (``openai/gpt-4o-mini``, ``local/echo``), resolved by the client;
    ``messages`` are OpenAI-style ``{"role": ..., "content": ...}`` dicts, ``content`` a
    string or a list of OpenAI content parts (``text``, ``image_url``, ``file``).
    """

    model: ResolvedModel | str
    messages: list[dict[str, Any]]
    temperature: float | None = None
    max_tokens: int | None = None
    tools: tuple[dict[str, Any], ...] = ()  # OpenAI function tools: {type: "function", function: {...}}
    options: dict[str, Any] | None = None  # more litellm parameters (top_p, stop, provider options ...)
    retries: int | None = None  # retries of this call (retryable errors only); None: the client's


@dataclass(frozen=True)
class TextDelta:
    """A piece of the assistant's text, in stream order."""

    text: str


@dataclass(frozen=True)
class ReasoningDelta:
    """A piece of the model's reasoning (litellm's ``reasoning_content``)."""

    text: str


@dataclass(frozen=True)
class ToolCallDelta:
    """A piece of a tool call's argument text; ``call_id`` and ``name`` are the call's own
    (the final ``ToolCall`` has the same id), ``delta`` may be empty on the first piece."""

    call_id: str
    name: str
    delta: str


@dataclass(frozen=True)
class ToolCall:
    """A complete tool call the model asked for; ``arguments`` is its raw JSON text."""

    id: str
    name: str
    arguments: str


@dataclass(frozen=True)
class Usage:
    input_tokens: int
    output_tokens: int
    reasoning_tokens: int = 0  # of output_tokens, when the provider reports them
    cached_input_tokens: int = 0  # of input_tokens, read from the provider's prompt cache


@dataclass(frozen=True)
class Finish:
    """The last item of every stream (AI SDK finish reasons, hyphenated).

    ``LLMClient.stream`` never yields ``"error"`` (it raises ``ModelProviderError``); the
    value exists for the route, which reports an interrupted stream with it.
    """

    finish_reason: str
    usage: Usage


@dataclass(frozen=True)
class ResolvedModel:
    """Where a Mastra model id will actually be sent.

    ``provider``/``model_id`` are the two halves of ``mastra_id``; ``litellm_model`` is what
    litellm is called with. ``is_local`` is true when the built-in offline model answers
    (asked for as ``local/...``, forced, or because the provider has no API key); responses
    must then be labelled as coming from the local model. ``reason`` says why in a few
    words, never a value (``OPENAI_API_KEY not set``, ``configured, custom base URL``);
    ``missing`` names the variables the provider needs that are not set; ``vision`` /
    ``pdf_input`` are what litellm's model map says the model accepts (the local model
    accepts both); ``capabilities_known``: the model is in that map (else both are False
    for want of knowing, not because the model refuses attachments).
    """

    mastra_id: str
    provider: str
    model_id: str
    litellm_model: str
    is_local: bool
    reason: str = ""
    missing: tuple[str, ...] = ()
    vision: bool = False
    pdf_input: bool = False
    capabilities_known: bool = False

    def describe(self) -> str:
        """One line for logs: ``local model (OPENAI_API_KEY not set)`` / ``openai/gpt-4o-mini``."""
        if self.is_local:
            return f"local model ({self.reason})" if self.reason else "local model"
        if self.missing:
            return f"error: {self.mastra_id} cannot be called ({self.reason}; DEV_SERVER_LOCAL_FALLBACK=false)"
        return self.litellm_model


ModelEvent = TextDelta | ReasoningDelta | ToolCallDelta | ToolCall | Finish


class Embedder(Protocol):
    """Who turns texts into vectors for semantic recall: one unit vector per text (a float32 matrix)."""

    id: str  # the Mastra id asked for
    answered_by: str  # what really embeds (``local/...`` for the built-in model)
    is_local: bool
    chunk_chars: int

    @property
    def key(self) -> str: ...

    @property
    def dimensions(self) -> int | None: ...

    async def prepare(self) -> None:
        """Make ready what can be checked before the first text (a local model's file); raises if it cannot work."""
        ...

    async def embed(self, texts: list[str]) -> np.ndarray: ...


class LLMClient(Protocol):
    """What answers a model call (the model id resolved, then one streamed step), and what
    the app's lifespan, ``/health`` and semantic recall ask of the model layer."""

    async def resolve(self, mastra_id: str) -> ResolvedModel: ...

    def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]: ...

    async def warm_up(self) -> None:
        """Pay the start-up cost (imports, the local model) before the first call does."""
        ...

    def status(self) -> dict[str, Any]:
        """``/health``'s ``models``: at least ``ready``, whether the warm-up has run."""
        ...

    async def embedder(self, mastra_id: str) -> Embedder:
        """Who embeds for ``mastra_id``."""
        ...

    def embeds_locally(self, mastra_id: str) -> bool | None:
        """Whether the built-in local embedder will answer for ``mastra_id``, when that is
        known without importing a provider library (None: not known until then)."""
        ...

    async def aclose(self) -> None:
        """At the app's shutdown: close what the client holds open (provider connections)."""
        ...
