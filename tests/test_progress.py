"""No silent minutes (issue 47): every phase of a run that can take long shows progress while it works.

The acceptance test runs a tiny `yunshan cpt` with new tokens (the extension's held-out cost, the token distillation,
the output-row fit with its validation checks, the forgetting monitor, the embedding warm-up and training) with every
forward pass of the model slowed by SLOW seconds, records when each piece of its output (stdout and stderr: lines and
progress-bar updates) was written, and asserts that no gap between two of them is longer than a few forward passes,
naming the output before and after the silence. Before issue 47 the same run said nothing from the model's loading
to the end of the distillation (14 forward passes); on a real CPU, with SmolLM2-135M and 2,000 new tokens, that was
20 minutes. A step of gradient accumulation shows its micro-batches; `yunshan sft`'s held-out answers show their
tokens. Evaluation bars count items (windows, questions, prompts), not batches, and generation shows its tokens while
a batch of prompts is being answered.
"""

from __future__ import annotations

import json
import re
import sys
import time

import pytest
import torch

from fixtures import tied_llama_extended, train_tokenizer, write_jsonl_corpus

SLOW = 0.5  # seconds added to every forward pass of the model in the slowed runs (above tqdm's 0.1 s redraw)


class Timeline:
    """A text stream that records when each piece of output is written: a line, or a progress bar's redraw (tqdm
    rewrites its line after a carriage return)."""

    encoding = "utf-8"

    def __init__(self, events: list):
        self.events = events

    def write(self, text: str) -> int:
        now = time.monotonic()
        for piece in re.split(r"[\r\n]", text):
            if piece.strip():
                self.events.append((now, piece.strip()))
        return len(text)

    def flush(self) -> None:
        pass

    def isatty(self) -> bool:
        return False


def silences(events: list, passes: list[float], started: float, ended: float, most: int) -> list[str]:
    """Each stretch without output in which more than `most` slowed forward passes started (`passes`: their start
    times), with its length and the output before and after it. Counting passes, not seconds, leaves out the
    unslowed work (loading, saving, plotting), which takes what the machine's load makes it take."""
    points = [(started, "(start)"), *sorted(events), (ended, "(end)")]
    found = []
    for a, b in zip(points, points[1:]):
        inside = sum(a[0] <= t < b[0] for t in passes)
        if inside > most:
            found.append(f"{b[0] - a[0]:.1f} s and {inside} forward passes silent between {a[1][:90]!r} and "
                         f"{b[1][:90]!r}")
    return found


def slow_forward(monkeypatch, seconds: float) -> list[float]:
    """Every forward pass of a Llama decoder (the whole model's, the output-row fit's, the distillation's) takes
    `seconds` longer: a stand-in for a real model on a CPU, where a pass of a batch takes seconds. Returns the list
    the start time of every pass is appended to."""
    from transformers.models.llama.modeling_llama import LlamaModel

    forward = LlamaModel.forward
    passes: list[float] = []

    def slowed(self, *args, **kwargs):
        passes.append(time.monotonic())
        time.sleep(seconds)
        return forward(self, *args, **kwargs)

    monkeypatch.setattr(LlamaModel, "forward", slowed)
    return passes


def recorded(run) -> tuple[list, float, float, object]:
    """Run `run()` with stdout and stderr recorded on one timeline: (events, start, end, its result)."""
    events: list = []
    streams = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = Timeline(events), Timeline(events)
    try:
        started = time.monotonic()
        result = run()
        ended = time.monotonic()
    finally:
        sys.stdout, sys.stderr = streams
    return events, started, ended, result


@pytest.fixture(scope="module")
def extended(tmp_path_factory):
    """A tied Llama (as SmolLM2) in base/, its tokenizer extended by 40 tokens in tok_ext/, a corpus and held-out
    text."""
    root = tmp_path_factory.mktemp("progress")
    files = {"mid": write_jsonl_corpus(root / "mid.jsonl", 150, 40, 160, seed=2)}
    tied_llama_extended(root, train_tokenizer(root / "tok"), [files["mid"]], processes=1)
    heldout = root / "heldout.txt"
    heldout.write_text("\n\n".join(json.loads(line)["text"] for line in open(files["mid"]).readlines()[-10:]))
    return root, files, heldout


def test_a_cpt_with_new_tokens_is_never_silent(extended, tmp_path, monkeypatch):
    """Every phase of a `yunshan cpt` with new tokens shows progress at least every few forward passes, and the
    budget warning comes first, in the words of the warning beside the measured step-0 cost."""
    from yunshan.arguments.recipe import load_recipe
    from yunshan.training.cpt import CptArgs, run_cpt

    passes = slow_forward(monkeypatch, SLOW)
    root, files, heldout = extended
    recipe = load_recipe(CptArgs, data={
        "model": {"name_or_path": str(root / "base")}, "tokenizer": {"path": str(root / "tok_ext")},
        "data": {"seq_len": 64, "block_size": 64, "sources": [{"name": "mid", "path": str(files["mid"])}]},
        "training": {"output_dir": str(tmp_path / "run"), "max_steps": 3, "per_device_batch_size": 2,
                     "gradient_accumulation_steps": 2, "save_steps": 100, "logging_steps": 1},
        "warmup": {"steps": 1, "fit_sequences": 16, "validation_sequences": 8, "fit_rounds": 1, "distill_steps": 1,
                   "distill_layers": 1, "until_base_bpc": False},
        "monitor": {"every_steps": 0, "domain": [str(heldout)], "max_chars": 1500}})
    events, started, ended, _ = recorded(lambda: run_cpt(recipe))
    texts = [text for _, text in events]
    for phase in ("extension cost: base model, held-out domain", "extension cost: new rows as initialised",
                  "fit of the new output rows: the first training sequences", "token distillation of the new input rows",
                  "fit of the new output rows, round 1/1: hidden states",
                  "fit of the new output rows: validation cross-entropy", "[step 0] held-out bits/char, domain",
                  "[step 3] held-out bits/char, domain"):
        assert any(t.startswith(phase) for t in texts), f"no progress shown for: {phase}"
    assert any("micro-batch 1/2" in t for t in texts)  # a step of gradient accumulation, seen advancing
    # The budget per new token is said before the first forward pass, as it is said beside the step-0 cost.
    warning = json.loads((tmp_path / "run/extension_cost.json").read_text())["warnings"][-1]
    first_pass = next(i for i, t in enumerate(texts) if t.startswith("extension cost"))
    assert f"warning: {warning}" in texts[:first_pass] and "barely trained" in warning
    # Two forward passes at most between two pieces of output (a distilled text takes two): on a real model and a
    # CPU, where a pass takes seconds, no phase is silent for minutes.
    assert len(passes) > 20 and silences(events, passes, started, ended, most=2) == []


@pytest.fixture(scope="module")
def lm(tmp_path_factory):
    """A tiny Llama as `yunshan eval` wraps it."""
    from transformers import LlamaConfig, LlamaForCausalLM

    from yunshan.eval.loading import LoadedModel

    tokenizer = train_tokenizer(tmp_path_factory.mktemp("eval_tok"))
    torch.manual_seed(0)
    model = LlamaForCausalLM(LlamaConfig(vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64,
                                         num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                                         max_position_embeddings=256)).eval()
    return LoadedModel(name="tiny", path="", model=model, tokenizer=tokenizer, sha256=None)


def bar_counts(err: str, desc: str) -> set[tuple[int, int]]:
    """The (done, total) counts a tqdm bar named `desc` showed."""
    return {(int(n), int(total)) for n, total in re.findall(re.escape(desc) + r":\s+\d+%\|[^|]*\|\s*(\d+)/(\d+)", err)}


def test_evaluation_bars_count_items_not_batches(lm, capsys, monkeypatch):
    """Held-out bits/char by window, multiple choice by question, generation by prompt: a bar's total is the items
    (a batch of 16 questions used to be "0/1" until it ended)."""
    from yunshan.eval.bpc import rolling_nll
    from yunshan.eval.generation import generate
    from yunshan.eval.likelihood import score_choices

    slow_forward(monkeypatch, 0.15)  # longer than tqdm's 0.1 s between redraws: every update is drawn
    text = " ".join(["alpha beta gamma delta court contract market weather"] * 40)
    ids = lm.tokenizer(text, add_special_tokens=False)["input_ids"]
    docs = rolling_nll(lm, [ids], max_length=32, stride=16, batch_size=8, progress=True, desc="bpc held")
    windows = docs[0].n_windows
    questions = [(f"question {i}: alpha or beta?\nA. alpha\nB. beta\nC. gamma\nD. delta\nanswer:", ["A", "B", "C", "D"])
                 for i in range(6)]
    score_choices(lm, questions, batch_size=16, progress=True, desc="mc questions")
    generate(lm, [f"court contract {i}" for i in range(5)], max_new_tokens=3, batch_size=4, progress=True,
             desc="generation prompts")
    err = capsys.readouterr().err
    # tqdm draws an update only when enough has changed, so the last count may not be drawn: the totals are the
    # items, and one batch's update moves the count by its items
    counted = {desc: bar_counts(err, desc) for desc in ("bpc held", "mc questions", "generation prompts")}
    assert windows > 8 and {total for _, total in counted["bpc held"]} == {windows}
    assert max(n for n, _ in counted["bpc held"]) >= 8  # a batch of 8 windows
    assert {total for _, total in counted["mc questions"]} == {6}
    assert {total for _, total in counted["generation prompts"]} == {5} and (4, 5) in counted["generation prompts"]


def test_generation_shows_its_tokens_while_a_batch_is_answered(lm, monkeypatch):
    """A batch of prompts is answered together (its prompts finish at once): the bar shows the tokens generated so
    far at least every second, so a slow batch is not a silent one."""
    from yunshan.eval.generation import generate

    passes = slow_forward(monkeypatch, SLOW)
    events, started, ended, _ = recorded(lambda: generate(
        lm, ["court contract", "market weather"], max_new_tokens=10, batch_size=2, progress=True, desc="answers"))
    assert any("token 5/10" in t or "token 6/10" in t for _, t in events)
    assert len(passes) == 10 and silences(events, passes, started, ended, most=2) == []  # drawn once a second


def test_sft_held_out_answers_show_their_progress(tmp_path, monkeypatch):
    """`yunshan sft` answers its held-out prompts one by one after training (128 tokens each by default: tens of
    seconds each on a CPU): a bar by prompt with the tokens so far, never more than two forward passes silent."""
    from transformers import LlamaConfig, LlamaForCausalLM

    from yunshan.arguments.recipe import load_recipe
    from yunshan.training.sft import SftArgs, run_sft

    rows = [{"instruction": "Which domain?", "input": f"court contract {i}", "output": "law"} for i in range(24)]
    (tmp_path / "sft.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    tokenizer = train_tokenizer(tmp_path / "tok")
    LlamaForCausalLM(LlamaConfig(vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                 num_attention_heads=4, num_key_value_heads=2)).save_pretrained(tmp_path / "llama")
    tokenizer.save_pretrained(tmp_path / "llama")
    recipe = load_recipe(SftArgs, data={
        "model": {"name_or_path": str(tmp_path / "llama")},
        "data": {"max_length": 64, "max_new_tokens": 6,
                 "sources": [{"name": "a", "path": str(tmp_path / "sft.jsonl"), "format": "alpaca", "heldout": 2}]},
        "training": {"output_dir": str(tmp_path / "run"), "max_steps": 1, "per_device_batch_size": 4,
                     "save_steps": 100, "logging_steps": 1}})
    passes = slow_forward(monkeypatch, SLOW)
    events, started, ended, _ = recorded(lambda: run_sft(recipe))
    assert any(t.startswith("held-out answers") and "token " in t for _, t in events)
    assert len(passes) >= 12 and silences(events, passes, started, ended, most=2) == []
