"""The OpenAI wire format of `yunshan serve`: request schemas, errors in OpenAI's shape, response bodies and chunks.

    from yunshan.serve.protocol import ChatCompletionRequest, APIError
    request = ChatCompletionRequest.model_validate(body)    # pydantic; a bad field becomes a 400 naming it

Requests are pydantic models with OpenAI's names and ranges (temperature 0-2, top_p 0-1, penalties -2..2,
logit_bias -100..100 keyed by ASCII token ids, at most 4 stop strings), plus the extensions vLLM accepts under the
same names (top_k, min_p, repetition_penalty). Every sampling number is bounded where it is parsed, so no request can
take the sampler out of float32's range or overflow a generator's seed: temperature is 0 (greedy) or at least
TEMPERATURE_FLOOR, seed a 64-bit integer, repetition_penalty within REPETITION_PENALTY. Text that reaches the
tokenizer must be Unicode: a lone UTF-16 surrogate (JSON's "\\ud800" escape) is refused naming the field. A field
OpenAI defines that this server does not implement (tools, logprobs, audio, ...) is refused with a 400 naming it
rather than silently ignored; an unknown field is refused as OpenAI refuses it ("Unrecognized request argument
supplied"). Every error body is OpenAI's: {"error": {"message", "type", "param", "code"}}, which the official client
turns into its typed exceptions (BadRequestError, NotFoundError, ...).
"""

from __future__ import annotations

import re
import time
import uuid
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

# Fields of OpenAI's request bodies that yunshan serve does not implement: refused by name, never ignored.
UNSUPPORTED_CHAT = ("tools", "tool_choice", "functions", "function_call", "parallel_tool_calls", "audio",
                    "modalities", "prediction", "web_search_options", "reasoning_effort", "top_logprobs")
UNSUPPORTED_COMPLETION = ("suffix",)
# Accepted and without effect here (bookkeeping fields of OpenAI's platform).
IGNORED = ("user", "metadata", "store", "service_tier")
# A positive temperature below this divides real logits (tens in float32) into infinities, and the probabilities
# become NaN; vLLM clamps at the same 0.01 for the same reason. Here it is refused rather than changed.
TEMPERATURE_FLOOR = 0.01
# repetition_penalty divides (or multiplies) the scores of tokens already seen: 1e-300 is 0 in float32 (division by
# zero). Within [0.01, 100] a score changes by at most a factor 100, far inside float32 after the temperature too.
REPETITION_PENALTY = (0.01, 100.0)
# torch.Generator.manual_seed takes any 64-bit integer, signed or not (a negative seed means seed + 2**64).
SEED_RANGE = (-2**63, 2**64 - 1)
_SURROGATE = re.compile("[\ud800-\udfff]")


class APIError(Exception):
    """An error answered as OpenAI answers it: HTTP `status` and {"error": {message, type, param, code}}."""

    def __init__(self, status: int, message: str, *, param: str | None = None, code: str | None = None,
                 kind: str | None = None):
        super().__init__(message)
        self.status, self.message, self.param, self.code = status, message, param, code
        self.kind = kind or ("invalid_request_error" if status < 500 else "server_error")

    def body(self) -> dict:
        return {"error": {"message": self.message, "type": self.kind, "param": self.param, "code": self.code}}


class StreamOptions(BaseModel):
    model_config = ConfigDict(extra="forbid")
    include_usage: bool | None = False


class _Request(BaseModel):
    # Unknown fields are refused (OpenAI: "Unrecognized request argument supplied: X").
    model_config = ConfigDict(extra="forbid")

    model: str
    stream: bool | None = False
    stream_options: StreamOptions | None = None
    n: int | None = Field(default=1, ge=1)
    max_tokens: int | None = Field(default=None, ge=1)
    temperature: float | None = Field(default=None, ge=0.0, le=2.0)  # and 0 or >= TEMPERATURE_FLOOR
    top_p: float | None = Field(default=None, gt=0.0, le=1.0)
    stop: str | list[str] | None = None
    seed: int | None = Field(default=None, ge=SEED_RANGE[0], le=SEED_RANGE[1])
    presence_penalty: float | None = Field(default=0.0, ge=-2.0, le=2.0)
    frequency_penalty: float | None = Field(default=0.0, ge=-2.0, le=2.0)
    logit_bias: dict[str, float] | None = None
    # Extensions under vLLM's names (not in OpenAI's API; the openai client sends them through extra_body).
    top_k: int | None = Field(default=None, ge=0, le=2**31 - 1)
    min_p: float | None = Field(default=None, ge=0.0, le=1.0)
    repetition_penalty: float | None = Field(default=None, ge=REPETITION_PENALTY[0], le=REPETITION_PENALTY[1])
    user: str | None = None
    metadata: dict | None = None
    store: bool | None = None
    service_tier: str | None = None

    @field_validator("stop")
    @classmethod
    def _stop(cls, value):
        stops = [value] if isinstance(value, str) else list(value or [])
        if len(stops) > 4:
            raise ValueError("at most 4 stop sequences")
        if any(not s for s in stops):
            raise ValueError("a stop sequence must not be empty")
        return stops

    @field_validator("temperature")
    @classmethod
    def _temperature(cls, value):
        if value is not None and 0 < value < TEMPERATURE_FLOOR:
            raise ValueError(f"must be 0 (greedy) or at least {TEMPERATURE_FLOOR} (a smaller temperature turns the "
                             "scores into infinities)")
        return value

    @field_validator("logit_bias")
    @classmethod
    def _bias(cls, value):
        for key, bias in (value or {}).items():
            # ASCII digits only: str.isdigit() also holds for "²" or "١", which int() then refuses or reads.
            if not re.fullmatch("-?[0-9]+", key):
                raise ValueError(f"keys are token ids (ASCII digits), got {key!r}")
            if not -100 <= bias <= 100:
                raise ValueError(f"biases lie in [-100, 100], got {bias} for token {key}")
        return value

    def stop_list(self) -> list[str]:
        return list(self.stop or [])


class ChatMessage(BaseModel):
    model_config = ConfigDict(extra="forbid")

    # "developer" is OpenAI's newer name for the system role; it is rendered as "system".
    role: Literal["system", "developer", "user", "assistant"]
    content: str | list[dict] | None = None
    name: str | None = None

    def text(self, index: int) -> str:
        """The content as one string: OpenAI's text parts joined; any other part (images, audio) is refused."""
        if self.content is None:
            return ""
        if isinstance(self.content, str):
            return check_unicode(self.content, f"messages[{index}].content", f"messages.[{index}].content")
        texts = []
        for number, part in enumerate(self.content):
            if part.get("type") != "text" or not isinstance(part.get("text"), str):
                raise APIError(400, f"messages[{index}].content[{number}]: only text parts "
                                    f"({{'type': 'text', 'text': ...}}) are supported, got type {part.get('type')!r}",
                               param=f"messages.[{index}].content")
            texts.append(check_unicode(part["text"], f"messages[{index}].content[{number}].text",
                                       f"messages.[{index}].content"))
        return "".join(texts)


class ChatCompletionRequest(_Request):
    messages: list[ChatMessage] = Field(min_length=1)
    max_completion_tokens: int | None = Field(default=None, ge=1)
    logprobs: bool | None = None
    response_format: dict | None = None
    # Named only to refuse them with a clear message (UNSUPPORTED_CHAT).
    tools: list | None = None
    tool_choice: object | None = None
    functions: list | None = None
    function_call: object | None = None
    parallel_tool_calls: bool | None = None
    audio: object | None = None
    modalities: list | None = None
    prediction: object | None = None
    web_search_options: object | None = None
    reasoning_effort: str | None = None
    top_logprobs: int | None = None

    def unsupported(self) -> APIError | None:
        for name in UNSUPPORTED_CHAT:
            value = getattr(self, name)
            if value is not None and not (name == "parallel_tool_calls" and value is False):
                return APIError(400, f"{name} is not supported by yunshan serve", param=name)
        if self.logprobs:
            return APIError(400, "logprobs is not supported by yunshan serve", param="logprobs")
        if self.response_format is not None and self.response_format.get("type") != "text":
            return APIError(400, "response_format other than {'type': 'text'} is not supported by yunshan serve",
                            param="response_format")
        return None

    def completion_limit(self) -> int | None:
        return self.max_completion_tokens if self.max_completion_tokens is not None else self.max_tokens

    def conversation(self) -> list[dict]:
        return [{"role": "system" if m.role == "developer" else m.role, "content": m.text(i)}
                for i, m in enumerate(self.messages)]


class CompletionRequest(_Request):
    prompt: str | list[str] | list[int] | list[list[int]]
    echo: bool | None = False
    best_of: int | None = Field(default=None, ge=1)
    logprobs: int | None = None
    suffix: str | None = None

    def unsupported(self) -> APIError | None:
        if self.suffix is not None:
            return APIError(400, "suffix is not supported by yunshan serve", param="suffix")
        if self.logprobs is not None:
            return APIError(400, "logprobs is not supported by yunshan serve", param="logprobs")
        if self.best_of is not None and self.best_of != (self.n or 1):
            return APIError(400, "best_of other than n is not supported by yunshan serve", param="best_of")
        return None

    def completion_limit(self) -> int | None:
        return self.max_tokens

    def prompts(self) -> list[str | list[int]]:
        """The prompts: each a text or a list of token ids (OpenAI's four shapes of `prompt`)."""
        p = self.prompt
        if isinstance(p, str):
            return [p]
        if not p:
            raise APIError(400, "prompt must not be empty", param="prompt")
        if all(isinstance(x, int) for x in p):
            return [list(p)]
        return list(p)


def check_unicode(text: str, field: str, param: str) -> str:
    """`text` if it is Unicode, else APIError 400 naming `field` and the character. JSON's "\\ud800" escape decodes
    to a lone UTF-16 surrogate, which is no character: UTF-8 cannot encode it, so the tokenizer (or the chat
    template before it) would fail on it. A proper pair ("\\ud83d\\ude00") decodes to its one character."""
    bad = _SURROGATE.search(text)
    if bad:
        raise APIError(400, f"{field}: invalid character U+{ord(bad.group()):04X} at position {bad.start()}: a lone "
                            "UTF-16 surrogate is not a Unicode character (send UTF-8 text, or JSON \\u escapes in "
                            "surrogate pairs)", param=param)
    return text


def new_id(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex}"


def usage(prompt_tokens: int, completion_tokens: int) -> dict:
    return {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens}


def chat_completion(rid: str, model: str, texts: list[str], finishes: list[str], usage_: dict) -> dict:
    return {"id": rid, "object": "chat.completion", "created": int(time.time()), "model": model,
            "system_fingerprint": None,
            "choices": [{"index": i, "message": {"role": "assistant", "content": text}, "logprobs": None,
                         "finish_reason": finish} for i, (text, finish) in enumerate(zip(texts, finishes))],
            "usage": usage_}


def chat_chunk(rid: str, model: str, created: int, index: int | None, delta: dict | None = None,
               finish: str | None = None, usage_: dict | None = None) -> dict:
    choices = [] if index is None else [{"index": index, "delta": delta or {}, "logprobs": None,
                                         "finish_reason": finish}]
    chunk = {"id": rid, "object": "chat.completion.chunk", "created": created, "model": model,
             "system_fingerprint": None, "choices": choices}
    if usage_ is not None:
        chunk["usage"] = usage_
    return chunk


def text_completion(rid: str, model: str, texts: list[str], finishes: list[str], usage_: dict) -> dict:
    return {"id": rid, "object": "text_completion", "created": int(time.time()), "model": model,
            "system_fingerprint": None,
            "choices": [{"index": i, "text": text, "logprobs": None, "finish_reason": finish}
                        for i, (text, finish) in enumerate(zip(texts, finishes))],
            "usage": usage_}


def text_chunk(rid: str, model: str, created: int, index: int | None, text: str = "", finish: str | None = None,
               usage_: dict | None = None) -> dict:
    choices = [] if index is None else [{"index": index, "text": text, "logprobs": None, "finish_reason": finish}]
    chunk = {"id": rid, "object": "text_completion", "created": created, "model": model,
             "system_fingerprint": None, "choices": choices}
    if usage_ is not None:
        chunk["usage"] = usage_
    return chunk
