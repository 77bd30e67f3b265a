"""The HTTP side of `yunshan serve`: FastAPI routes speaking OpenAI's API over the generation engine.

    app = build_app(engine, model_name="yunshan-demo", api_key=None)     # then uvicorn.run(app, ...)

    GET  /v1/models, /v1/models/{id}    the one model served
    POST /v1/chat/completions           messages rendered with the model's chat template; SSE when stream=true
    POST /v1/completions                raw prompts (a text, texts, token ids); SSE when stream=true
    GET  /health                        {"status", "queued", "running"} (no API key needed)

A request is checked before it is queued, and every refusal is an OpenAI error body with a 4xx status, never a 500
or a connection left hanging: malformed JSON or a bad field (400, naming the field), a wrong or missing API key
(401), an unknown model (404, code model_not_found), n above --max-n (400), a prompt that with max_tokens does not
fit the model's context (400, code context_length_exceeded), a full queue (429), shutting down (503). A streamed
answer's headers are sent only when its batch has started, so a request refused while it waited still gets its
status. Streams are server-sent events as OpenAI sends them (`data: {chunk}` lines, `data: [DONE]`), with the usage
in a last chunk when stream_options.include_usage is set.
"""

from __future__ import annotations

import asyncio
import hmac
import json
import logging

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, StreamingResponse
from starlette.exceptions import HTTPException

from yunshan.serve.engine import Delta, Failed, Finished, Job, Sampling
from yunshan.serve.protocol import (APIError, ChatCompletionRequest, CompletionRequest, chat_chunk, chat_completion,
                                    check_unicode, new_id, text_chunk, text_completion, usage)

log = logging.getLogger("yunshan.serve")


def build_app(engine, *, model_name: str, api_key: str | None = None, max_n: int = 8, max_tokens: int = 512,
              created: int = 0) -> FastAPI:
    """The FastAPI application serving `engine` (yunshan.serve.engine.Engine) as model `model_name`.

    Args:
        api_key: when set, every /v1 request must carry `Authorization: Bearer <api_key>`.
        max_n: the largest `n` (choices per request) accepted.
        max_tokens: the answer length of a request that gives no max_tokens (within the context left).
        created: the `created` time /v1/models reports (the model folder's time).
    """
    chat = engine.chat
    app = FastAPI(title="yunshan serve", docs_url=None, redoc_url=None, openapi_url=None)

    @app.exception_handler(APIError)
    async def _api_error(request: Request, err: APIError):
        return JSONResponse(err.body(), status_code=err.status)

    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, err: RequestValidationError):
        return JSONResponse(_validation_error(err).body(), status_code=400)

    @app.exception_handler(HTTPException)
    async def _http(request: Request, err: HTTPException):
        message = (f"Invalid URL ({request.method} {request.url.path})" if err.status_code in (404, 405)
                   else str(err.detail))
        return JSONResponse(APIError(err.status_code, message).body(), status_code=err.status_code)

    @app.exception_handler(Exception)
    async def _unexpected(request: Request, err: Exception):
        log.exception("unexpected error")
        return JSONResponse(APIError(500, f"internal error: {type(err).__name__}: {err}").body(), status_code=500)

    @app.middleware("http")
    async def _authenticate(request: Request, call_next):
        # A middleware, not a dependency: a request without the key is refused before its body is even read.
        if api_key and request.url.path.startswith("/v1"):
            header = request.headers.get("authorization", "")
            given = header[7:].strip() if header[:7].lower() == "bearer " else ""
            if not hmac.compare_digest(given.encode(), api_key.encode()):
                what = "Incorrect API key provided" if given else "Missing API key (Authorization: Bearer KEY)"
                error = APIError(401, f"{what}; the server was started with --api-key", code="invalid_api_key")
                return JSONResponse(error.body(), status_code=401)
        return await call_next(request)

    model_card = {"id": model_name, "object": "model", "created": created, "owned_by": "yunshan"}

    @app.get("/v1/models")
    async def list_models():
        return {"object": "list", "data": [model_card]}

    @app.get("/v1/models/{model_id:path}")
    async def get_model(model_id: str):
        _check_model(model_id, model_name, param=None)
        return model_card

    @app.get("/health")
    async def health():
        return {"status": "ok", **engine.stats()}

    def sampling_of(body, prompt_tokens: int, param: str) -> Sampling:
        """The request's sampling settings, with the answer length checked against the context."""
        context = chat.max_length
        what = "messages" if param == "messages" else "prompt"
        limit = body.completion_limit()
        if prompt_tokens >= context or (limit is not None and prompt_tokens + limit > context):
            asked = f"{prompt_tokens + limit} tokens ({prompt_tokens} in the {what}, {limit} in the completion)" \
                if limit is not None else f"{prompt_tokens} tokens in the {what}"
            raise APIError(400, f"This model's maximum context length is {context} tokens. However, you requested "
                                f"{asked}. Please reduce the length of the {what} or completion.",
                           param=param, code="context_length_exceeded")
        defaults = _model_defaults(chat.model)
        pick = lambda name, openai: getattr(body, name) if getattr(body, name) is not None else defaults.get(
            name, openai)
        bias = {int(k): v for k, v in (body.logit_bias or {}).items()}
        vocab = chat.model.get_input_embeddings().weight.shape[0]
        for token in bias:
            if not 0 <= token < vocab:
                raise APIError(400, f"logit_bias: token id {token} is outside the vocabulary (0-{vocab - 1})",
                               param="logit_bias")
        return Sampling(max_tokens=limit if limit is not None else min(max_tokens, context - prompt_tokens),
                        temperature=pick("temperature", 1.0), top_p=pick("top_p", 1.0), top_k=pick("top_k", 0),
                        min_p=pick("min_p", 0.0), repetition_penalty=pick("repetition_penalty", 1.0),
                        presence_penalty=body.presence_penalty or 0.0,
                        frequency_penalty=body.frequency_penalty or 0.0, logit_bias=bias, stop=body.stop_list(),
                        seed=body.seed)

    def check_common(body) -> int:
        _check_model(body.model, model_name, param="model")
        unsupported = body.unsupported()
        if unsupported is not None:
            raise unsupported
        n = body.n or 1
        if n > max_n:
            raise APIError(400, f"n={n} is more than this server allows ({max_n}; yunshan serve --max-n)", param="n")
        return n

    @app.post("/v1/chat/completions")
    async def chat_completions(body: ChatCompletionRequest, request: Request):
        from yunshan.chat import prompt_ids

        n = check_common(body)
        try:
            ids = prompt_ids(chat, body.conversation())
        except APIError:
            raise
        except Exception as err:  # the template's own refusal (jinja2 raise_exception, a role it does not know)
            raise APIError(400, f"messages: the model's chat template cannot render this conversation "
                                f"({type(err).__name__}: {err})", param="messages") from None
        loop = asyncio.get_running_loop()
        job = Job(ids, n, sampling_of(body, len(ids), "messages"), loop)
        return await _answer(engine, request, [job], n, stream=bool(body.stream), chat=True, model=model_name,
                             include_usage=bool(body.stream_options and body.stream_options.include_usage))

    @app.post("/v1/completions")
    async def completions(body: CompletionRequest, request: Request):
        n = check_common(body)
        loop = asyncio.get_running_loop()
        events: asyncio.Queue = asyncio.Queue()
        jobs, echoes = [], []
        prompts = body.prompts()
        for number, prompt in enumerate(prompts):
            if isinstance(prompt, str):
                check_unicode(prompt, f"prompt[{number}]" if len(prompts) > 1 else "prompt", "prompt")
                ids = chat.tokenizer(prompt)["input_ids"]  # special tokens as the tokenizer adds them (BOS)
            elif isinstance(prompt, list) and all(isinstance(t, int) for t in prompt):
                ids = list(prompt)
                vocab = chat.model.get_input_embeddings().weight.shape[0]
                if any(not 0 <= t < vocab for t in ids):
                    raise APIError(400, f"prompt[{number}]: token ids lie in 0-{vocab - 1}", param="prompt")
            else:
                raise APIError(400, "prompt must be a string, a list of strings, a list of token ids or a list of "
                                    "lists of token ids", param="prompt")
            if not ids:
                raise APIError(400, f"prompt{f'[{number}]' if len(prompts) > 1 else ''} is empty (no tokens)",
                               param="prompt")
            jobs.append(Job(ids, n, sampling_of(body, len(ids), "prompt"), loop, first_index=number * n,
                            events=events))
            echoes.append(prompt if isinstance(prompt, str) else chat.tokenizer.decode(ids))
        return await _answer(engine, request, jobs, n, stream=bool(body.stream), chat=False, model=model_name,
                             include_usage=bool(body.stream_options and body.stream_options.include_usage),
                             echo=echoes if body.echo else None)

    return app


def _check_model(name: str, served: str, param: str | None) -> None:
    if name != served:
        raise APIError(404, f"The model `{name}` does not exist; this server serves `{served}` (GET /v1/models)",
                       param=param, code="model_not_found")


def _model_defaults(model) -> dict:
    """Sampling defaults the model's generation_config.json sets (used where a request gives none, as vLLM does);
    temperature, top_p and top_k only when it samples."""
    config = getattr(model, "generation_config", None)
    if config is None:
        return {}
    defaults = {}
    if getattr(config, "do_sample", False):
        for name in ("temperature", "top_p", "top_k", "min_p"):
            if getattr(config, name, None) is not None:
                defaults[name] = getattr(config, name)
    if getattr(config, "repetition_penalty", None) is not None:
        defaults["repetition_penalty"] = config.repetition_penalty
    return defaults


def _validation_error(err: RequestValidationError) -> APIError:
    """pydantic's first complaint as OpenAI words it, naming the field."""
    first = err.errors()[0] if err.errors() else {"type": "", "loc": (), "msg": "invalid request"}
    loc = [str(part) for part in first.get("loc", ()) if part != "body"]
    field = ".".join(loc) or None
    kind = first.get("type", "")
    if kind == "json_invalid":
        return APIError(400, "We could not parse the JSON body of your request: "
                             f"{first.get('ctx', {}).get('error', 'not valid JSON')}. The API expects a JSON payload "
                             "(Content-Type: application/json).")
    if kind == "extra_forbidden":
        return APIError(400, f"Unrecognized request argument supplied: {field}", param=field)
    if kind == "missing":
        return APIError(400, f"Missing required parameter: '{field}'.", param=field)
    if kind in ("model_attributes_type", "dict_type") and not loc:
        return APIError(400, "The request body must be a JSON object.")
    value = first.get("input")
    shown = json.dumps(value, ensure_ascii=False)[:80] if isinstance(value, (int, float, str, bool)) else None
    return APIError(400, f"Invalid value for '{field}': {first.get('msg')}" + (f" (got {shown})" if shown else ""),
                    param=field)


async def _next_event(queue: asyncio.Queue, request: Request | None, jobs: list[Job]):
    """The next event of the request's jobs; the jobs are cancelled if the client has gone meanwhile. Inside a
    stream `request` is None: Starlette's StreamingResponse watches for the disconnect itself (and cancels the
    stream, whose `finally` cancels the jobs), and two readers of the connection would race for the message."""
    if request is None:
        return await queue.get()
    while True:
        try:
            return await asyncio.wait_for(queue.get(), timeout=1.0)
        except asyncio.TimeoutError:
            if await request.is_disconnected():
                for job in jobs:
                    job.cancelled.set()
                raise asyncio.CancelledError from None


async def _answer(engine, request: Request, jobs: list[Job], n: int, *, stream: bool, chat: bool, model: str,
                  include_usage: bool, echo: list[str] | None = None):
    """Queue the jobs and answer: one JSON body, or a stream of server-sent events."""
    submitted = []
    try:
        for job in jobs:
            engine.submit(job)
            submitted.append(job)
    except APIError:
        for job in submitted:
            job.cancelled.set()
        raise
    queue = jobs[0].events
    choices = len(jobs) * n
    prompt_tokens = sum(len(job.prompt_ids) for job in jobs)
    rid = new_id("chatcmpl" if chat else "cmpl")
    try:
        first = await _next_event(queue, request, jobs)
    except asyncio.CancelledError:
        for job in jobs:
            job.cancelled.set()
        raise
    if isinstance(first, Failed):
        for job in jobs:
            job.cancelled.set()
        raise first.error

    if not stream:
        texts, finishes, completion_tokens = [""] * choices, [None] * choices, 0
        if echo:
            texts = [echo[i // n] for i in range(choices)]
        event, left = first, choices
        try:
            while True:
                if isinstance(event, Failed):
                    raise event.error
                if isinstance(event, Delta):
                    texts[event.index] += event.text
                elif isinstance(event, Finished):
                    finishes[event.index] = event.reason
                    completion_tokens += event.tokens
                    left -= 1
                if not left:
                    break
                event = await _next_event(queue, request, jobs)
        finally:
            if left:
                for job in jobs:
                    job.cancelled.set()
        body = (chat_completion if chat else text_completion)(rid, model, texts, finishes,
                                                              usage(prompt_tokens, completion_tokens))
        return JSONResponse(body)

    import time

    created = int(time.time())

    def sse(chunk: dict) -> str:
        return f"data: {json.dumps(chunk, ensure_ascii=False, separators=(',', ':'))}\n\n"

    async def events():
        event, left, completion_tokens = first, choices, 0
        try:
            for index in range(choices):
                if chat:
                    yield sse(chat_chunk(rid, model, created, index, {"role": "assistant", "content": ""}))
                elif echo:
                    yield sse(text_chunk(rid, model, created, index, echo[index // n]))
            while True:
                if isinstance(event, Failed):
                    yield sse(event.error.body())
                    return
                if isinstance(event, Delta):
                    yield sse(chat_chunk(rid, model, created, event.index, {"content": event.text}) if chat
                              else text_chunk(rid, model, created, event.index, event.text))
                elif isinstance(event, Finished):
                    completion_tokens += event.tokens
                    left -= 1
                    yield sse(chat_chunk(rid, model, created, event.index, {}, finish=event.reason) if chat
                              else text_chunk(rid, model, created, event.index, "", finish=event.reason))
                if not left:
                    break
                event = await _next_event(queue, None, jobs)
            if include_usage:
                totals = usage(prompt_tokens, completion_tokens)
                yield sse(chat_chunk(rid, model, created, None, usage_=totals) if chat
                          else text_chunk(rid, model, created, None, usage_=totals))
            yield "data: [DONE]\n\n"
        finally:
            if left:  # the client left (or the stream failed): its rows stop at their next token
                for job in jobs:
                    job.cancelled.set()

    return StreamingResponse(events(), media_type="text/event-stream",
                             headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})
