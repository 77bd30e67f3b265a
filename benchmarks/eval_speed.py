"""Answer-only multiple choice on tiny models: questions/s batched vs one question at a time (not a timed test).

    .venv/bin/python benchmarks/eval_speed.py            # about two minutes on 2 cores
    .venv/bin/python benchmarks/eval_speed.py --quick    # fewer questions and rounds

The questions are the FinEval-format sample set shipped in yunshan.samples (val split, 5-shot C-Eval prompts, as
`yunshan eval --tasks fineval` renders them), scored by yunshan.eval's `score_choices` with a byte-level BPE
tokenizer trained here on the sample corpus, on two randomly initialised LLaMAs: "tiny" (hidden 64, 2 layers,
0.6M parameters: tokenisation is a large share of the time) and "small" (hidden 256, 6 layers, 6.4M parameters:
the size this machine trains at about 2,000 tokens/s). "One at a time" is batch_size=1 (one forward per
question, the options read off its last position); "batched" puts --batch-size questions into one call (the
subject's shared few-shot prefix runs once, the questions' tails as one packed row). Both sides tokenise the same
way. The machine is shared and its load swings, so the two sides are timed in short pairs: one unit =
--batch-size questions of one subject, scored one at a time and batched back to back (in alternating order),
every unit in every round; the speed-up is the median of the per-pair ratios, and questions/s use the median
time of each unit. Wall-clock and process CPU time are both recorded. Both sides must predict the same letters.
Target: >= 3x. Results go to benchmarks/results/eval_speed.json.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "true")  # as `yunshan eval` runs (the tokenizers default)

import torch  # noqa: E402


def build_tokenizer(folder: Path):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    from yunshan.samples import sample_data_dir

    root = sample_data_dir()
    texts = [(root / "heldout" / f"{d}.txt").read_text(encoding="utf-8") for d in ("general", "finance", "legal")]
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=4000, special_tokens=["<pad>", "<s>", "</s>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(texts, trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<s>", eos_token="</s>", pad_token="<pad>")
    fast.save_pretrained(folder)
    return fast


SIZES = {  # name: (hidden, intermediate, layers, heads, kv heads)
    "tiny": (64, 128, 2, 4, 2),
    "small": (256, 688, 6, 8, 4),
}


def measure(lm, units, rounds: int, batch_size: int) -> dict:
    from yunshan.eval.likelihood import score_choices

    requests = [r for u in units for r in u]
    score_choices(lm, requests[:8], batch_size=4)  # warm-up (allocator, kernels)
    sides = (("one at a time", 1), ("batched", batch_size))
    wall = {side: [[] for _ in units] for side, _ in sides}
    cpu = {side: [[] for _ in units] for side, _ in sides}
    preds = {side: [None] * len(units) for side, _ in sides}
    ratios = []
    for r in range(rounds):
        for u, unit in enumerate(units):
            pair = {}
            for side, bs in (sides if (r + u) % 2 == 0 else sides[::-1]):
                w0, c0 = time.perf_counter(), time.process_time()
                scores = score_choices(lm, unit, batch_size=bs)
                pair[side] = time.perf_counter() - w0
                wall[side][u].append(pair[side])
                cpu[side][u].append(time.process_time() - c0)
                preds[side][u] = [s.best for s in scores]
            ratios.append(pair["one at a time"] / pair["batched"])
    if preds["one at a time"] != preds["batched"]:
        raise SystemExit("error: batched and one-at-a-time predictions differ")
    n = len(requests)
    qps = {side: n / sum(statistics.median(t) for t in wall[side]) for side, _ in sides}
    cpu_qps = {side: n / sum(statistics.median(t) for t in cpu[side]) for side, _ in sides}
    return {"questions_per_second": qps, "questions_per_cpu_second": cpu_qps,
            "speedup_median": statistics.median(ratios), "speedups": ratios,
            "speedup_cpu": cpu_qps["batched"] / cpu_qps["one at a time"],
            "seconds": {"wall": wall, "cpu": cpu}, "same_predictions": True}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batch-size", type=int, default=16, help="questions per call on the batched side")
    ap.add_argument("--questions", type=int, default=96,
                    help="questions per round: the first --batch-size of each of questions / batch-size subjects")
    ap.add_argument("--rounds", type=int, default=5, help="alternated rounds; the figure is the median")
    ap.add_argument("--sizes", default="tiny,small", help=f"comma-separated model sizes from {sorted(SIZES)}")
    ap.add_argument("--quick", action="store_true", help="48 questions, 3 rounds")
    args = ap.parse_args()
    if args.quick:
        args.questions, args.rounds = 48, 3
    sizes = args.sizes.split(",")
    if unknown := [s for s in sizes if s not in SIZES]:
        ap.error(f"--sizes: unknown {unknown}; valid: {sorted(SIZES)}")
    torch.set_num_threads(2)

    from transformers import LlamaConfig, LlamaForCausalLM

    from yunshan.eval.ceval import load_ceval, render_prompt
    from yunshan.eval.loading import wrap_model
    from yunshan.samples import sample_data_dir

    with tempfile.TemporaryDirectory() as tmp:
        tokenizer = build_tokenizer(Path(tmp))
    subjects = load_ceval(sample_data_dir() / "eval" / "fineval", "val", shots=5)
    # One unit per subject: its first --batch-size questions (the batched side scores a unit in one call).
    n_subjects = max(1, min(len(subjects), args.questions // args.batch_size))
    units = [[(render_prompt(s.chinese, s.dev, q), list("ABCD")) for q in s.questions[: args.batch_size]]
             for s in subjects[:n_subjects]]
    prompts = [p for u in units for p, _ in u]
    mean_tokens = sum(len(tokenizer(p)["input_ids"]) for p in prompts) / len(prompts)

    results = {}
    for size in sizes:
        hidden, inter, layers, heads, kv_heads = SIZES[size]
        torch.manual_seed(0)
        config = LlamaConfig(vocab_size=len(tokenizer), hidden_size=hidden, intermediate_size=inter,
                             num_hidden_layers=layers, num_attention_heads=heads, num_key_value_heads=kv_heads,
                             max_position_embeddings=2048, bos_token_id=1, eos_token_id=2, pad_token_id=0)
        model = LlamaForCausalLM(config)
        params = sum(p.numel() for p in model.parameters())
        results[size] = {"parameters": params, "config": SIZES[size],
                         **measure(wrap_model(model, tokenizer, name=f"{size}-llama"), units, args.rounds,
                                   args.batch_size)}

    print(f"FinEval-format sample prompts, 5-shot, {len(prompts)} questions x {args.rounds} rounds, "
          f"mean prompt {mean_tokens:.0f} tokens, vocabulary {len(tokenizer)}\n")
    print("| model | scoring | batch size | questions/s (wall) | questions/s (CPU time) | speed-up |")
    print("|---|---|---|---|---|---|")
    for size, r in results.items():
        hidden, _, layers, _, _ = SIZES[size]
        name = f"{size} LLaMA ({r['parameters'] / 1e6:.1f}M, hidden {hidden}, {layers} layers)"
        qps, cpu_qps = r["questions_per_second"], r["questions_per_cpu_second"]
        print(f"| {name} | one at a time | 1 | {qps['one at a time']:.1f} | {cpu_qps['one at a time']:.1f} | 1.00x |")
        print(f"| {name} | batched | {args.batch_size} | {qps['batched']:.1f} | {cpu_qps['batched']:.1f} | "
              f"{r['speedup_median']:.2f}x wall (median of {len(r['speedups'])} pairs), "
              f"{r['speedup_cpu']:.2f}x CPU (target >= 3x) |")
    out = Path(__file__).resolve().parent / "results"
    out.mkdir(exist_ok=True)
    (out / "eval_speed.json").write_text(json.dumps({
        "questions": len(prompts), "subjects": n_subjects, "rounds": args.rounds, "batch_size": args.batch_size,
        "mean_prompt_tokens": mean_tokens, "models": results, "load_average": os.getloadavg(),
        "machine": {"python": platform.python_version(), "torch": torch.__version__, "threads": torch.get_num_threads()},
    }, indent=1) + "\n")
    print(f"\nwrote {out / 'eval_speed.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
