"""The ``openai`` policy against a local chat-completions server (the fake stands for the outside API)."""

from __future__ import annotations

import pytest

from cuda_agent.schemas.messages import Message, ToolSchema
from fakes.chat_server import FakeChatServer, Reply

TOOLS = [ToolSchema(name="compile", description="Build.", parameters={"type": "object", "properties": {}})]
MESSAGES = [Message(role="system", content="You write kernels."), Message(role="user", content="Speed up relu.")]


def _policy(server: FakeChatServer, **overrides):
    from cuda_agent.plugins.policies.openai_chat import OpenAIChatPolicy, OpenAIPolicyConfig

    cfg = dict(model="fake-model", base_url=server.base_url, api_key="sk-test", backoff_initial_s=0.0,
               backoff_max_s=0.05, timeout_s=5.0)
    cfg.update(overrides)
    return OpenAIChatPolicy(OpenAIPolicyConfig(**cfg))


def test_normal_turn_records_usage_and_sends_the_conversation() -> None:
    with FakeChatServer([Reply('<tool_call>{"name": "compile", "arguments": {}}</tool_call>',
                               usage={"prompt_tokens": 11, "completion_tokens": 7})]) as server:
        out = _policy(server, temperature=0.2).query(MESSAGES, TOOLS)
        body = server.requests[-1].body
    assert out.text.startswith("<tool_call>")
    assert out.usage == {"prompt_tokens": 11, "completion_tokens": 7, "retries": 0}
    assert out.finish_reason == "stop" and out.tool_calls is None and out.output_ids is None
    assert body["model"] == "fake-model" and body["temperature"] == 0.2
    assert [m["role"] for m in body["messages"]] == ["system", "user"]
    assert "tools" not in body  # text protocol: schemas live in the system prompt


def test_retries_after_429_and_500_then_succeeds() -> None:
    with FakeChatServer([Reply(status=429, retry_after=0), Reply(status=500), Reply(status=503), Reply("done")]) as server:
        out = _policy(server).query(MESSAGES, TOOLS)
        assert server.request_count == 4
    assert out.text == "done" and out.usage["retries"] == 3


def test_timeout_is_retried() -> None:
    # the late reply never comes within the read timeout; the timeout is generous for the one that answers at once
    with FakeChatServer([Reply("late", delay_s=600), Reply("in time")]) as server:
        out = _policy(server, timeout_s=3.0).query(MESSAGES, TOOLS)
        assert server.request_count == 2
    assert out.text == "in time"


def test_gives_up_after_max_attempts_naming_the_setting() -> None:
    from cuda_agent.plugins.policies.openai_chat import ChatAPIError

    with FakeChatServer(default=Reply(status=500)) as server:
        with pytest.raises(ChatAPIError, match="max_attempts=3"):
            _policy(server, max_attempts=3).query(MESSAGES, TOOLS)
        assert server.request_count == 3


def test_auth_error_is_clear_and_not_retried() -> None:
    from cuda_agent.plugins.policies.openai_chat import ChatAPIError

    with FakeChatServer(["never"], api_key="sk-right") as server:
        with pytest.raises(ChatAPIError, match=r"refused the API key \(401.*OPENAI_API_KEY"):
            _policy(server, api_key="sk-wrong").query(MESSAGES, TOOLS)
        assert server.request_count == 1


def test_unknown_model_lists_what_the_server_offers() -> None:
    from cuda_agent.plugins.policies.openai_chat import ChatAPIError

    with FakeChatServer(models=["qwen-coder", "llama-kernel"]) as server:
        with pytest.raises(ChatAPIError, match="offers: llama-kernel, qwen-coder"):
            _policy(server, model="gpt-nope").query(MESSAGES, TOOLS)
        assert server.request_count == 1


def test_native_tool_call_is_parsed_and_sent_back_natively() -> None:
    from cuda_agent.schemas.messages import ToolCall

    call = {"id": "call_abc", "name": "compile", "arguments": {"verbose": True}}
    with FakeChatServer([Reply("", tool_calls=[call]), Reply("", tool_calls=[{"name": "compile", "arguments": "{oops"}])]) as server:
        policy = _policy(server, native_tools=True)
        out = policy.query(MESSAGES, TOOLS)
        assert out.tool_calls == [ToolCall(id="call_abc", name="compile", arguments={"verbose": True})]
        assert out.finish_reason == "tool_calls"
        history = MESSAGES + [Message(role="assistant", content="", tool_calls=out.tool_calls),
                              Message(role="tool", content="compiled", tool_call_id="call_abc", name="compile")]
        bad = policy.query(history, TOOLS)
        body = server.requests[-1].body
    assert body["tools"][0]["function"]["name"] == "compile"
    assert body["messages"][2]["tool_calls"][0]["id"] == "call_abc"
    assert body["messages"][3] == {"role": "tool", "tool_call_id": "call_abc", "content": "compiled"}
    assert bad.tool_calls[0].arguments == {"_unparsed_arguments": "{oops"}


def test_text_protocol_sends_observations_as_user_turns() -> None:
    with FakeChatServer(["ok"]) as server:
        history = MESSAGES + [Message(role="assistant", content="<tool_call>{}</tool_call>"),
                              Message(role="tool", content="compiled", tool_call_id="call_1_0", name="compile")]
        _policy(server).query(history, TOOLS)
        sent = server.requests[-1].body["messages"][-1]
    assert sent["role"] == "user" and "compiled" in sent["content"]


def test_config_from_env_and_spec(monkeypatch) -> None:
    from cuda_agent.plugin_manager import PluginManager

    with FakeChatServer(["from env"], models=["env-model"], api_key="sk-env") as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "sk-env")
        entry = PluginManager(load_entrypoints=False).registry.get("policy", "openai")
        policy = entry.build({"model": "env-model", "backoff_initial_s": 0})
        assert policy.query(MESSAGES, TOOLS).text == "from env"
