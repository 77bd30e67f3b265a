"""The held-out instruction loss (yunshan eval --tasks chat_loss) against a hand computation: F.cross_entropy of a
tiny model's logits over the assistant tokens of the conversation as its chat template writes it, tokenised piece by
piece; truncation and dropping as SFT's; yunshan eval's results, tables and headline; the command-line spec."""

import json
import math

import pytest
import torch
import torch.nn.functional as F

from yunshan.data.conversations import SftSourceArgs
from yunshan.eval.chat_loss import instruction_set, run_chat_loss

# Each token of a piece is the same alone as inside the whole text: the pieces are cut at the special tokens and
# before "\n" (tests/data/test_conversations.py checks the SFT labels the same way).
QA = [("银行 证券", "利率 基金"), ("会计 审计", "税法 金融 保险")]


def ids(tok, text: str) -> list[int]:
    return tok(text, add_special_tokens=False)["input_ids"]


def by_hand(lm, pieces: list[tuple[str, bool]]) -> tuple[float, int]:
    """(sum of the cross-entropy in nats of the tokens of the scored pieces, their count): the sequence is the pieces
    tokenised one by one; a token at position t is predicted by the logits at t - 1."""
    seq, scored = [], []
    for text, trained in pieces:
        piece = ids(lm.tokenizer, text)
        scored += [trained] * len(piece)
        seq += piece
    with torch.no_grad():
        logits = lm.model(input_ids=torch.tensor([seq])).logits[0]
    positions = [t for t in range(1, len(seq)) if scored[t]]
    nll = F.cross_entropy(logits[[t - 1 for t in positions]].float(), torch.tensor([seq[t] for t in positions]),
                          reduction="sum")
    return nll.item(), len(positions)


@pytest.fixture()
def lm(llama_dir):
    """A fresh load (the template is changed here, and the session's model must keep its own)."""
    from yunshan.eval.loading import load_model

    return load_model(str(llama_dir))


@pytest.fixture()
def sets(tmp_path):
    alpaca = tmp_path / "alpaca.jsonl"
    alpaca.write_text("".join(json.dumps({"question": q, "answer": a}, ensure_ascii=False) + "\n" for q, a in QA),
                      encoding="utf-8")
    messages = tmp_path / "messages.jsonl"
    messages.write_text(json.dumps({"messages": [
        {"role": "user", "content": QA[0][0]}, {"role": "assistant", "content": QA[0][1]},
        {"role": "user", "content": QA[1][0]}, {"role": "assistant", "content": QA[1][1]}]}, ensure_ascii=False)
        + "\n", encoding="utf-8")
    return [SftSourceArgs(name="alpaca", path=str(alpaca), format="alpaca",
                          columns={"prompt": "question", "response": "answer"}),
            SftSourceArgs(name="multi", path=str(messages), format="messages")]


def test_default_template_loss_equals_cross_entropy_over_the_answer_tokens(lm, sets):
    """A tokenizer without a chat template is scored in yunshan's default one (what SFT trains it with): each
    answer and the EOS closing it, nothing of the prompt or the newline after the turn; the template is given
    back."""
    lm.tokenizer.chat_template = None
    result = run_chat_loss(lm, sets, max_length=512)
    assert lm.tokenizer.chat_template is None and result["chat_template"].startswith("yunshan default")

    single = [by_hand(lm, [(f"<|user|>\n{q}\n<|assistant|>\n", False), (f"{a}</s>", True), ("\n", False)])
              for q, a in QA]
    nll, tokens = sum(n for n, _ in single), sum(k for _, k in single)
    got = result["sets"]["alpaca"]
    assert got["tokens"] == tokens and got["scored"] == 2 and got["chars"] == sum(len(a) for _, a in QA)
    assert got["nll_nats"] == pytest.approx(nll, rel=1e-5)
    assert got["nats_per_token"] == pytest.approx(nll / tokens, rel=1e-5)
    assert got["bits_per_char"] == pytest.approx(nll / math.log(2) / got["chars"], rel=1e-5)
    assert got["token_perplexity"] == pytest.approx(math.exp(nll / tokens), rel=1e-5)

    # Two turns in one conversation: both answers are scored, each with the whole conversation before it.
    (q1, a1), (q2, a2) = QA
    nll2, tokens2 = by_hand(lm, [(f"<|user|>\n{q1}\n<|assistant|>\n", False), (f"{a1}</s>", True),
                                 (f"\n<|user|>\n{q2}\n<|assistant|>\n", False), (f"{a2}</s>", True), ("\n", False)])
    multi = result["sets"]["multi"]
    assert (multi["tokens"], multi["chars"]) == (tokens2, len(a1) + len(a2))
    assert multi["nll_nats"] == pytest.approx(nll2, rel=1e-5)


def test_the_models_own_template_is_used(lm, sets):
    lm.tokenizer.chat_template = ("{% for m in messages %}{% if m['role'] == 'user' %}<|user|>{{ m['content'] }}\n"
                                  "{% else %}<|assistant|>{{ m['content'] }}</s>\n{% endif %}{% endfor %}"
                                  "{% if add_generation_prompt %}<|assistant|>{% endif %}")
    result = run_chat_loss(lm, sets[:1], max_length=512)
    assert result["chat_template"] == "tokenizer's own"
    hand = [by_hand(lm, [(f"<|user|>{q}\n<|assistant|>", False), (f"{a}</s>", True), ("\n", False)]) for q, a in QA]
    assert result["sets"]["alpaca"]["nll_nats"] == pytest.approx(sum(n for n, _ in hand), rel=1e-5)
    assert result["sets"]["alpaca"]["tokens"] == sum(k for _, k in hand)


def test_long_conversations_are_cut_as_sft_cuts_them(lm, sets):
    """Past max_length the oldest turns go and the answer they reach is not scored (SFT's truncate_prompt); a last
    answer that does not fit leaves the sample out, counted."""
    lm.tokenizer.chat_template = None
    (q1, a1), (q2, a2) = QA
    first = ids(lm.tokenizer, f"<|user|>\n{q1}\n<|assistant|>\n") + ids(lm.tokenizer, f"{a1}</s>")
    last_answer = ids(lm.tokenizer, f"{a2}</s>")
    whole = first + ids(lm.tokenizer, f"\n<|user|>\n{q2}\n<|assistant|>\n") + last_answer + ids(lm.tokenizer, "\n")
    # The cut lands inside the first answer: what is left of it is not scored.
    cut = run_chat_loss(lm, sets[1:], max_length=len(whole) - len(first) + 2)["sets"]["multi"]
    assert (cut["truncated_prompt"], cut["tokens"], cut["chars"]) == (1, len(last_answer), len(a2))
    dropped = run_chat_loss(lm, sets[1:], max_length=len(last_answer))["sets"]["multi"]
    assert (dropped["scored"], dropped["dropped_answer_too_long"], dropped["tokens"]) == (0, 1, 0)
    assert dropped["nats_per_token"] is None


def test_max_samples_then_limit_cap_each_set(lm, sets):
    lm.tokenizer.chat_template = None
    capped = SftSourceArgs(name="alpaca", path=sets[0].path, format="alpaca", columns=sets[0].columns, max_samples=1)
    assert run_chat_loss(lm, [capped], limit=2, max_length=512)["sets"]["alpaca"]["scored"] == 1
    assert run_chat_loss(lm, [sets[0]], limit=1, max_length=512)["sets"]["alpaca"]["scored"] == 1


def test_yunshan_eval_reports_it_before_and_after(llama_dir, sets, tmp_path):
    """Two models through yunshan eval: results.json (settings with the sets), the table, the headline metrics."""
    import shutil

    from yunshan.eval.commands import EvalArgs, run_eval

    model = shutil.copytree(llama_dir, tmp_path / "model")
    (model / "chat_template.jinja").unlink()  # the test tokenizer's template is not prefix-stable: yunshan's default
    report = run_eval(EvalArgs(model=[str(model), str(model)], tasks=["chat_loss"], instructions=sets,
                               out=str(tmp_path / "eval"), progress=False, hash_weights=False))
    saved = json.loads((tmp_path / "eval" / "results.json").read_text(encoding="utf-8"))
    assert saved["settings"]["instructions"][0]["columns"] == {"prompt": "question", "response": "answer"}
    task = saved["tasks"]["chat_loss"]
    first, second = task["results"].values()
    assert first["sets"]["alpaca"]["nll_nats"] == pytest.approx(second["sets"]["alpaca"]["nll_nats"])
    assert set(task["files"]) == {s.path for s in sets}
    metric = next(iter(task["metrics"].values()))[0]
    assert metric["key"] == "chat_loss/alpaca" and metric["lower_is_better"]
    assert metric["value"] == pytest.approx(first["sets"]["alpaca"]["nats_per_token"])
    assert "alpaca nats/token | multi nats/token | alpaca bits/char" in report["markdown"]


def test_command_line_specs(tmp_path):
    assert instruction_set("law=alpaca:/data/law.jsonl") == SftSourceArgs(name="law", path="/data/law.jsonl",
                                                                          format="alpaca")
    mapped = instruction_set("{name: disc, path: d.jsonl, format: alpaca, columns: {prompt: input, response: output}}")
    assert mapped.columns == {"prompt": "input", "response": "output"}
    with pytest.raises(ValueError, match="write NAME=FORMAT:PATH"):
        instruction_set("law=csv:/data/law.jsonl")
    with pytest.raises(ValueError, match="columns.answer is not an alpaca column"):
        instruction_set("{name: x, path: d.jsonl, format: alpaca, columns: {answer: a}}")
    from yunshan.cli import build_parser
    from yunshan.eval.commands import EvalArgs
    from yunshan.arguments.flags import from_flags

    argv = ["eval", "--model", "m", "--tasks", "chat_loss", "--instructions", "a=alpaca:a.jsonl",
            "--instructions", "{name: b, path: b.jsonl, format: self_instruct}"]
    args = from_flags(EvalArgs, build_parser().parse_args(argv))
    assert [(s.name, s.format) for s in args.instructions] == [("a", "alpaca"), ("b", "self_instruct")]
    with pytest.raises(ValueError, match="set names must be unique"):
        EvalArgs(model=["m"], instructions=["a=alpaca:a.jsonl", "a=messages:b.jsonl"])


def test_the_progress_bar_counts_samples(lm, sets, capsys):
    """Each set has its bar by sample (issue 47: evaluation by item, not by batch), named after the set."""
    import re

    lm.tokenizer.chat_template = None
    run_chat_loss(lm, sets[:1], max_length=512, batch_size=8, progress=True)
    err = capsys.readouterr().err
    assert set(re.findall(r"chat_loss alpaca:\s+\d+%\|[^|]*\|\s*\d+/(\d+)", err)) == {"2"}  # its 2 samples
