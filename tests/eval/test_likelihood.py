"""Batched option scoring against direct computations with the model's own forward pass."""

import json

import pytest
import torch

from yunshan.eval.likelihood import encode_pair, encode_pairs, score_choices

PROMPTS = [
    "以下是中国关于会计考试的单项选择题，请选出其中的正确答案。\n\n企业的资产负债表反映的是\nA. 财务状况\nB. 经营成果\nC. 现金流量\nD. 利润\n答案：",
    "题目：商业银行的主要负债是\nA. 贷款\nB. 存款\nC. 债券\nD. 现金\n答案是：",
    "银行",
    "下列属于货币政策工具的是\nA. 税收\nB. 公开市场操作\nC. 财政补贴\nD. 国债\n答案：",
]


def reference_pair(tokenizer, context: str, continuation: str, add_bos: bool = False):
    """lm-eval HFLM's _encode_pair written out independently of yunshan's: the context's trailing whitespace moves
    to the continuation, the whole string is encoded once and split after the context's own token count, and the
    start-of-text token (BOS, else EOS) comes first only when asked or when the context is empty."""
    stripped = context.rstrip()
    context, continuation = stripped, context[len(stripped):] + continuation
    whole = tokenizer.encode(context + continuation, add_special_tokens=False)
    n_context = len(tokenizer.encode(context, add_special_tokens=False))
    ctx, cont = whole[:n_context], whole[n_context:]
    if add_bos or not ctx:
        ctx = [tokenizer.bos_token_id if tokenizer.bos_token_id is not None else tokenizer.eos_token_id] + ctx
    return ctx, cont


def direct_logliks(lm, context, options):
    """Sum of log p(option tokens | context) from one un-padded forward per option."""
    out = []
    for opt in options:
        ctx, cont = reference_pair(lm.tokenizer, context, opt)
        ids = torch.tensor([ctx + cont])
        with torch.no_grad():
            logits = lm.model(input_ids=ids).logits[0].double()
        lp = torch.log_softmax(logits, -1)
        out.append(sum(lp[len(ctx) - 1 + k, t].item() for k, t in enumerate(cont)))
    return out


@pytest.mark.parametrize("which", ["llama", "pangu"])
def test_choice_matches_direct_computation(which, request):
    lm = request.getfixturevalue(which)
    opts = ["A", "B", "C", "D"]
    scores = score_choices(lm, [(p, opts) for p in PROMPTS], batch_size=3)
    for prompt, s in zip(PROMPTS, scores):
        direct = direct_logliks(lm, prompt, opts)
        assert s.logliks == pytest.approx(direct, abs=1e-4)
        assert s.best == max(range(4), key=lambda i: direct[i])
        assert s.n_tokens == [1, 1, 1, 1]  # the shared-prefix path: one token per option


def test_batched_equals_one_at_a_time(llama):
    opts = ["A", "B", "C", "D"]
    one = score_choices(llama, [(p, opts) for p in PROMPTS], batch_size=1)
    many = score_choices(llama, [(p, opts) for p in PROMPTS], batch_size=16)
    for a, b in zip(one, many):
        assert a.logliks == pytest.approx(b.logliks, abs=1e-5)
        assert a.best == b.best


def test_multi_token_options_take_the_separate_path(llama):
    opts = ["财务状况", "经营成果", "A", "现金流量 and more"]
    [s] = score_choices(llama, [(PROMPTS[0], opts)], batch_size=2)
    assert max(s.n_tokens) > 1
    assert s.logliks == pytest.approx(direct_logliks(llama, PROMPTS[0], opts), abs=1e-4)


def test_encode_pair_moves_trailing_space_like_lm_eval(llama):
    ctx, cont = encode_pair(llama.tokenizer, "答案： ", "A")
    ctx2, cont2 = encode_pair(llama.tokenizer, "答案：", " A")
    assert (ctx, cont) == (ctx2, cont2)


@pytest.mark.parametrize("add_bos", [False, True])
def test_encode_pair_equals_an_independent_construction(llama, add_bos):
    """Against lm-eval's rule written out in the test (reference_pair), not against the module itself: a BOS
    added when not asked, a lost trailing-space move or a split at the wrong token would all show here."""
    tokenizer = llama.tokenizer
    pairs = [(p, o) for p in PROMPTS for o in ("A", " B", "财务状况", "")] + [("答案： ", "A"), ("", "银行")]
    for context, option in pairs:
        assert encode_pair(tokenizer, context, option, add_bos) == reference_pair(tokenizer, context, option, add_bos)
    # the tokenizer does have a BOS, so its absence without add_bos is a real check
    bos = tokenizer.bos_token_id
    assert bos is not None and encode_pair(tokenizer, PROMPTS[2], "A")[0][0] != bos
    assert encode_pair(tokenizer, PROMPTS[2], "A", add_bos=True)[0][0] == bos


@pytest.mark.parametrize("add_bos", [False, True])
def test_encode_pairs_equals_encode_pair_one_by_one(llama, add_bos):
    """The batched, de-duplicated encoding gives exactly encode_pair's ids, pair by pair."""
    pairs = [(p, o) for p in PROMPTS for o in ("A", " B", "财务状况", "")]
    pairs += [("答案： ", "A"), ("", "银行"), (PROMPTS[0], "A")]
    expected = [encode_pair(llama.tokenizer, c, o, add_bos) for c, o in pairs]
    assert encode_pairs(llama.tokenizer, pairs, add_bos) == expected
    assert encode_pairs(llama.tokenizer, [], add_bos) == []


@pytest.mark.parametrize("split_special", [False, True])
def test_direct_rust_encoding_equals_the_tokenizer_call(tokenizer_dir, split_special):
    """encode_batch skips the BatchEncoding but must give the ids the ordinary call gives, whatever state an
    earlier call left on the Rust tokenizer (truncation) and however special tokens in the text are treated."""
    from transformers import AutoTokenizer

    from yunshan.eval.line_encoding import encode_batch

    tok = AutoTokenizer.from_pretrained(tokenizer_dir, split_special_tokens=split_special)
    texts = PROMPTS + ["<s>答案：A</s>", "<|user|>银行 证券", "", "  两个空格 "]
    tok(texts, truncation=True, max_length=5)  # leaves truncation set on the Rust tokenizer
    assert encode_batch(tok, texts) == [tok(t, add_special_tokens=False)["input_ids"] for t in texts]
    assert len(encode_batch(tok, [PROMPTS[0]])[0]) > 5
    assert (tok.convert_tokens_to_ids("<s>") in encode_batch(tok, ["<s>答案"])[0]) != split_special


def _few_shot_prompts():
    shots = "".join(f"{p}B\n\n" for p in PROMPTS[:2] + PROMPTS[3:])  # a long prefix common to every question
    tails = ["企业的资产负债表反映的是\nA. 财务状况\nB. 经营成果\nC. 现金流量\nD. 利润\n答案：",
             "银行\nA. 甲\nB. 乙\nC. 丙\nD. 丁\n答案：", "股票的收益主要来自\nA. 股息\nB. 利息\nC. 租金\nD. 保费\n答案："]
    return [shots + t for t in tails]


@pytest.mark.parametrize("which", ["llama", "pangu", "pangu_conv"])
def test_shared_few_shot_prefix_runs_once_and_matches_direct(which, request, monkeypatch):
    # PanGu-π with the causal neighbour convolution: its cached state is repeated too
    lm = request.getfixturevalue("pangu_conv_lm" if which == "pangu_conv" else which)
    import yunshan.eval.likelihood as lk

    calls = {"packed": [], "repeated": []}
    for name, attr in (("packed", "last_log_probs_packed"), ("repeated", "_last_log_probs_shared_prefix")):
        original = getattr(lk, attr)
        monkeypatch.setattr(lk, attr, lambda *a, _f=original, _c=calls[name]: _c.append(a[2]) or _f(*a))
    prompts = _few_shot_prompts()
    scores = score_choices(lm, [(p, list("ABCD")) for p in prompts], batch_size=8)
    # One batch, its shared prefix of more than 100 tokens ran once. Attention-only models pack the tails into one
    # row (shared-prefix attention); the neighbour convolution would read across packed questions, so that model
    # repeats the prefix cache instead.
    path = "repeated" if which == "pangu_conv" else "packed"
    assert len(calls[path]) == 1 and calls[path][0] >= 100
    assert not calls["packed" if path == "repeated" else "repeated"]
    for prompt, s in zip(prompts, scores):
        assert s.logliks == pytest.approx(direct_logliks(lm, prompt, list("ABCD")), abs=1e-4)


def test_plan_batches_keeps_subjects_apart_and_pools_the_rest():
    from yunshan.eval.likelihood import plan_batches

    shots_a, shots_b = list(range(100, 160)), list(range(200, 260))
    rows = [shots_a + [k, 1] for k in range(20)] + [shots_b + [k, 2] for k in range(20)]
    rows += [[7, k, 3] for k in range(5)]  # 0-shot questions: nothing worth sharing
    plan = plan_batches(rows, 16)
    covered = sorted(k for batch, _ in plan for k in batch)
    assert covered == list(range(len(rows)))
    for batch, common in plan:
        kinds = {rows[k][-1] for k in batch}
        assert len(kinds) == 1 or common == 0
        if kinds <= {1, 2}:
            assert common == 60  # exactly the shot tokens
    assert [len(b) for b, c in plan if c] == [16, 4, 16, 4]
    assert all(c == 0 for b, c in plan if {rows[k][-1] for k in b} == {3})
    assert plan_batches(rows, 16, share_prefixes=False)[0][1] == 0


@pytest.mark.parametrize("which", ["llama", "pangu", "pangu_conv"])
def test_multi_token_options_share_their_question_and_match_direct(which, request, monkeypatch):
    """Cloze-style options of several tokens: the options of a question share its whole context, which runs once
    (packed tails for attention-only models, the repeated cache for PanGu-π with its convolution); every option's
    log-likelihood equals one plain forward per option (float32 rounding only)."""
    lm = request.getfixturevalue("pangu_conv_lm" if which == "pangu_conv" else which)
    import yunshan.eval.likelihood as lk

    calls = {"packed": [], "repeated": [], "plain": []}
    for name, attr in (("packed", "log_probs_packed_at"), ("repeated", "_log_probs_shared_prefix_at"),
                       ("plain", "_log_probs_at")):
        original = getattr(lk, attr)
        monkeypatch.setattr(lk, attr, lambda *a, _f=original, _c=calls[name]: _c.append(len(a[1])) or _f(*a))
    options = ["财务状况", "经营成果和现金", "现金流量", "所有者权益变动表的附注"]
    prompts = [p for p in PROMPTS if len(p) > 20]
    scores = score_choices(lm, [(p, options) for p in prompts], batch_size=4)  # a question fills a batch
    path = "repeated" if which == "pangu_conv" else "packed"
    assert len(calls[path]) == len(prompts) and not calls["plain"]  # one shared-prefix batch per question
    for prompt, s in zip(prompts, scores):
        assert max(s.n_tokens) > 1
        assert s.logliks == pytest.approx(direct_logliks(lm, prompt, options), rel=1e-6, abs=1e-5)


@pytest.mark.parametrize("which", ["llama", "pangu"])
def test_questions_run_together_each_against_its_own_prefix(which, request, monkeypatch):
    """0-shot cloze: questions share little, so each question's options form a small group; several groups run in
    one batch (their prefixes padded together, every option's tail against its own question's cached prefix)
    and every option's log-likelihood equals one plain forward per option."""
    lm = request.getfixturevalue(which)
    import yunshan.eval.likelihood as lk

    calls = []
    original = lk._log_probs_multi_prefix_at
    monkeypatch.setattr(lk, "_log_probs_multi_prefix_at", lambda lm_, groups: calls.append(len(groups))
                        or original(lm_, groups))
    questions = [("以下是关于会计的单项选择题。\n企业的资产负债表反映的是", ["财务状况", "经营成果和现金", "现金流量"]),
                 ("题目：商业银行的主要负债是什么呢？请回答", ["存款", "贷款和票据", "债券", "现金与存放中央银行款项"]),
                 ("根据《刑法》第二百六十四条，盗窃公私财物数额较大的，处", ["三年以下有期徒刑", "十年以上", "罚金"])]
    scores = score_choices(lm, questions, batch_size=16)
    assert calls == [3]  # all three questions in one batch
    for (prompt, options), s in zip(questions, scores):
        assert s.logliks == pytest.approx(direct_logliks(lm, prompt, options), rel=1e-6, abs=1e-5)


def test_bpc_max_chars_scores_exactly_the_first_characters(llama, llama_dir, tmp_path):
    """--max-chars: the first N characters of the file's documents in order (the last one cut), and the figure
    equals run_bpc on a file holding exactly those documents."""
    from yunshan.eval.bpc import first_chars, run_bpc

    docs = ["alpha beta gamma delta " * 3, "epsilon zeta eta " * 4, "theta iota kappa " * 5]
    assert first_chars(docs, 10) == [docs[0][:10]]
    assert first_chars(docs, len(docs[0]) + 5) == [docs[0], docs[1][:5]]
    assert first_chars(docs, 10_000) == docs
    with pytest.raises(ValueError, match="at least 1"):
        first_chars(docs, 0)
    # One document per record (a .txt would be one document: test_heldout_documents.py)
    full = tmp_path / "full.jsonl"
    full.write_text("".join(json.dumps({"text": d}) + "\n" for d in docs))
    cut = tmp_path / "cut.jsonl"
    n = len(docs[0]) + 20
    cut.write_text("".join(json.dumps({"text": d}) + "\n" for d in first_chars(docs, n)))
    capped = run_bpc(llama, {"t": full}, max_chars=n, max_length=64)["files"]["t"]
    reference = run_bpc(llama, {"t": cut}, max_length=64)["files"]["t"]
    assert capped["chars"] == n == reference["chars"] and capped["documents"] == 2
    assert capped["nll_nats"] == reference["nll_nats"]
    # yunshan eval: --limit is for the other tasks once --max-chars is given (a recipe sets both)
    from yunshan.cli import main

    assert main(["eval", "--model", str(llama_dir), "--tasks", "bpc", "--heldout", f"t={full}", "--limit", "1",
                 "--max-chars", str(n), "--max-length", "64", "--no-progress", "--out", str(tmp_path / "e")]) == 0
    result = json.loads((tmp_path / "e/results.json").read_text())["tasks"]["bpc"]["results"][llama_dir.name]
    assert result["files"]["t"]["chars"] == n and result["files"]["t"]["nll_nats"] == reference["nll_nats"]


# ------------------------------------------------------------------------ bf16 autocast: close calls in float32
def _autocast_copy(lm, recheck: bool = True):
    import dataclasses

    return dataclasses.replace(lm, autocast=True, recheck_float32=recheck)


def _cloze_requests():
    from .conftest import QUESTIONS

    # The last request has two identical options: a tie, the closest call there is.
    return ([(f"题目：{q}（ ）。\n答案：", list(opts)) for q, *opts, _ in QUESTIONS]
            + [("题目：企业的资产负债表反映的是\n答案：", ["财务状况", "财务状况", "利润", "现金流量"])])


@pytest.mark.parametrize("neutral", [False, True])
def test_bf16_close_calls_are_rescored_in_float32_and_the_letters_are_float32s(llama, neutral, monkeypatch):
    from yunshan.eval import likelihood
    from yunshan.eval.multiple_choice import answer_cloze

    requests = _cloze_requests()
    neutrals = ["答案："] * len(requests) if neutral else None
    exact = answer_cloze(llama, requests, batch_size=4, neutral=neutrals)
    assert not any(p.rescored for p in exact)  # float32: nothing to settle
    bf16 = _autocast_copy(llama)
    with bf16.compute():
        rough = answer_cloze(bf16, requests, batch_size=4, neutral=neutrals)
        # An enormous band rescores every question: then every value is float32's to the last bit, which holds
        # only if autocast really was off for the rescoring.
        monkeypatch.setattr(likelihood, "BF16_NATS_PER_SQRT_TOKEN", 1e9)
        every = answer_cloze(bf16, requests, batch_size=4, neutral=neutrals)
        monkeypatch.setattr(likelihood, "BF16_NATS_PER_SQRT_TOKEN", 1e-4)
        narrow = answer_cloze(bf16, requests, batch_size=4, neutral=neutrals)
    assert any(r.logliks != e.logliks for r, e in zip(rough, exact))  # bf16 did move the scores
    assert all(p.rescored for p in every)
    assert [p.logliks for p in every] == [p.logliks for p in exact]
    # A narrow band: the tie is rescored, clear leads are not.
    assert narrow[-1].rescored and narrow[-1].logliks == pytest.approx(exact[-1].logliks, abs=1e-4)
    assert not all(p.rescored for p in narrow)
    # The shipped band: the letters are float32's, and every question rescored carries float32's values (up to the
    # float32 rounding of another batch composition: the rescored subset is packed differently).
    assert [p.pred for p in rough] == [p.pred for p in exact]
    assert rough[-1].rescored
    for r, e in zip(rough, exact):
        if r.rescored:
            assert r.logliks == pytest.approx(e.logliks, abs=1e-4)


def test_bf16_letter_scores_settle_in_float32_too(llama, monkeypatch):
    from yunshan.eval.multiple_choice import answer_questions

    exact = answer_questions(llama, PROMPTS, batch_size=3)
    tied = answer_questions(llama, PROMPTS, batch_size=3, choices=["A", "A", "B", "C"])
    bf16 = _autocast_copy(llama)
    with bf16.compute():
        rough = answer_questions(bf16, PROMPTS, batch_size=3)
        rough_tied = answer_questions(bf16, PROMPTS, batch_size=3, choices=["A", "A", "B", "C"])
        plain = answer_questions(_autocast_copy(llama, recheck=False), PROMPTS, batch_size=3,
                                 choices=["A", "A", "B", "C"])
    assert not any(p.rescored for p in plain)  # without --recheck-float32, bf16's values stand
    assert [p.logliks for p in plain] != [p.logliks for p in tied]
    assert [p.pred for p in rough] == [p.pred for p in exact]
    for r, e in zip(rough + rough_tied, exact + tied):
        if r.rescored:
            assert r.logliks == pytest.approx(e.logliks, abs=1e-4)
    # Where "A" (twice) leads, the tie is the lead: rescored.
    for r in rough_tied:
        if max(r.logliks) == r.logliks[0]:
            assert r.rescored
    assert not any(p.rescored for p in exact + tied)
