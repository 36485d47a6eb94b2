"""A JSON script file for ``ScriptedModel`` (``DEV_SERVER_SCRIPTED_MODEL``): read and checked.

The format is in ``dev_server.llm.scripted``'s docstring. Everything is checked when the file is
read (at start, by the settings), so a typo is one line naming the field, not a failed turn.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from dev_server.kernel.model import Usage
from dev_server.llm.errors import KIND_STATUS, provider_error
from dev_server.llm.scripted import PURPOSES, Call, Reply, ScriptedModel


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)


class _Call(_Strict):
    name: str = Field(min_length=1)
    arguments: dict[str, Any] | str = Field(default_factory=dict)
    id: str | None = None


class _Error(_Strict):
    kind: str
    message: str | None = None

    @field_validator("kind")
    @classmethod
    def _known(cls, kind: str) -> str:
        if kind not in KIND_STATUS:
            raise ValueError(f"unknown kind {kind!r}; expected one of {', '.join(KIND_STATUS)}")
        return kind


class _Usage(_Strict):
    input_tokens: int = Field(0, ge=0, alias="inputTokens")
    output_tokens: int = Field(0, ge=0, alias="outputTokens")


class _Reply(_Strict):
    text: str | list[str] = ""
    reasoning: str = ""
    tool_calls: list[_Call] = Field(default_factory=list, alias="toolCalls")
    error: str | _Error | None = None
    delay_s: float = Field(0.0, ge=0, alias="delayS")
    piece_delay_s: float = Field(0.0, ge=0, alias="pieceDelayS")
    finish_reason: str | None = Field(None, alias="finishReason")
    usage: _Usage | None = None

    @model_validator(mode="before")
    @classmethod
    def _text_alone(cls, value: Any) -> Any:
        return {"text": value} if isinstance(value, str) else value

    @field_validator("error")
    @classmethod
    def _known_kind(cls, error: Any) -> Any:
        if isinstance(error, str):
            _Error(kind=error)
        return error

    def reply(self) -> Reply:
        error = self.error
        if isinstance(error, _Error):
            error = provider_error(error.kind, error.message) if error.message else error.kind
        usage = Usage(self.usage.input_tokens, self.usage.output_tokens) if self.usage else None
        return Reply(text=self.text, reasoning=self.reasoning, error=error, delay_s=self.delay_s,
                     piece_delay_s=self.piece_delay_s, finish_reason=self.finish_reason, usage=usage,
                     tool_calls=tuple(Call(c.name, c.arguments, c.id) for c in self.tool_calls))


_Replies = list[_Reply]


class _Script(_Strict):
    replies: _Replies | None = None
    title: _Replies | None = None
    observer: _Replies | None = None
    reflector: _Replies | None = None
    extractor: _Replies | None = None
    then: Literal["local", "fail"] = "local"
    local: bool = True
    record: str | None = None


@dataclass(frozen=True)
class LoadedScript:
    replies: list[Reply | str] | None  # the agents' steps
    by_purpose: dict[str, list[Reply | str]]  # keyword arguments of ScriptedModel: title=, observer=, ...
    then: Literal["local", "fail"]
    local: bool
    record_to: Path | None


def load_script(path: Path) -> LoadedScript:
    """The script in ``path``; ValueError with one line saying what is wrong."""
    try:
        raw = json.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise ValueError(f"cannot read the script {path}: {exc.strerror or exc}") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ValueError(f"the script {path} is not JSON: {exc}") from None
    try:
        script = _Script.model_validate({"replies": raw} if isinstance(raw, list) else raw)
    except ValidationError as exc:
        error = exc.errors()[0]
        where = ".".join(str(part) for part in error["loc"]) or "the script"
        raise ValueError(f"the script {path}: {where}: {error['msg']}") from None

    def replies(items: _Replies) -> list[Reply | str]:
        return [item.reply() for item in items]

    by_purpose = {purpose: replies(items) for purpose in PURPOSES[1:]
                  if (items := getattr(script, purpose)) is not None}
    record_to = Path(path).resolve().parent / script.record if script.record else None
    agent = replies(script.replies) if script.replies is not None else None
    return LoadedScript(agent, by_purpose, script.then, script.local, record_to)


def scripted_model_from_file(path: Path, *, agent_models: Mapping[str, str] | None = None) -> ScriptedModel:
    """The scripted model of a JSON script file (``load_script``)."""
    loaded = load_script(path)
    return ScriptedModel(loaded.replies, **loaded.by_purpose, then=loaded.then, local=loaded.local,
                         record_to=loaded.record_to, agent_models=agent_models)
