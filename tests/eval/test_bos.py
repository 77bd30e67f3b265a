"""BOS as the tokenizer and lm-evaluation-harness do it: with `add_bos` unset, every scoring path puts BOS first
exactly when the model's tokenizer adds it by default, never twice; --add-bos / --no-add-bos force it.

Two tokenizers built here from the same vocabulary, one whose post-processor adds `<s>` (as Gemma's, Llama's and
Mistral's do) and one that adds nothing (as GPT-2's, Qwen's and SmolLM2's), are compared with lm-eval's rule
written out below from its HFLM source (lm_eval/models/huggingface.py, 0.4.x: `tok_encode`, `tok_batch_encode`,
`_create_tokenizer`; lm_eval/api/model.py: `TemplateLM._encode_pair`), so the test needs no lm-eval install.
"""

import json

import pytest
from transformers import AutoTokenizer

from yunshan.eval.generation import encode_prompt
from yunshan.eval.likelihood import (encode_pairs, prefix_token_id, resolve_add_bos, score_choices,
                                     tokenizer_adds_bos)
from yunshan.eval.loading import wrap_model

PAIRS = [("以下是关于税务师的单项选择题。\n\n题目：企业的资产负债表反映的是\n答案是：", "A"),
         ("下列属于货币政策工具的是\n答案：", " B"),
         ("Trailing spaces move to the option:  ", "C"),
         ("", "答案是：D")]


def _load(folder, add_bos_token=None):
    # lm-eval's HFLM._create_tokenizer passes add_bos_token to from_pretrained only when it is set.
    kwargs = {} if add_bos_token is None else {"add_bos_token": add_bos_token}
    return AutoTokenizer.from_pretrained(folder, **kwargs)


def lm_eval_pair(folder, context: str, continuation: str, add_bos_token=None) -> tuple[list[int], list[int]]:
    """lm-eval's (context, continuation) ids for a causal model: TemplateLM._encode_pair over HFLM.tok_encode."""
    tok = _load(folder, add_bos_token)
    prefix = tok.bos_token_id if tok.bos_token_id is not None else tok.eos_token_id  # HFLM.prefix_token_id
    if not context:  # TemplateLM.loglikelihood: an empty context is the prefix token
        return [prefix], tok.encode(continuation, add_special_tokens=False)
    n_spaces = len(context) - len(context.rstrip())
    if n_spaces:
        context, continuation = context[:-n_spaces], context[-n_spaces:] + continuation

    def tok_encode(text):
        kwargs = {} if add_bos_token is None else {"add_special_tokens": add_bos_token}
        if text.startswith(tok.decode(prefix)):  # has_bos_prefix: the text brings its own BOS
            kwargs["add_special_tokens"] = False
        return tok.encode(text, **kwargs)

    whole, ctx = tok_encode(context + continuation), tok_encode(context)
    return ctx, whole[len(ctx):]


def lm_eval_generation_ids(folder, text: str, add_bos_token=None) -> list[int]:
    """lm-eval's prompt ids for generate_until (HFLM.tok_batch_encode, causal models)."""
    tok = _load(folder, add_bos_token)
    if text.startswith(tok.bos_token):
        kwargs = {"add_special_tokens": False}
    elif add_bos_token is not None:
        kwargs = {"add_special_tokens": add_bos_token}
    else:
        kwargs = {}
    return tok(text, **kwargs)["input_ids"]


def test_what_the_tokenizers_add(tokenizer_folders):
    adding, plain = (_load(f) for f in tokenizer_folders)
    assert tokenizer_adds_bos(adding) and not tokenizer_adds_bos(plain)
    assert [resolve_add_bos(adding, v) for v in (None, True, False)] == [True, True, False]
    assert [resolve_add_bos(plain, v) for v in (None, True, False)] == [False, True, False]


@pytest.mark.parametrize("which", [0, 1], ids=["adds-bos", "no-bos"])
@pytest.mark.parametrize("add_bos", [None, True, False], ids=["unset", "forced-on", "forced-off"])
def test_option_encoding_follows_lm_eval(tokenizer_folders, which, add_bos):
    folder = tokenizer_folders[which]
    tok = _load(folder)  # yunshan loads the tokenizer as it is and decides BOS itself
    ours = encode_pairs(tok, PAIRS, add_bos=add_bos)
    theirs = [lm_eval_pair(folder, c, o, add_bos) for c, o in PAIRS]
    assert ours == theirs
    starts_with_bos = [ctx[0] == tok.bos_token_id for ctx, _ in ours[:3]]
    assert starts_with_bos == [resolve_add_bos(tok, add_bos)] * 3  # the test can fail either way


def test_a_context_that_brings_its_own_bos_gets_no_second(tokenizer_folders):
    adding = tokenizer_folders[0]
    tok = _load(adding)
    pairs = [("<s>以下是中国关于会计考试的单项选择题\n答案：", "A")]
    for add_bos in (None, True):
        ours = encode_pairs(tok, pairs, add_bos=add_bos)
        assert ours == [lm_eval_pair(adding, *pairs[0], add_bos)]
        assert ours[0][0][0] == tok.bos_token_id and ours[0][0][1] != tok.bos_token_id


@pytest.mark.parametrize("which", [0, 1], ids=["adds-bos", "no-bos"])
@pytest.mark.parametrize("add_bos", [None, True, False], ids=["unset", "forced-on", "forced-off"])
def test_generation_prompts_follow_lm_eval(tokenizer_folders, which, add_bos):
    folder = tokenizer_folders[which]
    tok = _load(folder)
    tok.chat_template = "{{ bos_token }}{% for m in messages %}<|user|>{{ m['content'] }}\n{% endfor %}<|assistant|>"
    raw = "请回答：合同纠纷属于哪一类？"
    chat = tok.apply_chat_template([{"role": "user", "content": raw}], tokenize=False, add_generation_prompt=True)
    for text in (raw, chat):
        ids = encode_prompt(tok, text, add_bos)
        assert ids == lm_eval_generation_ids(folder, text, add_bos)
        assert ids.count(tok.bos_token_id) <= 1
    assert encode_prompt(tok, chat, add_bos)[0] == tok.bos_token_id  # the template's own BOS, exactly once


@pytest.mark.parametrize("which", [0, 1], ids=["adds-bos", "no-bos"])
def test_scores_default_to_the_tokenizers_bos(llama, tokenizer_folders, which):
    """Multiple-choice and cloze scores with add_bos unset are the forced scores of what the tokenizer adds, and
    the two differ (a model scores a prompt differently with and without BOS)."""
    from yunshan.eval.multiple_choice import answer_cloze

    tok = _load(tokenizer_folders[which])
    lm = wrap_model(llama.model, tok, "tiny")
    requests = [(c, ["A", "B", "C", "D"]) for c, _ in PAIRS[:2]]
    default = [s.logliks for s in score_choices(lm, requests, batch_size=4)]
    on = [s.logliks for s in score_choices(lm, requests, batch_size=4, add_bos=True)]
    off = [s.logliks for s in score_choices(lm, requests, batch_size=4, add_bos=False)]
    assert default == (on if which == 0 else off)
    assert on != off
    cloze = [(PAIRS[0][0], ["财务状况", "经营成果"])]
    assert [p.logliks for p in answer_cloze(lm, cloze, batch_size=4)] == \
        [p.logliks for p in answer_cloze(lm, cloze, batch_size=4, add_bos=which == 0)]


def test_bits_per_character_start_from_bos_once(llama, tokenizer_folders):
    """Bits/char predict a document's first token from BOS (else EOS), whatever the tokenizer adds: the document's
    own tokens are encoded without special tokens, so a BOS-adding tokenizer gives the same figure, and BOS is never
    scored as text."""
    from yunshan.eval.bpc import run_bpc

    results = []
    for folder in tokenizer_folders:
        tok = _load(folder)
        assert prefix_token_id(tok) == tok.bos_token_id
        results.append(run_bpc(wrap_model(llama.model, tok, "tiny"), {"t": _heldout(llama)}, batch_size=2))
    assert results[0]["files"]["t"]["bpc"] == results[1]["files"]["t"]["bpc"]
    assert results[0]["files"]["t"]["tokens"] == results[1]["files"]["t"]["tokens"]


def _heldout(llama):
    import tempfile
    from pathlib import Path

    path = Path(tempfile.mkdtemp()) / "heldout.txt"
    path.write_text("企业的资产负债表反映的是财务状况。\n\n通货膨胀时，央行通常会提高利率。\n", encoding="utf-8")
    return path


def test_eval_records_the_bos_each_model_got(tmp_path, tokenizer_folders, llama_dir, writers):
    """`yunshan eval` without the flag follows the tokenizer; results.json says what each model got."""
    from yunshan.eval.commands import EvalArgs, run_eval

    model = tmp_path / "model-adds-bos"
    model.mkdir()
    for f in llama_dir.iterdir():
        if f.suffix in (".json", ".safetensors") and not f.name.startswith("tokenizer"):
            (model / f.name).write_bytes(f.read_bytes())
    _load(tokenizer_folders[0]).save_pretrained(model)
    root = writers.cmmlu(tmp_path / "financeiq", n_test=2, n_dev=1)
    runs = {}
    for flag in (None, False):
        report = run_eval(EvalArgs(model=[str(model)], tasks=[f"financeiq={root}"], shots=1, batch_size=4,
                                   add_bos=flag, out=str(tmp_path / f"out-{flag}"), progress=False,
                                   hash_weights=False))
        entry = report["models"][model.name]
        assert entry["tokenizer_adds_bos"] is True and entry["add_bos"] is (flag is None)
        runs[flag] = [p["logliks"] for p in report["tasks"]["financeiq"]["results"][model.name]["predictions"]]
        saved = json.loads((tmp_path / f"out-{flag}" / "results.json").read_text(encoding="utf-8"))
        assert saved["models"][model.name]["add_bos"] is (flag is None)
    assert runs[None] != runs[False]


def test_help_says_what_happens():
    from yunshan.cli import build_parser

    parser = build_parser()
    eval_parser = next(a for a in parser._subparsers._group_actions[0].choices.items() if a[0] == "eval")[1]
    text = " ".join(eval_parser.format_help().split())
    assert "--add-bos, --no-add-bos" in text
    assert "when the model's tokenizer adds BOS by itself" in text and "never a second BOS" in text
