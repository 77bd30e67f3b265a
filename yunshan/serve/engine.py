"""The generation worker of `yunshan serve`: requests wait in one queue and run in batches through generate().

    engine = Engine(chat_model, max_batch_size=8)            # chat_model: yunshan.serve.chat.load_chat_model(...)
    engine.start()
    job = Job(prompt_ids, n=1, sampling=Sampling(max_tokens=64), loop=asyncio.get_running_loop())
    engine.submit(job)                                       # then read job.events: Started, Delta..., Finished
    engine.drain(); engine.stop()                            # Ctrl-C: the queue runs dry, then the thread ends

One thread owns the model. When it is free it takes the oldest queued requests, as many as fit in one batch (at most
`max_batch_size` rows, a request with n choices being n rows, and the padded length within the model's context),
left-pads their prompts and runs them as one `generate()` call; requests that arrive meanwhile wait for the next
batch. A request is never dropped: it is answered, refused before it is queued (a full queue: 429; shutting down:
503), or failed with the reason.

transformers' generate() does the decoding (KV cache, padding masks, position ids); what it cannot do per row of a
batch is written here, as its own extension points: a LogitsProcessor (`_Choose`) applies each row's OpenAI settings
(logit_bias, presence and frequency penalties as OpenAI defines them, repetition_penalty, then temperature, top-k,
top-p and min-p with transformers' own warpers) and samples with the row's own torch.Generator, so a request's
`seed` gives the same answer whatever else is in its batch; a StoppingCriteria (`_Advance`) decodes each row's new
token incrementally (tokenizers' DecodeStream), stops it at the model's stop ids, at its own stop strings (held back
while they may still be starting, cut off as OpenAI does) or at its max_tokens, and sends the text to the request as
it is produced. generate() runs greedy selection (argmax) over the scores `_Choose` leaves, which for a sampled row
are -inf everywhere but the token it drew: greedy rows get exactly generate()'s greedy answer.

A failure that belongs to one request (its settings make the scores NaN or infinite, its sampler or decoder raises)
fails that request alone (500, with the reason): its rows stop and the other rows of the batch go on. Only a
failure of the model's forward pass fails the whole batch.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import threading
from dataclasses import dataclass, field

from yunshan.serve.protocol import APIError

log = logging.getLogger("yunshan.serve")


@dataclass
class Sampling:
    """How one request samples; OpenAI's names, with vLLM's extensions (top_k, min_p, repetition_penalty)."""

    max_tokens: int
    temperature: float = 1.0  # 0: greedy
    top_p: float = 1.0
    top_k: int = 0  # 0: no limit
    min_p: float = 0.0
    repetition_penalty: float = 1.0  # transformers' (CTRL) penalty over prompt and answer; 1: none
    presence_penalty: float = 0.0  # OpenAI's: subtracted once from every token already in the answer
    frequency_penalty: float = 0.0  # OpenAI's: subtracted per occurrence in the answer
    logit_bias: dict[int, float] = field(default_factory=dict)
    stop: list[str] = field(default_factory=list)
    seed: int | None = None


@dataclass
class Started:
    """The request's batch began generating."""


@dataclass
class Delta:
    index: int  # choice index
    text: str


@dataclass
class Finished:
    index: int
    reason: str  # "stop" | "length"
    tokens: int  # completion tokens of this choice


@dataclass
class Failed:
    error: APIError


class Job:
    """One prompt and its n choices, as submitted; the engine reports to `events` (an asyncio.Queue of the loop
    that submitted it): Started, then Delta and Finished per choice, or Failed."""

    def __init__(self, prompt_ids: list[int], n: int, sampling: Sampling, loop: asyncio.AbstractEventLoop,
                 first_index: int = 0, events: asyncio.Queue | None = None):
        self.prompt_ids, self.n, self.sampling, self.loop = list(prompt_ids), n, sampling, loop
        self.first_index = first_index  # /v1/completions with several prompts: choice indices continue
        # The jobs of one request (several prompts of /v1/completions) may share one queue.
        self.events: asyncio.Queue = events if events is not None else asyncio.Queue()
        self.cancelled = threading.Event()  # the client went away: its rows stop at the next token
        self.failed = False  # one of its rows failed (_Row.fail): the others stop too, the request got Failed

    def emit(self, event) -> None:
        try:
            self.loop.call_soon_threadsafe(self.events.put_nowait, event)
        except RuntimeError:  # the event loop is closed: nobody is waiting any more
            pass


class Engine:
    """The queue and the worker thread; see the module docstring."""

    def __init__(self, chat, *, max_batch_size: int = 8, max_queue: int = 256, seed: int | None = None):
        import torch

        self.chat = chat
        self.max_batch_size = max_batch_size
        self.max_queue = max_queue
        self.stop_ids = sorted(set(chat.stop_ids))
        tokenizer = chat.tokenizer
        self.pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else (
            self.stop_ids[0] if self.stop_ids else 0)
        # The worker decodes with its own copy of the Rust tokenizer: a fast tokenizer used from two threads at once
        # (requests are tokenised on the event loop) fails with "Already borrowed".
        backend = getattr(tokenizer, "_tokenizer", None)
        if backend is not None:
            from tokenizers import Tokenizer

            backend = Tokenizer.from_str(backend.to_str())
        self._backend = backend
        self._decode_slow = tokenizer.decode if backend is None else None
        self._queue: collections.deque[Job] = collections.deque()
        self._cond = threading.Condition()
        # new -> running -> draining (Ctrl-C: still takes the requests uvicorn already received) -> stopping (the
        # worker ends when the queue is empty); aborting: the queue is failed and the running rows stopped.
        self._state = "new"
        self._running: list[Job] = []
        self._batches, self._largest = 0, 0  # batches run and the most rows in one (/health reports them)
        self._thread = threading.Thread(target=self._work, name="yunshan-serve-engine", daemon=True)
        self._rng = torch.Generator().manual_seed(seed) if seed is not None else torch.Generator()
        if seed is None:
            self._rng.seed()

    # ------------------------------------------------------------ the queue

    def start(self) -> None:
        self._state = "running"
        self._thread.start()

    def submit(self, job: Job) -> None:
        """Queue a job, or refuse it at once: APIError 503 while shutting down, 429 when the queue is full."""
        with self._cond:
            if self._state in ("stopping", "aborting"):
                raise APIError(503, "the server is shutting down and takes no new requests", code="shutting_down")
            if len(self._queue) >= self.max_queue:
                raise APIError(429, f"the server's queue is full ({self.max_queue} requests waiting); retry later",
                               code="queue_full", kind="rate_limit_error")
            self._queue.append(job)
            self._cond.notify()

    def stats(self) -> dict:
        with self._cond:
            return {"state": self._state, "queued": len(self._queue),
                    "running": sum(job.n for job in self._running), "batches": self._batches,
                    "largest_batch": self._largest}

    def drain(self) -> None:
        """Shutting down: the queued and running requests are answered, and so are those the server had already
        received (uvicorn no longer listens, so no others come)."""
        with self._cond:
            if self._state == "running":
                self._state = "draining"
            self._cond.notify()

    def abort(self, reason: str) -> None:
        """Fail every queued request and stop the running ones at their next token, with `reason` (503)."""
        with self._cond:
            self._state = "aborting"
            self._abort_reason = reason
            queued, self._queue = list(self._queue), collections.deque()
            self._cond.notify()
        for job in queued:
            job.emit(Failed(APIError(503, reason, code="shutting_down")))

    def stop(self, timeout: float | None = None) -> None:
        """End the worker once the queue is empty; later submissions are refused."""
        with self._cond:
            if self._state != "aborting":
                self._state = "stopping"
            self._cond.notify()
        if self._thread.is_alive():
            self._thread.join(timeout)

    @property
    def aborting(self) -> bool:
        return self._state == "aborting"

    def _next_batch(self) -> list[Job] | None:
        """The oldest jobs that fit one batch (first come, first served: the first that does not fit waits for
        the next batch, so no request is overtaken for ever); None when the worker should end."""
        with self._cond:
            batch, rows, longest, steps = [], 0, 0, 0
            while not batch:
                while not self._queue:
                    if self._state in ("stopping", "aborting"):
                        return None
                    self._cond.wait()
                while self._queue:
                    job = self._queue[0]
                    if job.cancelled.is_set():  # its client left while it waited
                        self._queue.popleft()
                        continue
                    length, need = max(longest, len(job.prompt_ids)), max(steps, job.sampling.max_tokens)
                    if batch and (rows + job.n > self.max_batch_size or length + need > self.chat.max_length):
                        break
                    batch.append(self._queue.popleft())
                    rows, longest, steps = rows + job.n, length, need
            self._running = batch
            self._batches += 1
            self._largest = max(self._largest, rows)
            return batch

    def _work(self) -> None:
        while True:
            batch = self._next_batch()
            if batch is None:
                return
            try:
                self._generate(batch)
            except Exception as err:  # a failure of the model: the batch's requests are told, the server lives on
                log.exception("generation failed")
                for job in batch:
                    job.emit(Failed(APIError(500, f"generation failed: {type(err).__name__}: {err}")))
            finally:
                with self._cond:
                    self._running = []

    # ------------------------------------------------------------ one batch

    def _generate(self, batch: list[Job]) -> None:
        import torch
        from transformers import GenerationConfig, LogitsProcessorList, StoppingCriteriaList

        rows = []
        for job in batch:
            try:
                rows += [_Row(self, job, job.first_index + i, i) for i in range(job.n)]
            except Exception as err:  # this request's settings cannot run: it alone fails
                _fail(job, err)
        if not rows:
            return
        for job in {row.job: None for row in rows}:
            job.emit(Started())
        length = max(len(row.job.prompt_ids) for row in rows)
        device = self.chat.model.device
        input_ids = torch.full((len(rows), length), self.pad_id, dtype=torch.long)
        attention_mask = torch.zeros((len(rows), length), dtype=torch.long)
        for i, row in enumerate(rows):
            ids = row.job.prompt_ids
            input_ids[i, length - len(ids):] = torch.tensor(ids, dtype=torch.long)
            attention_mask[i, length - len(ids):] = 1
            row.start = length - len(ids)
        # Every setting explicit: values left unset would be filled from the model's generation_config.json
        # (its sampling or repetition penalty), which the request's own settings replace here (_Choose draws each
        # row's token). generate() itself is greedy and applies no sampling setting: those are transformers'
        # defaults (temperature 1, top_p 1, top_k 50), which it reads as not set, so none is reported as ignored
        # ("The following generation flags are not valid and may be ignored", which top_k=0 caused on every run).
        config = GenerationConfig(max_new_tokens=max(row.job.sampling.max_tokens for row in rows), do_sample=False,
                                  num_beams=1, eos_token_id=self.stop_ids or None, pad_token_id=self.pad_id,
                                  temperature=1.0, top_p=1.0, top_k=50, min_p=None, repetition_penalty=1.0,
                                  no_repeat_ngram_size=0, min_new_tokens=0, use_cache=True)
        model = self.chat.model
        with torch.inference_mode(), torch.autocast(device.type, dtype=torch.bfloat16, enabled=self.chat.autocast):
            model.generate(input_ids=input_ids.to(device), attention_mask=attention_mask.to(device),
                           generation_config=config, logits_processor=LogitsProcessorList([_Choose(rows)]),
                           stopping_criteria=StoppingCriteriaList([_Advance(self, rows)]))
        for row in rows:  # generate() ended (all rows finished, or aborted): every choice gets its end
            if not row.done:
                row.finish("length" if row.generated >= row.job.sampling.max_tokens else "abort")

    def decoder(self):
        if self._backend is None:
            return None
        from tokenizers.decoders import DecodeStream

        return DecodeStream(skip_special_tokens=True)

    def decode(self, ids: list[int]) -> str:
        if self._backend is None:
            return self._decode_slow(ids, skip_special_tokens=True)
        return self._backend.decode(ids, skip_special_tokens=True)

    def generator(self, sampling: Sampling, choice: int):
        """The row's random generator: seeded by the request's seed (choice i of n by seed + i), else drawn from
        the server's generator."""
        import torch

        if sampling.temperature == 0:
            return None
        if sampling.seed is not None:  # any 64-bit seed, signed or not (manual_seed reads -1 as 2**64 - 1)
            return torch.Generator().manual_seed((sampling.seed + choice) % 2**64)
        return torch.Generator().manual_seed(int(torch.randint(0, 2**62, (1,), generator=self._rng)))


class _Row:
    """One choice of one job while its batch runs: its decoder, held-back text, counts and end."""

    def __init__(self, engine: Engine, job: Job, index: int, choice: int):
        self.engine, self.job, self.index = engine, job, index
        self.start = 0  # column of its first prompt token in the padded batch
        self.generated = 0
        self.ids: list[int] = []
        self.sent = ""  # text sent so far
        self.held = ""  # decoded text held back: it may be the start of a stop string
        self.done = False
        self.stream = engine.decoder()
        self.generator = engine.generator(job.sampling, choice)
        self.warpers = _warpers(job.sampling)
        self.counts = None  # token counts of the answer (presence and frequency penalties)
        self.bias = None  # (ids, values) of logit_bias, as tensors on the scores' device once needed

    def fail(self, err: Exception) -> None:
        """This row cannot go on: its request fails (once, for all its rows) and the rest of the batch goes on."""
        self.done = True
        _fail(self.job, err)

    def add(self, token: int) -> None:
        """One generated token: stop id, stop string or max_tokens end the row; text is sent as it forms."""
        sampling = self.job.sampling
        self.generated += 1
        if token in self.engine.stop_ids:
            self.finish("stop")
            return
        self.ids.append(token)
        if self.stream is not None:
            piece = self.stream.step(self.engine._backend, token) or ""
        else:  # a slow tokenizer: decode the whole answer and send what is new (held while a character is cut)
            text = self.engine.decode(self.ids)
            piece = "" if text.endswith("\ufffd") else text[len(self.sent) + len(self.held):]
        if piece:
            self._send(piece)
        if not self.done and self.generated >= sampling.max_tokens:
            self.finish("length")

    def _send(self, piece: str) -> None:
        stops = self.job.sampling.stop
        text = self.held + piece
        if stops:
            hits = [i for i in (text.find(s) for s in stops) if i >= 0]
            if hits:
                self.held = ""
                self._emit(text[:min(hits)])
                self.finish("stop", flush=False)
                return
            # Hold back the longest end of the text that could still grow into a stop string.
            keep = max((k for s in stops for k in range(min(len(s) - 1, len(text)), 0, -1)
                        if text.endswith(s[:k])), default=0)
            self.held = text[len(text) - keep:] if keep else ""
            text = text[:len(text) - keep]
        self._emit(text)

    def _emit(self, text: str) -> None:
        if text:
            self.sent += text
            self.job.emit(Delta(self.index, text))

    def finish(self, reason: str, flush: bool = True) -> None:
        if self.done:
            return
        self.done = True
        if flush:
            # What is held back is no stop string; an answer cut inside a multi-byte character ends as decode()
            # writes it (a replacement character), so the streamed text equals tokenizer.decode(answer).
            self._emit(self.held)
            self.held = ""
            if reason != "abort" and self.stream is not None:
                full = self.engine.decode(self.ids)
                if full.startswith(self.sent):
                    self._emit(full[len(self.sent):])
        if reason == "abort":
            reason = getattr(self.engine, "_abort_reason", "the request was stopped")
            self.job.emit(Failed(APIError(503, reason, code="shutting_down")))
            return
        self.job.emit(Finished(self.index, reason, self.generated))


def _warpers(sampling: Sampling) -> list:
    """transformers' own warpers for the row's temperature, top-k, top-p and min-p (generate()'s order)."""
    if sampling.temperature == 0:
        return []
    from transformers.generation.logits_process import (MinPLogitsWarper, TemperatureLogitsWarper,
                                                        TopKLogitsWarper, TopPLogitsWarper)

    warpers = []
    if sampling.temperature != 1.0:
        warpers.append(TemperatureLogitsWarper(sampling.temperature))
    if sampling.top_k:
        warpers.append(TopKLogitsWarper(sampling.top_k))
    if sampling.top_p < 1.0:
        warpers.append(TopPLogitsWarper(sampling.top_p))
    if sampling.min_p:
        warpers.append(MinPLogitsWarper(sampling.min_p))
    return warpers


def _fail(job: Job, err: Exception) -> None:
    if not job.failed:
        job.failed = True
        log.error("a request failed in generation: %s: %s", type(err).__name__, err)
        job.emit(Failed(APIError(500, f"generation failed for this request: {type(err).__name__}: {err}")))


class _Choose:
    """LogitsProcessor: each row's settings applied to its scores, and its token drawn (see the module docstring).
    A row that fails fails its request alone; its scores are zeroed (generate() takes some token, which nobody
    reads: the row is done, so _Advance ends it)."""

    def __init__(self, rows: list[_Row]):
        self.rows = rows

    def __call__(self, input_ids, scores):
        for i, row in enumerate(self.rows):
            if row.done or row.job.failed:
                continue
            try:
                self.choose(row, input_ids[i:i + 1], scores[i])
            except Exception as err:
                row.fail(err)
                scores[i].fill_(0.0)
        return scores

    @staticmethod
    def choose(row: _Row, ids, s) -> None:
        """Apply the row's settings to its scores `s` in place; a sampled row's draw leaves 0 at its token and -inf
        elsewhere. `ids`: the row's ids so far, shape (1, length), left padding from column 0 to row.start."""
        import torch

        sampling = row.job.sampling
        if sampling.repetition_penalty != 1.0:  # transformers' RepetitionPenaltyLogitsProcessor, padding left out
            seen = ids[0, row.start:]
            picked = s.gather(0, seen)
            s.scatter_(0, seen, torch.where(picked < 0, picked * sampling.repetition_penalty,
                                            picked / sampling.repetition_penalty))
        if sampling.presence_penalty or sampling.frequency_penalty:
            if row.counts is None:
                row.counts = torch.zeros_like(s)
            if row.ids:
                row.counts.zero_().index_add_(0, torch.tensor(row.ids, device=s.device),
                                              torch.ones(len(row.ids), device=s.device))
            s -= sampling.frequency_penalty * row.counts + sampling.presence_penalty * (row.counts > 0).to(s.dtype)
        if sampling.logit_bias:
            if row.bias is None:
                tokens = [t for t in sampling.logit_bias if 0 <= t < s.shape[0]]
                row.bias = (torch.tensor(tokens, dtype=torch.long, device=s.device),
                            torch.tensor([sampling.logit_bias[t] for t in tokens], dtype=s.dtype, device=s.device))
            s[row.bias[0]] += row.bias[1]
        if (torch.isnan(s) | torch.isposinf(s)).any():
            raise FloatingPointError("the scores became NaN or infinite under this request's sampling settings")
        if row.generator is None:
            return  # greedy: generate() takes the argmax of these scores
        warped = s.unsqueeze(0)
        for warper in row.warpers:
            warped = warper(ids, warped)
        probs = torch.softmax(warped[0].float(), dim=-1)
        token = int(torch.multinomial(probs.cpu(), 1, generator=row.generator))
        s.fill_(float("-inf"))
        s[token] = 0.0


class _Advance:
    """StoppingCriteria: each row's new token handed to it; True for the rows that are done."""

    def __init__(self, engine: Engine, rows: list[_Row]):
        self.engine, self.rows = engine, rows

    def __call__(self, input_ids, scores, **kwargs):
        import torch

        tokens = input_ids[:, -1].tolist()
        aborting = self.engine.aborting
        for row, token in zip(self.rows, tokens):
            if row.done:
                continue
            if row.job.failed:  # another row of its request failed
                row.done = True
            elif aborting or row.job.cancelled.is_set():
                row.finish("abort", flush=False)
            else:
                try:
                    row.add(token)
                except Exception as err:
                    row.fail(err)
        return torch.tensor([row.done for row in self.rows], dtype=torch.bool, device=input_ids.device)
