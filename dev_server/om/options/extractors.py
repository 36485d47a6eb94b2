"""Extractors: named values the observer or the reflector pulls out of what it reads.

``observation.extract`` and ``reflection.extract`` each take a list of extractors
(docs/observational-memory.md#extractors), as dicts with Mastra's keys or ``Extractor`` values:

* ``name``: its *slug* (read-only, derived as Mastra derives it: lower case, quotes dropped,
  every run of other characters one ``-``; it must start with a letter) is its XML tag and key;
* ``instructions``: a string, or a function of the run's ``ExtractorContext`` returning one;
* ``schema`` (optional): a JSON schema of an object, a Pydantic model class, or a function of
  the ``ExtractorContext`` returning either;
* ``includePreviousExtraction`` (default true): the last value is shown to the next run and
  to the actor;
* ``metadataKeyPath`` (default ``extracted.<slug>``): a dotted path under the thread's
  ``metadata.mastra.om``, or ``False``: the value is not kept there;
* ``onExtracted`` (optional): called with an ``ExtractedContext`` after the value is found
  and before it is kept; a returned value replaces it, ``None`` keeps it, a raise is an
  extraction failure (``dev_server.om.engine.extraction``).

Functions are Python's: they can be given only in an agent's Python definition, never in
the ``DEV_SERVER_OM_*`` settings. Without a schema an extractor is *inline*: the observer or
reflector writes it in its own answer, as a ``<slug>...</slug>`` section or inside an
``<extracted-values>`` JSON object (``take_inline_values``: the JSON first, then the last
section of each remaining slug). With one it runs as a follow-up call that must answer JSON
fitting the schema.

The built-ins are extractors too, made here: ``current-task``, ``suggested-response``,
``thread-title`` (``observation.threadTitle``) and ``working-memory``
(``observation.manageWorkingMemory``). Their slugs, and the XML tags OM's own format uses,
cannot name a user's extractor. Every check fails at construction with a ``ValueError``
naming the field.
"""

from __future__ import annotations

import inspect
import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from dev_server.kernel.prompt_marks import (
    EXTRACTOR_IDENTITY,
    SCHEMA_CLOSE,
    SCHEMA_OPEN,
    SOURCE_HEADING,
    THREAD_TITLE_SECTION,
)

CURRENT_TASK = "current-task"
SUGGESTED_RESPONSE = "suggested-response"
THREAD_TITLE = "thread-title"
WORKING_MEMORY = "working-memory"
BUILT_IN_KEYS = {CURRENT_TASK: "currentTask", SUGGESTED_RESPONSE: "suggestedResponse", THREAD_TITLE: "threadTitle"}
# Mastra's reserved tags, and OM's own tags here
RESERVED_SLUGS = frozenset({CURRENT_TASK, SUGGESTED_RESPONSE, THREAD_TITLE, WORKING_MEMORY, "observations",
                            "observation", "extracted-values", "thread", "message", "messages", "conversation",
                            "history", "system", "user", "assistant", "tool", "observation-group",
                            "system-reminder", "other-conversation", "observational-memory-instruction",
                            "working-memory-data", "working-memory-template"})
_EXTRACTOR_KEYS = {"name", "instructions", "schema", "includePreviousExtraction", "metadataKeyPath", "onExtracted"}
_REFUSED_KEYS = {
    "metadataKey": "is no longer an option: use metadataKeyPath (Mastra's name; false keeps the value out of "
                   "the thread's metadata)",
    "transform": "is no longer an option: use onExtracted (Mastra's name: it is given one ExtractedContext, "
                 "and a value it returns replaces the extracted one)",
    "slug": "is derived from name (read-only), as in Mastra",
    "mode": "is Mastra's hook extractor (mode: 'hook'), not supported here",
    "retryStructuredExtractionOnEmptyObject": "is Mastra's, not supported here: a schema extractor is asked once",
}
_EXTRACTED_VALUES = re.compile(r"<extracted-values>([\s\S]*?)</extracted-values>", re.I)
_METADATA_KEY = re.compile(r"^[A-Za-z0-9_-]+(?:\.[A-Za-z0-9_-]+)*$")
_QUOTES = "'\"`"


@dataclass(frozen=True)
class ExtractorContext:
    """What an extractor's ``instructions`` / ``schema`` function is given (Mastra's run
    context): who runs (``source``: ``"observer"`` | ``"reflector"``), for which thread and
    resource, the agent (its id; None on the standalone class) and its memory (the agent's
    ``Memory``; None on the standalone class). ``request_context`` is always None: requests
    here carry no request context."""

    source: str
    thread_id: str
    resource_id: str | None = None
    agent_id: str | None = None
    memory: Any = None
    request_context: Mapping[str, Any] | None = None


@dataclass(frozen=True)
class ExtractedContext(ExtractorContext):
    """What ``onExtracted`` is given: the run context, the extractor, the value found
    (``current``) and the last one kept (``previous``, when ``includePreviousExtraction``)."""

    extractor: Extractor | None = None
    current: Any = None
    previous: Any = None


SchemaSetting = dict[str, Any] | type | Callable[[ExtractorContext], Any] | None


@dataclass(frozen=True)
class Extractor:
    """One extractor (Mastra's ``new Extractor({...})``): give ``name``, ``instructions`` and
    what else it needs; ``slug`` is derived from the name."""

    name: str
    instructions: str | Callable[[ExtractorContext], Any]
    schema: SchemaSetting = None
    include_previous_extraction: bool = True
    metadata_key_path: str | Literal[False] | None = None  # None: extracted.<slug>
    on_extracted: Callable[[ExtractedContext], Any] | None = None
    built_in: bool = False
    slug: str = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "slug", slugify(self.name))
        if self.metadata_key_path is None:
            object.__setattr__(self, "metadata_key_path", f"extracted.{self.slug}")

    @property
    def inline(self) -> bool:
        return self.schema is None

    @property
    def include_previous(self) -> bool:
        return self.include_previous_extraction

    @property
    def metadata_key(self) -> str:
        """Where the value is kept under the thread's OM metadata ("": not kept)."""
        return self.metadata_key_path or ""

    @property
    def dynamic(self) -> bool:
        """Whether its instructions or schema are a function of the run context."""
        return callable(self.instructions) or _is_function(self.schema)

    async def resolve(self, context: ExtractorContext) -> Extractor:
        """This extractor for one run: its instructions and schema functions called with
        ``context`` (sync or async); a schema function that returns None makes it inline."""
        if not self.dynamic:
            return self
        instructions = await _maybe_await(self.instructions(context)) if callable(self.instructions) \
            else self.instructions
        if not isinstance(instructions, str) or not instructions.strip():
            raise ValueError(f"extractor {self.name!r}: the instructions function must return a non-empty string, "
                             f"not {instructions!r}")
        schema = self.schema
        if _is_function(schema):
            assert callable(schema)
            schema = await _maybe_await(schema(context))
            schema = None if schema is None else object_schema(f"extractor {self.name!r} schema", schema)
        return replace(self, instructions=instructions.strip(), schema=schema)


async def _maybe_await(value: Any) -> Any:
    return await value if inspect.isawaitable(value) else value


def _is_function(value: Any) -> bool:
    return callable(value) and not isinstance(value, type)


def slugify(name: str) -> str:
    """Mastra's ``slugifyExtractorName``: ASCII letters and digits kept (lower case), quotes
    dropped, every run of anything else one ``-``, none at either end."""
    slug: list[str] = []
    separated = False
    for char in name.strip().lower():
        if "a" <= char <= "z" or "0" <= char <= "9":
            slug.append(char)
            separated = False
        elif char not in _QUOTES and not separated and slug:
            slug.append("-")
            separated = True
    return "".join(slug).rstrip("-")


def object_schema(field: str, schema: Any) -> dict[str, Any]:
    """``schema`` (a Pydantic model class or a JSON schema) as a JSON schema of an object."""
    if isinstance(schema, type) and hasattr(schema, "model_json_schema"):
        schema = schema.model_json_schema()
    if not isinstance(schema, Mapping):
        raise ValueError(f"{field} must be a JSON schema object, a Pydantic model or a function, not {schema!r}")
    schema = dict(schema)
    if schema.get("type") != "object":
        raise ValueError(f"{field} must describe an object (\"type\": \"object\"), not {schema.get('type')!r}")
    from jsonschema import SchemaError  # jsonschema (~85 ms to import) only where a schema is given
    from jsonschema.validators import validator_for

    try:
        validator_for(schema).check_schema(schema)
    except SchemaError as exc:
        raise ValueError(f"{field} is not a valid JSON schema: {exc.message}") from None
    return schema


def _extractor(field: str, given: Mapping[str, Any]) -> Extractor:
    extra = sorted(set(given) - _EXTRACTOR_KEYS)
    if extra:
        raise ValueError(f"{field}.{extra[0]} " + _REFUSED_KEYS.get(
            extra[0], f"is not an option (options: {', '.join(sorted(_EXTRACTOR_KEYS))})"))
    name = given.get("name")
    slug = slugify(name) if isinstance(name, str) else ""
    if not slug or not "a" <= slug[0] <= "z":
        raise ValueError(f"{field}.name must be a name that starts with a letter (its slug is its tag), not {name!r}")
    if slug in RESERVED_SLUGS:
        raise ValueError(f"{field}.name {name!r} is reserved (slug {slug!r} is a built-in or one of OM's own tags)")
    instructions = given.get("instructions")
    if not callable(instructions) and (not isinstance(instructions, str) or not instructions.strip()):
        raise ValueError(f"{field}.instructions must be a non-empty string or a function of the run context")
    schema = given.get("schema")
    if schema is not None and not _is_function(schema):
        schema = object_schema(f"{field}.schema", schema)
    include = given.get("includePreviousExtraction", True)
    if not isinstance(include, bool):
        raise ValueError(f"{field}.includePreviousExtraction must be true or false")
    key = given.get("metadataKeyPath")
    key = f"extracted.{slug}" if key is None else key
    if key is not False and (not isinstance(key, str) or not _METADATA_KEY.match(key) or key.split(".")[0] in (
            *BUILT_IN_KEYS.values(), "lastObservedAt", "lastObservedMessageCursor")):
        raise ValueError(f"{field}.metadataKeyPath must be false or a dotted path like 'extracted.{slug}' that is "
                         f"not one of OM's own fields, not {key!r}")
    hook = given.get("onExtracted")
    if hook is not None and not callable(hook):
        raise ValueError(f"{field}.onExtracted must be a function")
    return Extractor(name.strip(), instructions.strip() if isinstance(instructions, str) else instructions,
                     schema=schema, include_previous_extraction=include, metadata_key_path=key, on_extracted=hook)


def _given(extractor: Extractor) -> dict[str, Any]:
    """An ``Extractor`` value as the options it was made from (checked like a dict)."""
    return {"name": extractor.name, "instructions": extractor.instructions, "schema": extractor.schema,
            "includePreviousExtraction": extractor.include_previous_extraction,
            "metadataKeyPath": extractor.metadata_key_path, "onExtracted": extractor.on_extracted}


def parse_extractors(field: str, value: Any) -> tuple[Extractor, ...]:
    """``observation.extract`` / ``reflection.extract`` as extractors (``field`` names it)."""
    if value is None:
        return ()
    if isinstance(value, (str, bytes, Mapping)) or not isinstance(value, Sequence):
        raise ValueError(f"observationalMemory.{field} must be a list of extractors")
    found: dict[str, Extractor] = {}
    for index, given in enumerate(value):
        where = f"observationalMemory.{field}[{index}]"
        if isinstance(given, Extractor):
            given = _given(given)
        elif not isinstance(given, Mapping):
            raise ValueError(f"{where} must be an object {{name, instructions, ...}} or an Extractor, not {given!r}")
        extractor = _extractor(where, given)
        if extractor.slug in found:
            raise ValueError(f"observationalMemory.{field}[{index}].name {extractor.name!r} has the slug "
                             f"{extractor.slug!r}, already used by {found[extractor.slug].name!r}")
        found[extractor.slug] = extractor
    return tuple(found.values())


def thread_title_extractor() -> Extractor:
    """The title as an extractor, for its parsing and storage; the prompt asks for it in its own
    section (``THREAD_TITLE_SECTION``), whose words are its instructions here too."""
    instructions = THREAD_TITLE_SECTION.removeprefix("<thread-title>\n").removesuffix("\n</thread-title>")
    return Extractor("Thread title", instructions, metadata_key_path="threadTitle", built_in=True)


WORKING_MEMORY_INSTRUCTIONS = ("The assistant's working memory about the user, brought up to date with what the "
                               "new messages say: keep everything in it that is still true, follow its template, "
                               "and add what was learned (names, preferences, goals, ongoing work).")


def working_memory_extractor(schema: dict[str, Any] | None) -> Extractor:
    """Working memory as an extractor: inline Markdown, or structured (the memory's schema;
    the value is merged like the agent's own update). Its value is never kept under OM's
    metadata: the working memory holds it."""
    instructions = WORKING_MEMORY_INSTRUCTIONS
    if schema is not None:
        instructions = ("The keys of the assistant's working memory about the user that the new messages change "
                        "(only those: objects are merged, null removes a key).")
    return Extractor("Working memory", instructions, schema=schema, metadata_key_path=False, built_in=True)


def take_inline_values(text: str, slugs: Sequence[str]) -> tuple[dict[str, Any], str]:
    """The values of ``slugs`` in a model's answer and the answer without their sections:
    an ``<extracted-values>`` JSON object first (any JSON value), then the *last*
    ``<slug>...</slug>`` of each slug still missing (trimmed text; an empty one is no value)."""
    values: dict[str, Any] = {}
    for match in _EXTRACTED_VALUES.finditer(text):
        try:
            extracted = json.loads(match.group(1).strip())
        except ValueError:
            continue
        if isinstance(extracted, dict):
            for slug in slugs:
                value = extracted.get(slug)
                if isinstance(value, str):
                    value = value.strip()
                if value not in (None, "", [], {}):
                    values[slug] = value  # a later object wins, like a later section
    text = _EXTRACTED_VALUES.sub("", text)
    for slug in slugs:
        section = re.compile(rf"<{re.escape(slug)}>([\s\S]*?)</{re.escape(slug)}>", re.I)
        found = [m.group(1).strip() for m in section.finditer(text)]
        if slug not in values and found and found[-1]:
            values[slug] = found[-1]
        text = section.sub("", text)
    return values, text


def shown(value: Any) -> str:
    """A value as the prompts and the actor's context show it."""
    return value.strip() if isinstance(value, str) else json.dumps(value, ensure_ascii=False, sort_keys=True)


def read_path(metadata: Mapping[str, Any], key: str) -> Any:
    node: Any = metadata
    for part in key.split("."):
        if not isinstance(node, Mapping):
            return None
        node = node.get(part)
    return node


def write_path(metadata: Mapping[str, Any], key: str, value: Any) -> dict[str, Any]:
    """The top-level patch that sets dotted ``key`` to ``value`` keeping its siblings."""
    head, _, rest = key.partition(".")
    if not rest:
        return {head: value}
    current = metadata.get(head) if isinstance(metadata.get(head), Mapping) else {}
    inner = dict(current)
    inner.update(write_path(inner, rest, value))
    return {head: inner}


PREVIOUS_VALUE_HEADING = "## Previous Value"


def structured_messages(extractor: Extractor, schema: dict[str, Any], source: str,
                        previous: Any = None) -> list[dict[str, Any]]:
    """The follow-up call of a schema extractor: answer one JSON object fitting ``schema``."""
    system = "\n\n".join([
        EXTRACTOR_IDENTITY,
        f"Extract \"{extractor.name}\": {extractor.instructions}",
        "Answer with exactly one JSON object that fits this JSON schema, and nothing else: no prose, no code fence.",
        f"{SCHEMA_OPEN}\n{json.dumps(schema, ensure_ascii=False, sort_keys=True)}\n{SCHEMA_CLOSE}"])
    user = f"{SOURCE_HEADING}\n\n{source.strip()}"
    if previous is not None:
        user += (f"\n\n{PREVIOUS_VALUE_HEADING}\n\n{shown(previous)}\n\nUpdate it from the source: keep what is "
                 "still true.")
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]


_FENCE = re.compile(r"^```(?:json)?\s*([\s\S]*?)\s*```$")


def read_json_object(text: str) -> dict[str, Any]:
    """The JSON object of a structured answer (a code fence around it is tolerated)."""
    text = text.strip()
    fenced = _FENCE.match(text)
    if fenced:
        text = fenced.group(1)
    try:
        value = json.loads(text)
    except ValueError:
        start, end = text.find("{"), text.rfind("}")
        if start < 0 or end <= start:
            raise ValueError("the answer holds no JSON object") from None
        try:
            value = json.loads(text[start:end + 1])
        except ValueError as exc:
            raise ValueError(f"the answer is not valid JSON: {exc}") from None
    if not isinstance(value, dict):
        raise ValueError("the answer is not a JSON object")
    return value


def check_against(schema: dict[str, Any], value: dict[str, Any]) -> None:
    from jsonschema.validators import validator_for

    errors = sorted(validator_for(schema)(schema).iter_errors(value), key=lambda e: list(e.path))
    if errors:
        where = "/".join(map(str, errors[0].path)) or "(root)"
        raise ValueError(f"the answer does not fit the schema at {where}: {errors[0].message}")
