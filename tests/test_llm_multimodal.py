"""Images and files reach the model (issue 8.5).

A stored ``file`` part becomes OpenAI content (``image_url`` / ``file``) for a model that
litellm says accepts it, a placeholder naming the file otherwise; the stored parts stay as
they were. The local model acknowledges what it received, and a real provider (the fake
OpenAI-compatible server) gets the image itself, both through a live gateway (in this
process, over real HTTP).
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from dev_server.kernel.convert import stored_to_model, ui_to_model, ui_to_stored
from dev_server.llm.content import fit_to_model, for_trace
from dev_server.llm.local_model import compose_reply
from tests.fake_provider import FakeProvider
from tests.kit.local_http import local_http
from tests.kit.servers import serving
from tests.support import sqlite_rows

PNG = "data:image/png;base64," + base64.b64encode(b"\x89PNG\r\n\x1a\n fake image").decode()
PDF = "data:application/pdf;base64," + base64.b64encode(b"%PDF-1.4 fake").decode()


def ui_message(message_id: str = "u1") -> dict[str, Any]:
    return {"id": message_id, "role": "user", "parts": [
        {"type": "text", "text": "What is in these?"},
        {"type": "file", "mediaType": "image/png", "url": PNG, "filename": "cat.png"},
        {"type": "file", "mediaType": "application/pdf", "url": PDF, "filename": "report.pdf"},
    ]}


def test_stored_files_become_openai_content_and_stay_stored_intact() -> None:
    stored = ui_to_stored(ui_message(), "t", "r", "2026-01-01T00:00:00.000Z")
    before = json.dumps(stored.content, sort_keys=True)
    model = stored_to_model(stored)
    assert model == {"role": "user", "content": [
        {"type": "text", "text": "What is in these?"},
        {"type": "image_url", "image_url": {"url": PNG}},
        {"type": "file", "file": {"file_data": PDF, "filename": "report.pdf"}},
    ]}
    assert json.dumps(stored.content, sort_keys=True) == before
    assert stored.content["parts"][1] == {"type": "file", "mimeType": "image/png", "data": PNG, "filename": "cat.png"}


def test_already_stored_parts_convert_the_same() -> None:
    stored = ui_to_stored(ui_message(), "t", "r", "2026-01-01T00:00:00.000Z")
    assert ui_to_model({"role": "user", "parts": stored.content["parts"]}) == stored_to_model(stored)


def test_a_user_message_of_several_text_parts_keeps_them_apart() -> None:
    parts = [{"type": "text", "text": "first part."}, {"type": "text", "text": "second part"}]
    stored = ui_to_stored({"id": "u2", "role": "user", "parts": parts}, "t", "r", "2026-01-01T00:00:00.000Z")
    assert stored_to_model(stored) == {"role": "user", "content": parts}
    one = ui_to_stored({"id": "u3", "role": "user", "parts": parts[:1]}, "t", "r", "2026-01-01T00:00:00.000Z")
    assert stored_to_model(one) == {"role": "user", "content": "first part."}


def test_files_in_assistant_messages_are_placeholders() -> None:
    stored = ui_to_stored({**ui_message(), "role": "assistant"}, "t", "r", "2026-01-01T00:00:00.000Z")
    assert stored_to_model(stored)["content"] == ("What is in these?[file cat.png (image/png)]"
                                                  "[file report.pdf (application/pdf)]")


def test_fit_to_model_keeps_what_the_model_accepts_and_names_the_rest() -> None:
    messages = [stored_to_model(ui_to_stored(ui_message(), "t", "r", "2026-01-01T00:00:00.000Z"))]
    kept = fit_to_model(messages, vision=True, pdf_input=True, model="openai/gpt-4o")
    assert kept == messages
    text_only = fit_to_model(messages, vision=False, pdf_input=False, model="groq/llama-3.1-8b-instant")[0]["content"]
    assert [p["type"] for p in text_only] == ["text", "text", "text"]
    assert text_only[1]["text"] == ("[attachment image/png: not sent, groq/llama-3.1-8b-instant does not accept "
                                    "image/png]")
    assert "report.pdf (application/pdf)" in text_only[2]["text"]


def test_for_a_model_that_only_reads_messages_with_nothing_replaced_are_not_copied() -> None:
    plain = {"role": "user", "content": [{"type": "text", "text": "hi"}]}
    system = {"role": "system", "content": "observations"}
    messages = [system, plain, *[stored_to_model(ui_to_stored(ui_message(), "t", "r", "2026-01-01T00:00:00.000Z"))]]
    shared = fit_to_model(messages, vision=False, pdf_input=False, model="local/dev-model", copy=False)
    assert shared[0] is system and shared[1] is plain
    assert shared[2] is not messages[2] and "does not accept image/png" in shared[2]["content"][1]["text"]
    assert messages[2]["content"][1]["type"] == "image_url"  # the turn's own message is left as it was
    copied = fit_to_model(messages, vision=False, pdf_input=False, model="openai/gpt-4o")
    assert copied[0] is not system and copied[1] is not plain and copied[:2] == [system, plain]


def test_span_inputs_carry_short_data_urls() -> None:
    big = "data:image/png;base64," + base64.b64encode(bytes(3000)).decode()
    messages = [{"role": "user", "content": [{"type": "text", "text": "look"},
                                             {"type": "image_url", "image_url": {"url": big}},
                                             {"type": "file", "file": {"file_data": PDF, "filename": "r.pdf"}}]}]
    traced = for_trace(messages)[0]["content"]
    assert traced[1]["image_url"]["url"] == f"data:image/png;base64,… ({len(big)} chars)"
    assert traced[2]["file"] == {"file_data": PDF, "filename": "r.pdf"}  # short ones stay
    assert messages[0]["content"][1]["image_url"]["url"] == big  # the model's copy is untouched


def test_local_model_acknowledges_attachments() -> None:
    messages = [stored_to_model(ui_to_stored(ui_message(), "t", "r", "2026-01-01T00:00:00.000Z"))]
    reply = compose_reply(messages)
    assert reply.text.endswith(" I received 2 attachments: image/png, application/pdf.")
    assert 'You said: "What is in these?"' in reply.text


# -- through a live gateway ------------------------------------------------------------------


def post_chat(url: str, thread: str) -> httpx.Response:
    return local_http.post(f"{url}/api/chat", json={"conversationId": thread, "messages": [ui_message(f"u-{thread}")]},
                      timeout=30)


def reply_text(sse: str) -> str:
    chunks = [json.loads(line[6:]) for line in sse.splitlines() if line.startswith("data: {")]
    return "".join(c["delta"] for c in chunks if c.get("type") == "text-delta")


def test_local_model_through_the_gateway_sees_the_files(data_dir: Path) -> None:
    with serving("gateway", data_dir, {"DEV_SERVER_TELEMETRY": "false"}) as gateway:
        response = post_chat(gateway.url, "t-files")
        assert response.status_code == 200
        assert reply_text(response.text).endswith("I received 2 attachments: image/png, application/pdf.")
        (content,), = sqlite_rows(data_dir / "dev-server.db", "SELECT content FROM messages WHERE id = 'u-t-files'")
        parts = json.loads(content)["parts"]
        assert [p.get("data") for p in parts[1:]] == [PNG, PDF]


@pytest.fixture
def fake() -> Iterator[FakeProvider]:
    with FakeProvider() as provider:
        yield provider


def test_a_vision_model_gets_the_image_itself(data_dir: Path, fake: FakeProvider) -> None:
    env = {"DEV_SERVER_TELEMETRY": "false", "OPENAI_API_KEY": "sk-dummy", "OPENAI_BASE_URL": fake.base_url}
    with serving("gateway", data_dir, env) as gateway:  # its models ready
        assert post_chat(gateway.url, "t-vision").status_code == 200
        [turn] = fake.turn_bodies()  # (not last_body: the reply's title job may have asked since)
        content = turn["messages"][-1]["content"]
        assert {"type": "image_url", "image_url": {"url": PNG}} in content  # gpt-4o-mini: vision and PDF input
        assert any(p.get("type") == "file" and p["file"].get("file_data") == PDF for p in content)
