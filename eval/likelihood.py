"""Batched log-likelihood scoring of answer options after a prompt (the rolling NLL of whole documents, which
bits per character needs, is in bpc.py).

    from yunshan.eval.likelihood import score_choices
    scores = score_choices(lm, [("...答案：", ["A", "B", "C", "D"])], batch_size=16)

Options are tokenized the way lm-evaluation-harness does it (encode context + option as one string, the option's
tokens are what follows the context's token count; trailing whitespace of the context moves to the option), so a
prompt scored here and by lm-eval's HFLM gets the same numbers. When every option of a question is one token after
the same context tokens (the usual case: "A".."D"), the question costs one forward pass of its shared prefix and
the options are read off the last position's log-softmax; several questions share one padded forward. Questions
of a batch that start with the same tokens (the header and k solved examples of one subject: most of a 5-shot
prompt) share them too: that common prefix runs once, and only each question's own tail is computed. For models
whose layers mix tokens by attention alone (LLaMA, Mistral, Qwen2/3, PanGu-π without its neighbour convolution) the
tails run as one packed row with shared-prefix attention (shared_prefix.py); for other models with a KV cache
(OTCE's state-space layers, say) the prefix's cache is repeated over the batch and the tails run padded. Options
that span several tokens fall back to one sequence per option, still batched. Under bf16 autocast with
`--recheck-float32`, questions whose two best options are within bf16's guard band are scored again in float32
(settle_in_float32), so the letters are float32's.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable
from dataclasses import dataclass

import torch

from .line_encoding import common_prefix_length, encode_texts
from .shared_prefix import (
    cache_argument, last_log_probs_packed, log_probs_packed_at, prefix_cache, prefix_pass, supports_packed_tails)


@dataclass
class ChoiceScores:
    """Log-likelihoods (natural log, summed over the option's tokens) of each option of one question."""

    logliks: list[float]
    n_tokens: list[int]
    truncated: bool = False
    rescored: bool = False  # scored again in float32: a close call under bf16 autocast (settle_in_float32)

    @property
    def best(self) -> int:
        # First maximum, as numpy/torch argmax and lm-eval pick it.
        return max(range(len(self.logliks)), key=lambda i: (self.logliks[i], -i))


def _encode(tokenizer, text: str) -> list[int]:
    return tokenizer(text, add_special_tokens=False)["input_ids"]


def tokenizer_adds_bos(tokenizer) -> bool:
    """Whether the tokenizer starts an encoded text with its BOS token by default (Llama 2/3, Gemma, Mistral do;
    GPT-2, Qwen and SmolLM2 do not): what lm-eval's HFLM gets with `add_bos_token` unset, since it then encodes
    with the tokenizer's own special tokens."""
    bos = tokenizer.bos_token_id
    if bos is None:
        return False
    ids = tokenizer("a")["input_ids"]
    return len(ids) > 0 and ids[0] == bos


def resolve_add_bos(tokenizer, add_bos: bool | None) -> bool:
    """`--add-bos` as given (True/False), or, when unset (None), what the tokenizer itself adds (tokenizer_adds_bos):
    lm-eval's rule with `add_bos_token` unset. Every scoring path resolves it here."""
    return tokenizer_adds_bos(tokenizer) if add_bos is None else bool(add_bos)


def with_bos(tokenizer, ids: list[int], add_bos: bool) -> list[int]:
    """`ids` with the BOS token in front when `add_bos` and they do not start with it already (a chat template or a
    prompt that writes its own BOS never gets a second one: lm-eval's has_bos_prefix rule)."""
    bos = tokenizer.bos_token_id
    if add_bos and bos is not None and not (ids and ids[0] == bos):
        return [bos] + ids
    return ids


def prefix_token_id(tokenizer) -> int:
    """The token that stands for "start of text" when a text is scored from its first token."""
    for token_id in (tokenizer.bos_token_id, tokenizer.eos_token_id):
        if token_id is not None:
            return token_id
    raise ValueError("the tokenizer has neither a BOS nor an EOS token; cannot score the first token of a text")


def _split_pair(context: str, continuation: str) -> tuple[str, str]:
    """lm-eval's rule: trailing whitespace of the context moves to the continuation."""
    n_spaces = len(context) - len(context.rstrip())
    if n_spaces:
        context, continuation = context[:-n_spaces], context[-n_spaces:] + continuation
    return context, continuation


def _join_pair(tokenizer, whole: list[int], n_context: int, add_bos: bool) -> tuple[list[int], list[int]]:
    context_ids, continuation_ids = whole[:n_context], whole[n_context:]
    if not context_ids:  # an empty context: the continuation is scored from the prefix token (lm-eval's rule)
        return [prefix_token_id(tokenizer)], continuation_ids
    if add_bos and context_ids[0] != tokenizer.bos_token_id:
        context_ids = [prefix_token_id(tokenizer)] + context_ids
    return context_ids, continuation_ids


def encode_pair(tokenizer, context: str, continuation: str,
                add_bos: bool | None = None) -> tuple[list[int], list[int]]:
    """(context ids, continuation ids) as lm-eval's HFLM computes them.

    The whole string is encoded once and split after as many tokens as the context alone has, so a tokenizer
    that merges across the boundary still yields the tokens the model would really see. `add_bos` None: BOS first
    exactly when the tokenizer adds it by default (resolve_add_bos); a context that already starts with BOS gets
    no second one.
    """
    add_bos = resolve_add_bos(tokenizer, add_bos)
    context, continuation = _split_pair(context, continuation)
    whole = _encode(tokenizer, context + continuation)
    return _join_pair(tokenizer, whole, len(_encode(tokenizer, context)), add_bos)


def encode_pairs(tokenizer, pairs: list[tuple[str, str]],
                 add_bos: bool | None = None) -> list[tuple[list[int], list[int]]]:
    """`encode_pair` of many (context, continuation) pairs: the same ids, but every distinct string is encoded
    once (a question's context serves all its options), lines shared between strings once where that is provably
    exact (line_encoding.py), and all of them in one batched tokenizer call."""
    add_bos = resolve_add_bos(tokenizer, add_bos)
    split = [_split_pair(c, o) for c, o in pairs]
    texts = list(dict.fromkeys(t for c, o in split for t in (c, c + o)))
    ids = dict(zip(texts, encode_texts(tokenizer, texts))) if texts else {}
    return [_join_pair(tokenizer, ids[c + o], len(ids[c]), add_bos) for c, o in split]


def _accepts_logits_to_keep(model) -> bool:
    return "logits_to_keep" in inspect.signature(model.forward).parameters


def _pad_right(rows: list[list[int]], pad_id: int, device) -> tuple[torch.Tensor, torch.Tensor]:
    width = max(len(r) for r in rows)
    ids = torch.full((len(rows), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(rows), width), dtype=torch.long)
    for i, row in enumerate(rows):
        ids[i, : len(row)] = torch.tensor(row, dtype=torch.long)
        mask[i, : len(row)] = 1
    return ids.to(device), mask.to(device)


@torch.no_grad()
def logits_kept(lm, rows: list[list[int]], needed: set[int]) -> tuple[torch.Tensor, dict[int, int]]:
    """One right-padded forward of `rows`; the logits at the `needed` input positions only, and the column of each
    position in them."""
    model = lm.model
    device = next(model.parameters()).device
    ids, mask = _pad_right(rows, lm.tokenizer.pad_token_id, device)
    if len({len(r) for r in rows}) == 1:
        mask = None  # no padding: the attention runs its plain causal kernel, and no mask is built
    wanted = sorted(needed)
    kwargs = {}
    if _accepts_logits_to_keep(model):
        # Only the needed positions go through lm_head: with a 100k vocabulary the full logits would dominate.
        kwargs["logits_to_keep"] = torch.tensor(wanted, dtype=torch.long, device=device)
        column = {p: i for i, p in enumerate(wanted)}
    else:
        column = {p: p for p in wanted}
    return model(input_ids=ids, attention_mask=mask, use_cache=False, **kwargs).logits, column


@torch.no_grad()
def target_nll(lm, rows: list[list[int]], at: list[list[int]], targets: list[list[int]]) -> list[list[float]]:
    """Negative log-likelihood (nats) of each row's targets, targets[i][j] predicted at input position at[i][j]: one
    padded forward; the log-softmax is never materialised (logsumexp minus the target's logit, per row). Bits per
    character (bpc.py) scores a window's consecutive tokens, the instruction held-out loss (chat_loss.py) the
    assistant turns of a conversation."""
    logits, column = logits_kept(lm, rows, {p for positions in at for p in positions})
    out = []
    for i, (positions, t) in enumerate(zip(at, targets)):
        cols = torch.tensor([column[p] for p in positions], dtype=torch.long, device=logits.device)
        row = logits[i, cols].float()
        picked = row.gather(1, torch.tensor(t, dtype=torch.long, device=row.device)[:, None]).squeeze(1)
        out.append((torch.logsumexp(row, dim=-1) - picked).tolist())
    return out


def _log_probs_at(lm, rows: list[list[int]], positions: list[list[int]]) -> list[torch.Tensor]:
    """For each row, log-softmax (float32) of the logits at the given input positions: one padded forward."""
    logits, column = logits_kept(lm, rows, {p for pos in positions for p in pos})
    out = []
    for i, pos in enumerate(positions):
        cols = torch.tensor([column[p] for p in pos], dtype=torch.long, device=logits.device)
        out.append(torch.log_softmax(logits[i, cols].float(), dim=-1))
    return out


# Below this many shared tokens a separate prefix pass costs more than it saves.
MIN_SHARED_PREFIX = 16


def _accepts_cache(model) -> bool:
    return cache_argument(model) is not None and "position_ids" in inspect.signature(model.forward).parameters


def _common_prefix_length(rows: list[list[int]]) -> int:
    """Number of leading tokens all rows share."""
    n = min(len(r) for r in rows)
    for row in rows[1:]:
        n = common_prefix_length(rows[0][:n], row)
    return n


@torch.no_grad()
def _last_log_probs_shared_prefix(lm, rows: list[list[int]], shared: int) -> list[torch.Tensor]:
    """Log-softmax at each row's last position, running the rows' first `shared` tokens once for the whole batch."""
    model = lm.model
    device = next(model.parameters()).device
    cache = prefix_cache(model, rows[0][:shared])
    # Every row continues the same prefix: select its cache row B times (reorder_cache also repeats the state of
    # convolution layers such as PanGu-π's neighbour convolution, which batch_repeat_interleave leaves alone).
    cache.reorder_cache(torch.zeros(len(rows), dtype=torch.long, device=device))
    tails = [r[shared:] for r in rows]
    ids, mask = _pad_right(tails, lm.tokenizer.pad_token_id, device)
    full_mask = torch.cat([torch.ones((len(rows), shared), dtype=mask.dtype, device=device), mask], dim=1)
    positions = (shared + torch.arange(ids.shape[1], device=device)).unsqueeze(0).expand(len(rows), -1)
    wanted = sorted({len(t) - 1 for t in tails})
    logits = model(input_ids=ids, attention_mask=full_mask, position_ids=positions, use_cache=True,
                   logits_to_keep=torch.tensor(wanted, dtype=torch.long, device=device),
                   **{cache_argument(model): cache}).logits
    column = {p: i for i, p in enumerate(wanted)}
    return [torch.log_softmax(logits[i, [column[len(t) - 1]]].float(), dim=-1) for i, t in enumerate(tails)]


@torch.no_grad()
def _log_probs_shared_prefix_at(lm, rows: list[list[int]], shared: int,
                                positions: list[list[int]]) -> list[torch.Tensor]:
    """`_log_probs_at` for rows whose first `shared` tokens are equal, for models that cannot pack tails: the prefix
    runs once (its needed positions' logits kept), its cache is repeated over the batch and the tails run padded."""
    model = lm.model
    device = next(model.parameters()).device
    cache, found = prefix_pass(model, rows[0][:shared], positions)
    tail_rows = [i for i in range(len(rows)) if any(p >= shared for p in positions[i])]
    tail_lp: dict[tuple[int, int], torch.Tensor] = {}
    if tail_rows:
        cache.reorder_cache(torch.zeros(len(tail_rows), dtype=torch.long, device=device))
        tails = [rows[i][shared: max(positions[i]) + 1] for i in tail_rows]
        ids, mask = _pad_right(tails, lm.tokenizer.pad_token_id, device)
        full_mask = torch.cat([torch.ones((len(tails), shared), dtype=mask.dtype, device=device), mask], dim=1)
        position_ids = (shared + torch.arange(ids.shape[1], device=device)).unsqueeze(0).expand(len(tails), -1)
        wanted = sorted({p - shared for i in tail_rows for p in positions[i] if p >= shared})
        column = {p: k for k, p in enumerate(wanted)}
        logits = model(input_ids=ids, attention_mask=full_mask, position_ids=position_ids, use_cache=True,
                       logits_to_keep=torch.tensor(wanted, dtype=torch.long, device=device),
                       **{cache_argument(model): cache}).logits
        for slot, i in enumerate(tail_rows):
            for p in positions[i]:
                if p >= shared:
                    tail_lp[(i, p)] = torch.log_softmax(logits[slot, column[p - shared]].float(), dim=-1)
    return [torch.stack([found[p] if p < shared else tail_lp[(i, p)] for p in pos]) for i, pos in enumerate(positions)]


@torch.no_grad()
def _log_probs_multi_prefix_at(lm, groups: list[tuple[list[list[int]], int, list[list[int]]]]) -> list[list[torch.Tensor]]:
    """`_log_probs_at` for several groups of rows at once, each group's rows sharing their first `shared` tokens
    (one question and its options): the groups' prefixes run as one padded batch, then every row's tail as one
    padded batch against its own group's cached prefix (the cache rows selected per tail, the prefix padding masked).

    Only for models whose layers mix tokens by attention alone (supports_packed_tails): the padded slots of a
    shorter prefix sit in the cache and are masked, which a convolution or state-space state would not allow.
    Returns, per group, the log-softmax at each row's positions as `_log_probs_at` would."""
    model = lm.model
    device = next(model.parameters()).device
    from transformers import DynamicCache

    prefixes = [rows[0][:shared] for rows, shared, _ in groups]
    ids, prefix_mask = _pad_right(prefixes, lm.tokenizer.pad_token_id, device)
    inside = [sorted({p for pos in positions for p in pos if p < shared}) or [shared - 1]
              for _, shared, positions in groups]
    keep = sorted({p for k in inside for p in k})
    column = {p: i for i, p in enumerate(keep)}
    cache = DynamicCache(config=model.config)
    logits = model(input_ids=ids, attention_mask=prefix_mask, use_cache=True,
                   logits_to_keep=torch.tensor(keep, dtype=torch.long, device=device),
                   **{cache_argument(model): cache}).logits
    found = [{p: torch.log_softmax(logits[g, column[p]].float(), dim=-1) for p in inside[g]}
             for g in range(len(groups))]
    tails, owner, starts = [], [], []  # one tail per row that needs a position after its prefix
    for g, (rows, shared, positions) in enumerate(groups):
        for r, (row, pos) in enumerate(zip(rows, positions)):
            if any(p >= shared for p in pos):
                tails.append(row[shared: max(pos) + 1])
                owner.append((g, r))
                starts.append(shared)
    tail_lp: dict[tuple[int, int, int], torch.Tensor] = {}
    if tails:
        cache.reorder_cache(torch.tensor([g for g, _ in owner], dtype=torch.long, device=device))
        tail_ids, tail_mask = _pad_right(tails, lm.tokenizer.pad_token_id, device)
        mask = torch.cat([prefix_mask[[g for g, _ in owner]], tail_mask], dim=1)
        position_ids = torch.tensor(starts, device=device)[:, None] + torch.arange(tail_ids.shape[1], device=device)
        wanted = sorted({p - groups[g][1] for g, r in owner for p in groups[g][2][r] if p >= groups[g][1]})
        col = {p: i for i, p in enumerate(wanted)}
        out = model(input_ids=tail_ids, attention_mask=mask, position_ids=position_ids, use_cache=True,
                    logits_to_keep=torch.tensor(wanted, dtype=torch.long, device=device),
                    **{cache_argument(model): cache}).logits
        for t, (g, r) in enumerate(owner):
            shared = groups[g][1]
            for p in groups[g][2][r]:
                if p >= shared:
                    tail_lp[(g, r, p)] = torch.log_softmax(out[t, col[p - shared]].float(), dim=-1)
    return [[torch.stack([found[g][p] if p < shared else tail_lp[(g, r, p)] for p in pos])
             for r, pos in enumerate(positions)] for g, (_, shared, positions) in enumerate(groups)]


def plan_batches(rows: list[list[int]], batch_size: int, share_prefixes: bool = True) -> list[tuple[list[int], int]]:
    """Batches of row indices, each with the number of leading tokens its rows share and run once (0 = none).

    Rows are sorted by their tokens, so the questions of one subject (same header and k-shot examples) are
    neighbours, and cut into groups wherever two neighbours share less than half of the shorter row: the group of
    a subject then never shares a batch with another subject's questions (which would leave only the header in
    common). Groups whose rows share at least MIN_SHARED_PREFIX tokens are batched on their own; the rest (0-shot
    prompts, say) are pooled and batched longest first, as lm-eval orders them, so padding stays small.
    """
    order = sorted(range(len(rows)), key=lambda k: rows[k])
    groups, current = [], [order[0]] if order else []
    for a, b in zip(order, order[1:]):
        if _common_prefix_length([rows[a], rows[b]]) * 2 < min(len(rows[a]), len(rows[b])):
            groups.append(current)
            current = []
        current.append(b)
    if current:
        groups.append(current)
    plan, pool = [], []
    for group in groups:
        batches = [group[i: i + batch_size] for i in range(0, len(group), batch_size)]
        for batch in batches:
            members = [rows[k] for k in batch]
            # At least one token of every row stays outside the prefix: its logits are the ones read.
            common = min(_common_prefix_length(members), min(len(r) for r in members) - 1) if len(batch) > 1 else 0
            if share_prefixes and common >= MIN_SHARED_PREFIX:
                plan.append((batch, common))
            else:
                pool.extend(batch)
    pool.sort(key=lambda k: -len(rows[k]))
    plan.extend((pool[i: i + batch_size], 0) for i in range(0, len(pool), batch_size))
    return plan


def score_choices(lm, requests: list[tuple[str, list[str]]], batch_size: int = 16, add_bos: bool | None = None,
                  progress: bool = False, desc: str = "scoring", settle: bool = True) -> list[ChoiceScores]:
    """Log-likelihood of every option of every (context, options) request.

    Args:
        lm: a `LoadedModel`.
        requests: (context, options) pairs; options are continuation strings such as "A".
        batch_size: sequences per forward pass (1 = one question at a time).
        add_bos: True/False: start every context with the BOS token or not (lm-eval's `add_bos_token`); None (the
            default): as the tokenizer itself does by default, lm-eval's behaviour with `add_bos_token` unset
            (resolve_add_bos). A context that starts with BOS already never gets a second one.
        progress: show a tqdm bar.
        settle: under bf16 autocast, rescore in float32 every request whose best option (by log-likelihood) could
            be another one's in float32 (settle_in_float32). Callers that decide on other values (cloze's
            normalised scores) pass False and settle those.
    """
    add_bos = resolve_add_bos(lm.tokenizer, add_bos)
    results = _score_choices(lm, requests, batch_size, add_bos, progress, desc)
    if settle:
        values = [list(r.logliks) for r in results]
        again = settle_in_float32(lm, values, [r.n_tokens for r in results], lambda indices: [
            r.logliks for r in _score_choices(lm, [requests[i] for i in indices], batch_size, add_bos, progress,
                                              desc + " (float32)")])
        for i in again:
            results[i].logliks, results[i].rescored = values[i], True
    return results


def _score_choices(lm, requests: list[tuple[str, list[str]]], batch_size: int, add_bos: bool, progress: bool,
                   desc: str) -> list[ChoiceScores]:
    from yunshan.io.progress import progress_bar

    max_length = lm.max_length
    flat = encode_pairs(lm.tokenizer, [(ctx, opt) for ctx, opts in requests for opt in opts], add_bos)
    encoded, start = [], 0
    for _, opts in requests:
        encoded.append(flat[start: start + len(opts)])
        start += len(opts)
    for i, pairs in enumerate(encoded):
        if any(not cont for _, cont in pairs):
            raise ValueError(f"an option of request {i} encodes to no tokens: {requests[i][1]}")
    results: list[ChoiceScores | None] = [None] * len(requests)
    shared, separate = [], []  # shared: (request index, context ids, option token ids); separate: (i, j, ctx, cont)
    for i, pairs in enumerate(encoded):
        contexts = {tuple(c) for c, _ in pairs}
        if len(contexts) == 1 and all(len(cont) == 1 for _, cont in pairs):
            shared.append((i, pairs[0][0], [cont[0] for _, cont in pairs]))
        else:
            for j, (ctx, cont) in enumerate(pairs):
                separate.append((i, j, ctx, cont))

    prefix_cache = batch_size > 1 and _accepts_cache(lm.model) and _accepts_logits_to_keep(lm.model)
    packed_tails = prefix_cache and supports_packed_tails(lm.model)
    plan = plan_batches([ctx[-max_length:] for _, ctx, _ in shared], batch_size, prefix_cache)
    # Options of several tokens (cloze texts, say): one row per option. The options of a question share its whole
    # context, so these rows are grouped by shared prefix too and each group's prefix runs once.
    separate_rows = [(ctx + cont)[-(max_length + 1):][:-1] for _, _, ctx, cont in separate]
    separate_plan = plan_batches(separate_rows, batch_size, prefix_cache) if separate else []
    # The bar counts questions (all of a question's options scored), not batches.
    bar = progress_bar(len(requests), desc, unit="question", enabled=progress)
    for batch, common in plan:
        batch_items = [shared[k] for k in batch]
        rows = [ctx[-max_length:] for _, ctx, _ in batch_items]
        if common and packed_tails:
            log_probs = last_log_probs_packed(lm, rows, common)
        elif common:
            log_probs = _last_log_probs_shared_prefix(lm, rows, common)
        else:
            log_probs = _log_probs_at(lm, rows, [[len(r) - 1] for r in rows])
        batch = batch_items
        for (i, ctx, option_ids), lp in zip(batch, log_probs):
            results[i] = ChoiceScores([lp[0, t].item() for t in option_ids], [1] * len(option_ids),
                                      truncated=len(ctx) > max_length)
        bar.update(len(batch))

    per_option: dict[tuple[int, int], tuple[float, int, bool]] = {}
    separate_positions = [list(range(len(row) - len(cont), len(row)))
                          for row, (_, _, _, cont) in zip(separate_rows, separate)]

    options_left = {i: len(encoded[i]) for i, _, _, _ in separate}

    def record(batch_indices, log_probs):
        for k, lp in zip(batch_indices, log_probs):
            i, j, ctx, cont = separate[k]
            total = lp[torch.arange(len(cont)), torch.tensor(cont)].sum().item()
            per_option[(i, j)] = (total, len(cont), len(ctx) + len(cont) - 1 > max_length)
            options_left[i] -= 1
            if not options_left[i]:
                bar.update(1)

    # Batches that hold a single question's options (0-shot prompts: different questions share little) are small;
    # for attention-only models several of them run together, each tail against its own question's prefix.
    small = [(b, c) for b, c in separate_plan if c and len(b) < batch_size and packed_tails]
    for batch_indices, common in separate_plan:
        if common and len(batch_indices) < batch_size and packed_tails:
            continue  # in `small`
        rows = [separate_rows[k] for k in batch_indices]
        positions = [separate_positions[k] for k in batch_indices]
        if common and packed_tails:
            log_probs = log_probs_packed_at(lm, rows, common, positions)
        elif common:
            log_probs = _log_probs_shared_prefix_at(lm, rows, common, positions)
        else:
            log_probs = _log_probs_at(lm, rows, positions)
        record(batch_indices, log_probs)
    while small:
        chunk, rows_in = [], 0
        while small and rows_in + len(small[0][0]) <= batch_size:
            chunk.append(small.pop(0))
            rows_in += len(chunk[-1][0])
        if not chunk:
            chunk.append(small.pop(0))
        results_by_group = _log_probs_multi_prefix_at(lm, [
            ([separate_rows[k] for k in b], c, [separate_positions[k] for k in b]) for b, c in chunk])
        for (b, _), log_probs in zip(chunk, results_by_group):
            record(b, log_probs)
    bar.close()
    for i, pairs in enumerate(encoded):
        if results[i] is None:
            vals = [per_option[(i, j)] for j in range(len(pairs))]
            results[i] = ChoiceScores([v[0] for v in vals], [v[1] for v in vals], truncated=any(v[2] for v in vals))
    return results  # type: ignore[return-value]


# The guard band of settle_in_float32: how far bf16 autocast may move a score summed over n tokens is taken as
# BF16_NATS_PER_SQRT_TOKEN * sqrt(n) nats (rounding errors of separate tokens partly cancel: the measured moves grow
# with the square root of the tokens, not linearly). About twice the largest move measured (0.117) on SmolLM2-135M and
# its adapted model, 240 cloze questions (benchmarks/README.md, "bf16 evaluation"); a margin, not a proven bound.
BF16_NATS_PER_SQRT_TOKEN = 0.25


def bf16_band(n_tokens: list[int], best_two: tuple[int, int], scale: list[float] | None = None) -> float:
    """The guard band of one question: how far bf16 may move its two leading options' scores, together
    (`n_tokens[j]` tokens summed into option j's score, which is then multiplied by `scale[j]`)."""
    scale = scale or [1.0] * len(n_tokens)
    return sum(BF16_NATS_PER_SQRT_TOKEN * math.sqrt(n_tokens[j]) * abs(scale[j]) for j in best_two)


def best_two(values: list[float]) -> tuple[int, int]:
    """Indices of the highest and second-highest values (first maximum first, as ChoiceScores.best)."""
    order = sorted(range(len(values)), key=lambda j: (-values[j], j))
    return order[0], order[1]


def settle_in_float32(lm, values: list[list[float]], n_tokens: list[list[int]],
                      rescore: Callable[[list[int]], list[list[float]]],
                      scales: list[list[float]] | None = None) -> list[int]:
    """Make bf16 autocast's multiple-choice predictions float32's: rescore the close calls in float32.

    Under `--dtype auto` on fast-bf16 hardware every matrix product rounds its inputs to bf16, which moves each
    option's score by a little (measured on SmolLM2-135M: benchmarks/README.md, "bf16 evaluation"). A question whose
    best option leads the runner-up by no more than its guard band (bf16_band of the two: `n_tokens[i][j]` tokens
    summed into option j's value, times `scales[i][j]`) could flip, so it is scored again with autocast off, i.e. in
    float32 (`rescore(indices)` returns those questions' values), and its values are replaced in place. Questions
    that lead by more keep the bf16 values: their letter is float32's unless bf16 moved a score by more than the
    band. Only with `lm.recheck_float32` (`--recheck-float32`) and autocast on; otherwise nothing is rescored.
    Returns the indices rescored (reports count them)."""
    if not (getattr(lm, "autocast", False) and getattr(lm, "recheck_float32", False)
            and torch.is_autocast_enabled(lm.model.device.type)):
        return []
    close = []
    for i, v in enumerate(values):
        if len(v) > 1:
            first, second = best_two(v)
            if v[first] - v[second] <= bf16_band(n_tokens[i], (first, second), scales[i] if scales else None):
                close.append(i)
    if close:
        with torch.autocast(lm.model.device.type, enabled=False):
            fresh = rescore(close)
        for i, v in zip(close, fresh):
            values[i] = v
    return close
