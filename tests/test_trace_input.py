"""What a model generation's span records of its input (``for_trace``, docs/studio.md S4):
the system messages, the newest messages, and a count of the ones left out between."""

from __future__ import annotations

from dev_server.llm.content import for_trace


def conversation(count: int, size: int = 100) -> list[dict]:
    return [{"role": "user" if i % 2 == 0 else "assistant", "content": f"{i:04d} " + "x" * (size - 5)}
            for i in range(count)]


def test_without_a_limit_every_message_is_recorded() -> None:
    messages = [{"role": "system", "content": "You are helpful."}, *conversation(300)]
    assert for_trace(messages) == messages


def test_a_long_input_keeps_its_system_messages_and_its_newest_messages() -> None:
    log = "* 🔴 an observation\n" * 2000  # the observations' system message, 38,000 characters
    messages = [{"role": "system", "content": "You are helpful."}, {"role": "system", "content": log},
                *conversation(300)]
    traced = for_trace(messages, limit=10_000)
    assert traced[0] == messages[0]
    cut = traced[1]["content"]  # the system messages share half of the limit
    assert cut.startswith(log[:4_984]) and cut.endswith("… [33,016 more characters not recorded]")
    marker = traced[2]
    assert marker["role"] == "system" and marker["content"].startswith("[250 earlier messages (25,000 characters)")
    assert traced[3:] == messages[-50:]  # 50 x 100 characters fill the other half
    assert sum(len(m["content"]) for m in traced) < 10_200


def test_system_messages_past_their_half_are_counted_with_the_left_out_ones() -> None:
    blocks = [{"role": "system", "content": f"block {i} " + "o" * 9_000} for i in range(8)]
    messages = [{"role": "system", "content": "You are helpful."}, *blocks, *conversation(10)]
    traced = for_trace(messages, limit=32_000)
    assert [m["content"][:7] for m in traced[:3]] == ["You are", "block 0", "block 1"]
    assert traced[2]["content"].endswith("more characters not recorded]")
    assert traced[3]["content"].startswith("[6 earlier messages (54,048 characters)")
    assert traced[4:] == messages[-10:] and sum(len(m["content"]) for m in traced) < 33_000


def test_the_newest_message_is_recorded_even_when_it_alone_is_over_the_limit() -> None:
    messages = [*conversation(3), {"role": "user", "content": "y" * 50_000}]
    traced = for_trace(messages, limit=1_000)
    assert traced[-1] == messages[-1] and traced[0]["content"].startswith("[3 earlier messages")


def test_a_short_input_is_recorded_whole_and_attachments_are_shortened() -> None:
    image = {"type": "image_url", "image_url": {"url": "data:image/png;base64," + "A" * 5_000}}
    messages = [{"role": "user", "content": [{"type": "text", "text": "look"}, image]}]
    [traced] = for_trace(messages, limit=32_000)
    assert traced["content"][0] == {"type": "text", "text": "look"}
    assert traced["content"][1]["image_url"]["url"] == "data:image/png;base64,… (5022 chars)"
