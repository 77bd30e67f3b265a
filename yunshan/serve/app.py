"""The HTTP side of `yunshan serve`: FastAPI routes speaking OpenAI's API over the generation engine.

    app = build_app(engine, model_name="yunshan-demo", api_key=None)     # then uvicorn.run(app, ...)

    GET  /v1/models, /v1/models/{id}    the one model served
    POST /v1/chat/completions           messages rendered with the model's chat template; SSE when stream=true
    POST /v1/completions                raw prompts (a text, texts, token ids); SSE when stream=true
    GET  /health                        {"status", "queued", "running"} (no API key needed)

A request is checked before it is queued, and every refusal is an OpenAI error body with a 4xx status, never a 500
or a connection left hanging: a wrong or missing API key (401, before the body is read), a body over --max-body-mb
(413, counted as it arrives, before any parsing), malformed JSON or a bad field (400, naming the field), an unknown
model (404, code model_not_found), n above --max-n (400), a prompt that with max_tokens does not fit the model's
context (400, code context_length_exceeded), a full queue (429), shutting down (503). Prompts are rendered and
tokenised on one thread of their own, never on the event loop, so /health and the streams go on meanwhile; a prompt
whose characters alone prove it longer than the context (yunshan.serve.token_bound) is refused without tokenising
it. A streamed answer's headers are sent only when its batch has started, so a request refused while it waited
still gets its status. Streams are server-sent events as OpenAI sends them (`data: {chunk}` lines, `data: [DONE]`),
with the usage in a last chunk when stream_options.include_usage is set. A client that leaves (streamed or not,
queued or running) has its rows stopped at their next token.
"""

from __future__ import annotations

import asyncio
import hmac
import json
import logging
from concurrent.futures import ThreadPoolExecutor

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response, StreamingResponse
from starlette.exceptions import HTTPException

from yunshan.serve.engine import Delta, Failed, Finished, Job, Sampling
from yunshan.serve.protocol import (APIError, ChatCompletionRequest, CompletionRequest, chat_chunk, chat_completion,
                                    check_unicode, new_id, text_chunk, text_completion, usage)
from yunshan.serve.token_bound import TokenBound

log = logging.getLogger("yunshan.serve")
MAX_BODY_BYTES = 8 * 2**20  # yunshan serve --max-body-mb 8: a 128k-token prompt as JSON is a few MB at most
_GONE = object()  # put in a request's event queue when its client disconnects


def build_app(engine, *, model_name: str, api_key: str | None = None, max_n: int = 8, max_tokens: int = 512,
              created: int = 0, max_body_bytes: int = MAX_BODY_BYTES) -> FastAPI:
    """The FastAPI application serving `engine` (yunshan.serve.engine.Engine) as model `model_name`.

    Args:
        api_key: when set, every /v1 request must carry `Authorization: Bearer <api_key>`.
        max_n: the largest `n` (choices per request) accepted.
        max_tokens: the answer length of a request that gives no max_tokens (within the context left).
        created: the `created` time /v1/models reports (the model folder's time).
        max_body_bytes: a larger request body is refused with 413 as soon as that many bytes have arrived.
    """
    chat = engine.chat
    bound = TokenBound.of(chat.tokenizer)
    # One thread renders chat templates and tokenises: off the event loop, so /health and the streams go on while a
    # long prompt is read; one, since a fast tokenizer used from two threads at once can fail ("Already borrowed").
    tokenising = ThreadPoolExecutor(1, thread_name_prefix="yunshan-serve-tokenise")
    app = FastAPI(title="yunshan serve", docs_url=None, redoc_url=None, openapi_url=None)
    app.add_middleware(_Gate, api_key=api_key, max_body_bytes=max_body_bytes)

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

    def check_fits(body, prompt_tokens: int, param: str, text: str | None = None) -> None:
        """APIError context_length_exceeded unless the prompt and the completion fit the context. With `text`,
        `prompt_tokens` is the least the text can encode to (TokenBound), checked before tokenising it."""
        context = chat.max_length
        what = "messages" if param == "messages" else "prompt"
        limit = body.completion_limit()
        if prompt_tokens >= context or (limit is not None and prompt_tokens + limit > context):
            least = "" if text is None else "at least "
            why = "" if text is None else f" ({len(text)} characters, and {bound.basis})"
            asked = (f"{least}{prompt_tokens} tokens in the {what}{why}" if limit is None else
                     f"{least}{prompt_tokens + limit} tokens ({least}{prompt_tokens} in the {what}{why}, {limit} in "
                     "the completion)")
            raise APIError(400, f"This model's maximum context length is {context} tokens. However, you requested "
                                f"{asked}. Please reduce the length of the {what} or completion.",
                           param=param, code="context_length_exceeded")

    def tokenise(body, text: str, param: str, **options) -> list[int]:
        """The text's token ids (on the tokenising thread), refused at once if its length alone rules it out."""
        check_fits(body, bound.least(text), param, text=text)
        return chat.tokenizer(text, **options)["input_ids"]

    def chat_prompt(body) -> list[int]:
        from yunshan.data.chat import render

        try:
            text = render(chat.tokenizer, body.conversation(), add_generation_prompt=True)
        except APIError:
            raise
        except Exception as err:  # the template's own refusal (jinja2 raise_exception, a role it does not know)
            raise APIError(400, f"messages: the model's chat template cannot render this conversation "
                                f"({type(err).__name__}: {err})", param="messages") from None
        return tokenise(body, text, "messages", add_special_tokens=False)  # the template writes them, as in SFT

    def sampling_of(body, prompt_tokens: int, param: str) -> Sampling:
        """The request's sampling settings, with the answer length checked against the context."""
        check_fits(body, prompt_tokens, param)
        context = chat.max_length
        limit = body.completion_limit()
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
        n = check_common(body)
        loop = asyncio.get_running_loop()
        ids = await loop.run_in_executor(tokenising, chat_prompt, body)
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
                name = f"prompt[{number}]" if len(prompts) > 1 else "prompt"
                check_unicode(prompt, name, "prompt")
                # Special tokens as the tokenizer adds them (BOS).
                ids = await loop.run_in_executor(tokenising, tokenise, body, prompt, "prompt")
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
            echoes.append(prompt if isinstance(prompt, str) else
                          await loop.run_in_executor(tokenising, chat.tokenizer.decode, ids))
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


class _Gate:
    """ASGI middleware in front of every route: the API key, then the request-body limit. A plain ASGI class, not
    FastAPI's @app.middleware("http") (Starlette's BaseHTTPMiddleware), which would stand between the routes and
    the connection's receive channel, where they hear the client leave (_watch_disconnect)."""

    # After refusing a body, how long to read (and drop) what the client still sends before answering: a client
    # writing its body reads no answer yet, and closing a connection with unread data resets it (the 413 is lost).
    DRAIN_S = 1.0

    def __init__(self, app, *, api_key: str | None, max_body_bytes: int):
        self.app, self.api_key, self.max_body_bytes = app, api_key, max_body_bytes

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        headers = dict(scope["headers"])
        if self.api_key and scope["path"].startswith("/v1"):  # refused before its body is even read
            header = headers.get(b"authorization", b"").decode("latin-1")
            given = header[7:].strip() if header[:7].lower() == "bearer " else ""
            if not hmac.compare_digest(given.encode(), self.api_key.encode()):
                what = "Incorrect API key provided" if given else "Missing API key (Authorization: Bearer KEY)"
                error = APIError(401, f"{what}; the server was started with --api-key", code="invalid_api_key")
                return await JSONResponse(error.body(), status_code=401)(scope, receive, send)
        declared = headers.get(b"content-length", b"")
        if declared.isdigit() and int(declared) > self.max_body_bytes:
            # A client that asked "Expect: 100-continue" (curl, for bodies over 1 MB) has sent none of it yet: the
            # 413 goes at once (reading would make uvicorn invite the body with "100 Continue").
            waiting = headers.get(b"expect", b"").lower() == b"100-continue"
            return await self._too_large(scope, receive, send, f"{int(declared)} bytes", more=not waiting)
        # Read the body here, counting (a chunked body declares no length), and hand it on whole.
        body, more = bytearray(), True
        while more:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            body += message.get("body", b"")
            more = message.get("more_body", False)
            if len(body) > self.max_body_bytes:
                body.clear()  # nothing of it is kept while the rest is read and dropped
                return await self._too_large(scope, receive, send, f"more than {self.max_body_bytes} bytes",
                                             more=more)
        replayed = False

        async def replay():
            nonlocal replayed
            if replayed:
                return await receive()
            replayed = True
            return {"type": "http.request", "body": bytes(body), "more_body": False}

        await self.app(scope, replay, send)

    async def _too_large(self, scope, receive, send, size: str, more: bool = True):
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.DRAIN_S
        while more and loop.time() < deadline:
            try:
                message = await asyncio.wait_for(receive(), deadline - loop.time())
            except asyncio.TimeoutError:
                break
            if message["type"] == "http.disconnect":
                return
            more = message.get("more_body", False)
        limit = self.max_body_bytes / 2**20
        error = APIError(413, f"The request body ({size}) is larger than this server accepts ({limit:g} MiB; "
                              "yunshan serve --max-body-mb)", code="request_too_large")
        response = JSONResponse(error.body(), status_code=413, headers={"Connection": "close"})
        await response(scope, receive, send)


def _client_gone() -> Response:
    # Nobody reads it: the status (nginx's 499, "client closed request") is for the access log.
    return Response(status_code=499)


async def _watch_disconnect(request: Request, jobs: list[Job], queue: asyncio.Queue) -> None:
    """Wait for the client to leave; then its rows stop at their next token (a queued job is dropped) and the
    answer waiting on `queue` wakes. The route's receive channel is the connection's own (no BaseHTTPMiddleware in
    between; _Gate replays the body it read), which after the body says only http.disconnect."""
    while (await request.receive())["type"] != "http.disconnect":
        pass
    for job in jobs:
        job.cancelled.set()
    queue.put_nowait(_GONE)


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
    # Until the answer is sent (a body) or its stream begins, a task watches for the client leaving. A stream's
    # StreamingResponse watches for itself (and cancels the stream, whose `finally` cancels the jobs): two
    # watchers would both read the connection.
    watcher = asyncio.create_task(_watch_disconnect(request, jobs, queue))
    finished = False
    try:
        first = await queue.get()
        if first is _GONE:
            return _client_gone()
        if isinstance(first, Failed):
            raise first.error
        if stream:
            finished = True  # the stream's own `finally` cancels the jobs if it ends early
        else:
            texts, finishes, completion_tokens = [""] * choices, [None] * choices, 0
            if echo:
                texts = [echo[i // n] for i in range(choices)]
            event, left = first, choices
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
                event = await queue.get()
                if event is _GONE:
                    return _client_gone()
            finished = True
            body = (chat_completion if chat else text_completion)(rid, model, texts, finishes,
                                                                  usage(prompt_tokens, completion_tokens))
            return JSONResponse(body)
    finally:
        watcher.cancel()
        if not finished:  # refused, failed, the client left, or the server cancelled the request
            for job in jobs:
                job.cancelled.set()

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
                event = await queue.get()
                if event is _GONE:  # the client left as the stream began
                    return
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
