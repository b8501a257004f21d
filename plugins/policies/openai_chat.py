"""``openai`` policy: any OpenAI-compatible chat-completions endpoint (``--policy openai:MODEL?base_url=...``).

Hosted APIs, vLLM and SGLang servers alike. The SDK's own retries are off
(``max_retries=0``); tenacity retries transient failures (429, 408/409, 5xx,
timeouts, connection errors) with jittered exponential backoff, honouring a
``Retry-After`` header up to the backoff cap. Authentication failures and an
unknown model are reported at once, clearly, without retrying (for an unknown
model the error lists what the server offers when it can). Tools are sent
natively (``native_tools: true``, pair it with ``agent.tool_protocol=native``)
or left to the text protocol, in which case tool observations are sent as
user messages (chat APIs refuse ``tool`` messages that answer no native call).
"""

from __future__ import annotations

import json
import os
import time
from typing import Any, ClassVar

import structlog
from pydantic import BaseModel, ConfigDict, Field, SecretStr

from cuda_agent.errors import CudaAgentError
from cuda_agent.hookspecs import hookimpl
from cuda_agent.schemas.messages import Message, PolicyOutput, ToolCall, ToolSchema

log = structlog.get_logger("cuda_agent.policies.openai")
DEFAULT_BASE_URL = "https://api.openai.com/v1"


class ChatAPIError(CudaAgentError):
    """The chat API refused the request in a way retrying cannot fix (auth, unknown model, bad request)."""


class OpenAIPolicyConfig(BaseModel):
    """Config of the ``openai`` policy (block ``plugins.openai`` or ``--policy openai:MODEL?k=v``)."""

    model_config = ConfigDict(extra="forbid")
    spec_target: ClassVar[str] = "model"

    model: str | None = Field(None, description="Model id; default $OPENAI_MODEL.")
    base_url: str | None = Field(None, description=f"API base URL; default $OPENAI_BASE_URL, then {DEFAULT_BASE_URL}.")
    api_key: SecretStr | None = Field(
        None, description="API key; default the variable named by api_key_env. A secret: never saved, printed or hashed."
    )
    api_key_env: str = Field("OPENAI_API_KEY", description="Environment variable holding the API key.")
    temperature: float | None = Field(None, ge=0, description="Sampling temperature; None = server default.")
    top_p: float | None = Field(None, gt=0, le=1, description="Nucleus mass; None = server default.")
    max_tokens: int | None = Field(None, ge=1, description="Completion tokens at most per turn; None = server default.")
    seed: int | None = Field(None, description="Sampling seed, where the server supports it.")
    native_tools: bool = Field(False, description="Send tool schemas natively and return native tool calls.")
    timeout_s: float = Field(600.0, gt=0, description="Read timeout of one request, seconds.")
    connect_timeout_s: float = Field(10.0, gt=0, description="Connect timeout, seconds.")
    max_attempts: int = Field(6, ge=1, description="Attempts per turn including the first (transient errors only).")
    backoff_initial_s: float = Field(1.0, ge=0, description="First retry delay, seconds (doubles, jittered).")
    backoff_max_s: float = Field(60.0, ge=0, description="Retry delay cap, seconds (also caps Retry-After).")
    extra_body: dict[str, Any] = Field(default_factory=dict, description="Extra JSON fields (e.g. vLLM's top_k).")


def is_transient(exc: BaseException) -> bool:
    """Errors worth retrying: rate limits, server errors, timeouts, dropped connections."""
    import openai

    if isinstance(exc, (openai.APITimeoutError, openai.APIConnectionError)):
        return True
    if isinstance(exc, openai.APIStatusError):
        return exc.status_code in (408, 409, 429) or exc.status_code >= 500
    return False


def _retry_after(exc: BaseException) -> float | None:
    response = getattr(exc, "response", None)
    value = response.headers.get("retry-after") if response is not None else None
    try:
        return float(value) if value is not None else None
    except ValueError:
        return None


def to_api_messages(messages: list[Message], native: bool) -> list[dict[str, Any]]:
    """Loop messages in chat-completions shape; without native tools, observations become user turns."""
    out: list[dict[str, Any]] = []
    for m in messages:
        if m.role == "tool" and not native:
            out.append({"role": "user", "content": f"<tool_response name={m.name!r}>\n{m.content}\n</tool_response>"})
        elif m.role == "tool":
            out.append({"role": "tool", "tool_call_id": m.tool_call_id or "", "content": m.content})
        elif m.role == "assistant" and native and m.tool_calls:
            calls = [{"id": c.id, "type": "function", "function": {"name": c.name, "arguments": json.dumps(c.arguments)}}
                     for c in m.tool_calls]
            out.append({"role": "assistant", "content": m.content or None, "tool_calls": calls})
        else:
            out.append({"role": m.role, "content": m.content})
    return out


def parse_tool_calls(raw_calls: list[Any] | None) -> list[ToolCall] | None:
    """Native tool calls from the response; unparsable arguments are kept raw so the loop reports them."""
    if not raw_calls:
        return None
    calls = []
    for c in raw_calls:
        try:
            args = json.loads(c.function.arguments or "{}")
        except json.JSONDecodeError:
            args = {"_unparsed_arguments": c.function.arguments}
        if not isinstance(args, dict):
            args = {"_unparsed_arguments": c.function.arguments}
        calls.append(ToolCall(id=c.id, name=c.function.name, arguments=args))
    return calls


class OpenAIChatPolicy:
    """Chat-completions policy; one request per turn with the full message list."""

    token_level = False

    def __init__(self, config: OpenAIPolicyConfig) -> None:
        try:
            import openai
        except ImportError as exc:
            raise ChatAPIError(f"openai policy needs the openai SDK: pip install 'cuda-agent[openai]' ({exc})") from exc

        self.config = config
        self.model = config.model or os.environ.get("OPENAI_MODEL")
        if not self.model:
            raise ChatAPIError("openai policy: no model given; use --policy openai:MODEL, plugins.openai.model or $OPENAI_MODEL")
        self.base_url = config.base_url or os.environ.get("OPENAI_BASE_URL") or DEFAULT_BASE_URL
        api_key = (config.api_key.get_secret_value() if config.api_key else None) or os.environ.get(config.api_key_env)
        if not api_key:
            if self.base_url == DEFAULT_BASE_URL:
                raise ChatAPIError(
                    f"openai policy: no API key for {self.base_url}; set ${config.api_key_env} or plugins.openai.api_key"
                )
            api_key = "EMPTY"  # local servers (vLLM, SGLang) usually accept any key
        self.client = openai.OpenAI(
            base_url=self.base_url, api_key=api_key, max_retries=0,
            # openai.Timeout is the timeout class of the HTTP library this SDK release uses (httpx, or httpx2 since
            # openai 3.63): an httpx.Timeout given to an httpx2 client fails in its constructor
            timeout=openai.Timeout(config.timeout_s, connect=config.connect_timeout_s),
        )

    def reset(self) -> None:
        """Nothing to forget: every request carries the full message list."""

    def query(self, messages: list[Message], tools: list[ToolSchema]) -> PolicyOutput:
        """Send the conversation; retry transient failures; return text, native calls and usage."""
        import openai
        from tenacity import (RetryCallState, Retrying, retry_if_exception, stop_after_attempt, wait_exponential,
                              wait_random)

        cfg = self.config
        backoff = (wait_exponential(multiplier=cfg.backoff_initial_s, max=cfg.backoff_max_s)
                   + wait_random(0, cfg.backoff_initial_s))

        def wait(state: RetryCallState) -> float:
            hinted = _retry_after(state.outcome.exception()) if state.outcome else None
            return max(backoff(state), min(hinted or 0.0, cfg.backoff_max_s))

        def before_sleep(state: RetryCallState) -> None:
            exc = state.outcome.exception() if state.outcome else None
            log.warning("chat request failed, retrying", attempt=state.attempt_number, error=repr(exc),
                        sleep_s=round(state.next_action.sleep, 3) if state.next_action else None)

        request: dict[str, Any] = {"model": self.model, "messages": to_api_messages(messages, cfg.native_tools)}
        for key in ("temperature", "top_p", "max_tokens", "seed"):
            if getattr(cfg, key) is not None:
                request[key] = getattr(cfg, key)
        if cfg.native_tools and tools:
            request["tools"] = [t.openai() for t in tools]
        if cfg.extra_body:
            request["extra_body"] = cfg.extra_body
        t0 = time.monotonic()
        attempts = 0
        try:
            for attempt in Retrying(stop=stop_after_attempt(cfg.max_attempts), wait=wait, reraise=True,
                                    retry=retry_if_exception(is_transient), before_sleep=before_sleep):
                with attempt:
                    attempts += 1
                    response = self.client.chat.completions.create(**request)
        except (openai.AuthenticationError, openai.PermissionDeniedError) as exc:
            raise ChatAPIError(
                f"openai policy: {self.base_url} refused the API key ({exc.status_code}: {_message(exc)}); "
                f"check ${cfg.api_key_env} or plugins.openai.api_key"
            ) from exc
        except openai.NotFoundError as exc:
            raise ChatAPIError(
                f"openai policy: model {self.model!r} not found at {self.base_url} ({_message(exc)}); "
                f"the server offers: {self._offered_models()}"
            ) from exc
        except openai.BadRequestError as exc:
            raise ChatAPIError(f"openai policy: {self.base_url} rejected the request (400: {_message(exc)})") from exc
        except Exception as exc:
            if is_transient(exc):
                raise ChatAPIError(
                    f"openai policy: {self.base_url} still failing after {attempts} attempts "
                    f"(plugins.openai.max_attempts={cfg.max_attempts}): {type(exc).__name__}: {exc}"
                ) from exc
            raise
        return self._output(response, attempts, time.monotonic() - t0)

    def _output(self, response: Any, attempts: int, latency: float) -> PolicyOutput:
        if not response.choices:
            raise ChatAPIError(f"openai policy: {self.base_url} returned no choices (response id {response.id})")
        choice = response.choices[0]
        usage = {"retries": attempts - 1}
        if response.usage is not None:
            usage.update(prompt_tokens=response.usage.prompt_tokens or 0,
                         completion_tokens=response.usage.completion_tokens or 0)
        return PolicyOutput(
            text=choice.message.content or "",
            tool_calls=parse_tool_calls(choice.message.tool_calls) if self.config.native_tools else None,
            finish_reason=choice.finish_reason,
            usage=usage,
            latency_s=latency,
        )

    def _offered_models(self) -> str:
        try:
            ids = sorted(m.id for m in self.client.models.list())
        except Exception as exc:  # listing is a courtesy: never hide the original error
            return f"(could not list models: {type(exc).__name__})"
        return ", ".join(ids) if ids else "(no models listed)"


def _message(exc: Any) -> str:
    body = getattr(exc, "body", None)
    if isinstance(body, dict):
        inner = body.get("error", body)
        if isinstance(inner, dict) and inner.get("message"):
            return str(inner["message"])
        if body.get("message"):
            return str(body["message"])
    return str(getattr(exc, "message", exc))


@hookimpl
def register_policies(register) -> None:
    """Register ``openai``."""
    register("openai", OpenAIChatPolicy, config_model=OpenAIPolicyConfig,
             description="OpenAI-compatible chat completions (hosted APIs, vLLM/SGLang servers).")
