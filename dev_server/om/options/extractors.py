"""Extractors: named values the observer or the reflector pulls out of what it reads.

``observation.extract`` and ``reflection.extract`` each take a list of extractors
(docs/observational-memory.md#record, #context, #prompts). An extractor has a ``name`` (its *slug*, the name
lowercased with every run of other characters made one ``-``, is its XML tag and its key),
``instructions``, an optional JSON ``schema`` (a JSON schema of an object, a Pydantic model
class, or a function of the run's ``ExtractContext`` returning either),
``includePreviousExtraction`` (default true: the last value is shown to the next run and to
the actor), ``metadataKey`` (default ``extracted.<slug>``: a dotted path under the thread's
``metadata.mastra.om``) and an optional ``transform`` whose return value replaces the value
(``dev_server.om.engine.extraction``).

Without a schema an extractor is *inline*: the observer or reflector writes it in its own
answer, as a ``<slug>...</slug>`` section or inside an ``<extracted-values>`` JSON object
(``take_inline_values``: the JSON first, then the last section of each remaining slug).
With one it runs as a follow-up call that must answer JSON fitting the schema.

The built-ins are extractors too, made here: ``current-task``, ``suggested-response``,
``thread-title`` (``observation.threadTitle``) and ``working-memory``
(``observation.manageWorkingMemory``). Their slugs, and the XML tags OM's own format uses,
cannot name a user's extractor. Every check fails at construction with a ``ValueError``
naming the field.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from jsonschema import SchemaError
from jsonschema.validators import validator_for

from dev_server.kernel.prompt_marks import EXTRACTOR_IDENTITY, SCHEMA_CLOSE, SCHEMA_OPEN, SOURCE_HEADING

CURRENT_TASK = "current-task"
SUGGESTED_RESPONSE = "suggested-response"
THREAD_TITLE = "thread-title"
WORKING_MEMORY = "working-memory"
BUILT_IN_KEYS = {CURRENT_TASK: "currentTask", SUGGESTED_RESPONSE: "suggestedResponse", THREAD_TITLE: "threadTitle"}
RESERVED_SLUGS = frozenset({CURRENT_TASK, SUGGESTED_RESPONSE, THREAD_TITLE, WORKING_MEMORY, "observations",
                            "extracted-values", "thread", "observation-group", "system-reminder",
                            "other-conversation", "observational-memory-instruction", "working-memory-data",
                            "working-memory-template"})
_EXTRACTOR_KEYS = {"name", "instructions", "schema", "includePreviousExtraction", "metadataKey", "transform"}
_SLUG_RUN = re.compile(r"[^a-z0-9]+")
_EXTRACTED_VALUES = re.compile(r"<extracted-values>([\s\S]*?)</extracted-values>", re.I)
_METADATA_KEY = re.compile(r"^[A-Za-z0-9_-]+(?:\.[A-Za-z0-9_-]+)*$")


@dataclass(frozen=True)
class ExtractContext:
    """What a schema function and a transform learn about the run."""

    thread_id: str
    resource_id: str | None
    operation: str  # "observation" or "reflection"
    previous: Any = None  # the extractor's last value, when includePreviousExtraction


@dataclass(frozen=True)
class Extractor:
    name: str
    slug: str
    instructions: str
    schema: dict[str, Any] | Callable[[ExtractContext], Any] | None = None
    include_previous: bool = True
    metadata_key: str = ""
    transform: Callable[..., Any] | None = None
    built_in: bool = False

    @property
    def inline(self) -> bool:
        return self.schema is None


def slugify(name: str) -> str:
    return _SLUG_RUN.sub("-", name.lower()).strip("-")


def object_schema(field: str, schema: Any) -> dict[str, Any]:
    """``schema`` (a Pydantic model class or a JSON schema) as a JSON schema of an object."""
    if isinstance(schema, type) and hasattr(schema, "model_json_schema"):
        schema = schema.model_json_schema()
    if not isinstance(schema, Mapping):
        raise ValueError(f"{field} must be a JSON schema object, a Pydantic model or a function, not {schema!r}")
    schema = dict(schema)
    if schema.get("type") != "object":
        raise ValueError(f"{field} must describe an object (\"type\": \"object\"), not {schema.get('type')!r}")
    try:
        validator_for(schema).check_schema(schema)
    except SchemaError as exc:
        raise ValueError(f"{field} is not a valid JSON schema: {exc.message}") from None
    return schema


def _extractor(field: str, given: Any) -> Extractor:
    if not isinstance(given, Mapping):
        raise ValueError(f"{field} must be an object {{name, instructions, ...}}, not {given!r}")
    extra = sorted(set(given) - _EXTRACTOR_KEYS)
    if extra:
        raise ValueError(f"{field}.{extra[0]} is not an option (options: {', '.join(sorted(_EXTRACTOR_KEYS))})")
    name = given.get("name")
    if not isinstance(name, str) or not slugify(name):
        raise ValueError(f"{field}.name must be a name with letters or digits, not {name!r}")
    slug = slugify(name)
    if slug in RESERVED_SLUGS:
        raise ValueError(f"{field}.name {name!r} is reserved (slug {slug!r} is a built-in or one of OM's own tags)")
    instructions = given.get("instructions")
    if not isinstance(instructions, str) or not instructions.strip():
        raise ValueError(f"{field}.instructions must be a non-empty string")
    schema = given.get("schema")
    if schema is not None and not (callable(schema) and not isinstance(schema, type)):
        schema = object_schema(f"{field}.schema", schema)
    include = given.get("includePreviousExtraction", True)
    if not isinstance(include, bool):
        raise ValueError(f"{field}.includePreviousExtraction must be true or false")
    key = given.get("metadataKey", f"extracted.{slug}")
    if not isinstance(key, str) or not _METADATA_KEY.match(key) or key.split(".")[0] in (
            *BUILT_IN_KEYS.values(), "lastObservedAt", "lastObservedMessageCursor"):
        raise ValueError(f"{field}.metadataKey must be a dotted key like 'extracted.{slug}' that is not one of "
                         f"OM's own fields, not {key!r}")
    transform = given.get("transform")
    if transform is not None and not callable(transform):
        raise ValueError(f"{field}.transform must be a function")
    return Extractor(name=name, slug=slug, instructions=instructions.strip(), schema=schema,
                     include_previous=include, metadata_key=key, transform=transform)


def parse_extractors(field: str, value: Any) -> tuple[Extractor, ...]:
    """``observation.extract`` / ``reflection.extract`` as extractors (``field`` names it)."""
    if value is None:
        return ()
    if isinstance(value, (str, bytes, Mapping)) or not isinstance(value, Sequence):
        raise ValueError(f"observationalMemory.{field} must be a list of extractors")
    found: dict[str, Extractor] = {}
    for index, given in enumerate(value):
        extractor = given if isinstance(given, Extractor) else _extractor(f"observationalMemory.{field}[{index}]",
                                                                          given)
        if extractor.slug in found:
            raise ValueError(f"observationalMemory.{field}[{index}].name {extractor.name!r} has the slug "
                             f"{extractor.slug!r}, already used by {found[extractor.slug].name!r}")
        found[extractor.slug] = extractor
    return tuple(found.values())


def thread_title_extractor() -> Extractor:
    return Extractor("threadTitle", THREAD_TITLE, "A few words naming what this conversation is about, for a "
                     "list of conversations. Change it only when the topic has clearly changed.",
                     metadata_key="threadTitle", built_in=True)


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
    return Extractor("workingMemory", WORKING_MEMORY, instructions, schema=schema, metadata_key="", built_in=True)


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
    errors = sorted(validator_for(schema)(schema).iter_errors(value), key=lambda e: list(e.path))
    if errors:
        where = "/".join(map(str, errors[0].path)) or "(root)"
        raise ValueError(f"the answer does not fit the schema at {where}: {errors[0].message}")
