"""Laws: vocabulary extension against no extension at the same CPT budget, on a real model and the real laws corpus.

    make real-model
    .venv/bin/python benchmarks/laws_extension.py                        # budgets of 20 and 40 steps
    .venv/bin/python benchmarks/laws_extension.py --budgets 40 --variants none,capped,uncapped
    .venv/bin/python benchmarks/laws_extension.py --budgets 40,20 --variants none,n100,n400   # a size sweep
    .venv/bin/python benchmarks/laws_extension.py --quick                # a few minutes: checks the script

The continual-pretraining section of recipes/smollm2-135m_laws.yaml (LoRA r=64, new rows trained in full, laws :
general replay = 1 : 1 in tokens, steps of 4 x 512 tokens, the embedding warm-up inside training.max_steps) run from
SmolLM2-135M-Instruct at each budget in three variants:

- `none`: the base tokenizer, no extension;
- `capped`: the recipe's extension (continued BPE on ../shared/realdata/laws/laws.jsonl.zst) with its new tokens
  capped as `yunshan run` caps them for that budget (yunshan.tokenizer.extend.capped_new_tokens; with the default
  of 100,000 training tokens per new token the laws budgets carry none, and this run is the `none` run);
- `uncapped`: the recipe's `new_tokens` without the cap;
- `nK` (e.g. `n200`): exactly K new tokens, the first K of the same continued BPE: a sweep of the extension's size,
  which is what sets the cap (training tokens per new token at which the extension stops costing).

With `--distill-steps N` the extended runs first fit their new input rows by N steps of token distillation
(warmup.distill_steps; through the first --distill-layers decoder layers), recorded as `nK + distillation N`.

After training: bits per character of the first --heldout-chars characters of the held-out Civil Code
(laws/civil_code.txt) and of the real Chinese and English general held-out texts (general/{zh,en}_heldout.txt), each
one continuous document, and tokens per character, beside the base model's; the CPT replays what the recipe
replays (real Chinese and English general text). The extension's gap to no extension on the Civil Code is fitted
against log2(training tokens) for every variant trained at two budgets or more (break_even): where the line crosses
zero is the budget where the extension starts to pay. The rule the cap serves: at every budget the extended model ends no worse on the Civil
Code than the same CPT without extension. Writes benchmarks/results/laws_extension/{results.json,table.md}; each
finished run is kept there (partial.json), so a stopped invocation goes on from what is done. bf16 autocast where
the CPU has it fast, as `precision: auto` decides.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import shutil
import sys
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

ROOT = Path(__file__).resolve().parents[1]
RECIPE = ROOT / "recipes/smollm2-135m_laws.yaml"
RESULTS = ROOT / "benchmarks/results/laws_extension"
REALDATA = Path(os.environ.get("YUNSHAN_REALDATA") or ROOT.parent / "shared" / "realdata")
VARIANTS = ("none", "capped", "uncapped")
GENERAL = {"general_zh": "zh", "general_en": "en"}  # the real general held-out texts (forgetting)


def size_of(variant: str) -> int | None:
    """K of an `nK` variant (K new tokens), None for the named variants."""
    return int(variant[1:]) if variant.startswith("n") and variant[1:].isdigit() else None


def variant_order(variant: str) -> tuple[int, int, int]:
    """Table order: none, the sized runs by size, capped, uncapped; each without distillation first."""
    variant, _, distilled = variant.partition(" + distillation ")
    size = size_of(variant)
    return ((1, size) if size is not None else ({"none": 0, "capped": 2, "uncapped": 3}[variant], 0)) + \
        (int(distilled or 0),)


def check_variant(variant: str) -> str:
    if variant in VARIANTS or (size_of(variant) or 0) > 0:
        return variant
    raise SystemExit(f"--variants: {variant!r} is not one of {', '.join(VARIANTS)} or nK (K new tokens, K >= 1)")


def load_pipeline(model_dir: Path):
    from yunshan.pipeline import PipelineRecipe
    from yunshan.pipeline.stages import unprepared
    from yunshan.arguments.recipe import load_recipe

    os.environ.setdefault("YUNSHAN_REALDATA", str(REALDATA))
    recipe = unprepared(load_recipe(PipelineRecipe, str(RECIPE)))  # the raw laws corpus
    return dataclasses.replace(recipe, model=dataclasses.replace(recipe.model, name_or_path=str(model_dir)))


def extended(recipe, model_dir: Path, new_tokens: int, out: Path) -> Path:
    from yunshan.tokenizer.extend import extend_tokenizer

    if not (out / "tokenizer.json").is_file():
        extend_tokenizer(dataclasses.replace(recipe.tokenizer_extension, base=str(model_dir), out=str(out),
                                             new_tokens=new_tokens, overwrite=True, report_texts=[]))
    return out


def measure(model, tokenizer, docs: dict, autocast: bool) -> dict:
    import torch

    from yunshan.training.monitoring import bits_per_character

    out = {}
    for name, texts in docs.items():
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
            r = bits_per_character(model, tokenizer, texts, 1024)
        out[name] = {"bpc": r["bpc"], "tokens_per_char": r["tokens_per_char"]}
    return out


def train(recipe, model_dir: Path, tok_dir: Path | None, steps: int, out: Path, distill: tuple[int, int] = (0, 8)
          ) -> dict:
    from yunshan.training.arguments import TokenizerArgs
    from yunshan.training.cpt import run_cpt

    c = recipe.cpt
    cpt = dataclasses.replace(
        c, model=recipe.model, tokenizer=TokenizerArgs(path=str(tok_dir or model_dir), base_path=str(model_dir)),
        training=dataclasses.replace(c.training, max_steps=steps, output_dir=str(out), resume="never",
                                     save_steps=10 ** 6),
        # the recipe's share of the budget for the warm-up (10 of 40 steps), at every budget
        warmup=dataclasses.replace(c.warmup, enabled="true" if tok_dir else "false",
                                   steps=max(1, round(steps * c.warmup.steps / c.training.max_steps)),
                                   distill_steps=distill[0], distill_layers=distill[1]))
    started = time.perf_counter()
    summary = run_cpt(cpt)
    report = json.loads((out / "data_report.json").read_text())
    return {"seconds": time.perf_counter() - started, "steps": summary["steps"],
            "tokens_trained": report["tokens_trained"],
            "warmup": {k: v for k, v in (report.get("embedding_warmup") or {}).items() if k not in ("checks", "fit")}}


def adopted(folder: Path, new_tokens: int) -> dict:
    """The record of a CPT run trained elsewhere (the pipeline's cpt stage): its data report, and its time from the
    pipeline's run.json when there is one."""
    report = json.loads((folder / "data_report.json").read_text())
    added = (report.get("new_tokens") or 0)
    if added != new_tokens:
        raise SystemExit(f"{folder}: trained with {added} new tokens, this run needs {new_tokens}")
    seconds = None
    manifest = folder.parent / "run.json"
    if manifest.is_file():
        stage = next((s for s in json.loads(manifest.read_text())["stages"] if s["name"] == "cpt"), {})
        seconds = stage.get("seconds")
    return {"seconds": seconds or 0.0, "steps": report["steps"], "tokens_trained": report["tokens_trained"],
            "from": str(folder),
            "warmup": {k: v for k, v in (report.get("embedding_warmup") or {}).items() if k not in ("checks", "fit")}}


def break_even(results: dict) -> list[dict]:
    """Per extended variant: its Civil Code bits/char minus the no-extension run's at each budget both were trained
    at, and a least-squares line gap = a + b * log2(training tokens) through those points, with the standard errors
    of a and b from the residuals (none with two points) and the budget where the line crosses zero (where the
    extension starts to pay, if b < 0)."""
    none = {r["steps_planned"]: r["final"]["civil_code"]["bpc"] for r in results["runs"].values()
            if r["variant"] == "none"}
    out = []
    variants = sorted({r["variant"] for r in results["runs"].values() if r["variant"] != "none"}, key=variant_order)
    for variant in variants:
        points = sorted((r["steps_planned"] * results["tokens_per_step"], r["final"]["civil_code"]["bpc"]
                         - none[r["steps_planned"]]) for r in results["runs"].values()
                        if r["variant"] == variant and r["steps_planned"] in none)
        fit = {"variant": variant, "points": points}
        if len(points) >= 2:
            xs = [math.log2(t) for t, _ in points]
            ys = [g for _, g in points]
            n, mx, my = len(xs), sum(xs) / len(xs), sum(ys) / len(ys)
            sxx = sum((x - mx) ** 2 for x in xs)
            slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sxx
            intercept = my - slope * mx
            fit.update(slope_per_doubling=slope, intercept=intercept)
            if n > 2:
                sigma2 = sum((y - intercept - slope * x) ** 2 for x, y in zip(xs, ys)) / (n - 2)
                fit.update(slope_se=math.sqrt(sigma2 / sxx), residual_sd=math.sqrt(sigma2))
            if slope < 0:
                fit["break_even_tokens"] = 2 ** (-intercept / slope)
        out.append(fit)
    return out


def render(results: dict) -> str:
    base = results["base"]
    general = [g for g in GENERAL if g in base]
    lines = [f"Model: {results['model']} ({results['precision']}); held-out: the first {results['heldout_chars']:,} "
             "characters of the Civil Code and of the real Chinese and English general held-out texts (each one "
             f"continuous document); {results['tokens_per_step']:,} tokens per step.", "",
             "| budget | variant | new tokens | Civil Code bits/char | Civil Code tokens/char | "
             + " | ".join(f"{g} bits/char" for g in general) + " | warm-up steps | run time |",
             "|---|---|---:|---:|---:|" + "---:|" * len(general) + "---:|---:|",
             f"| - | base model | 0 | {base['civil_code']['bpc']:.3f} | {base['civil_code']['tokens_per_char']:.3f} | "
             + " | ".join(f"{base[g]['bpc']:.3f}" for g in general) + " | - | - |"]

    def change(value: float, ref: float) -> str:
        return f"{value:.3f} ({100 * (value / ref - 1):+.1f}%)"

    for key, run in sorted(results["runs"].items(), key=lambda kv: (kv[1]["steps_planned"], variant_order(kv[1]["variant"]))):
        f = run["final"]
        warm = run["warmup"].get("steps", "-") if run["warmup"] else "-"
        lines.append(f"| {run['steps_planned']} steps ({run['steps_planned'] * results['tokens_per_step']:,} tokens) | "
                     f"{run['variant']} | {run['new_tokens']:,} | {change(f['civil_code']['bpc'], base['civil_code']['bpc'])} | "
                     f"{change(f['civil_code']['tokens_per_char'], base['civil_code']['tokens_per_char'])} | "
                     + " | ".join(change(f[g]["bpc"], base[g]["bpc"]) for g in general)
                     + f" | {warm} | {run['seconds'] / 60:.1f} min |")
    fits = [f for f in break_even(results) if "slope_per_doubling" in f]
    if fits:
        lines += ["", "Civil Code bits/char of each extension minus no extension at the same budget, fitted as "
                  "a + b * log2(training tokens) (least squares; b is the change per doubling of the budget):", "",
                  "| variant | points (training tokens: gap) | b per doubling | a | break-even budget |",
                  "|---|---|---:|---:|---:|"]
        for f in fits:
            points = "; ".join(f"{t:,}: {g:+.3f}" for t, g in f["points"])
            slope = f"{f['slope_per_doubling']:+.4f}" + (f" ± {f['slope_se']:.4f}" if "slope_se" in f else "")
            even = f"{f['break_even_tokens']:,.0f} tokens" if "break_even_tokens" in f else "never (b >= 0)"
            lines.append(f"| {f['variant']} | {points} | {slope} | {f['intercept']:+.3f} | {even} |")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=str(ROOT / "models/smollm2-135m"), help="HF folder (make real-model)")
    parser.add_argument("--budgets", default="20,40", help="CPT steps (training.max_steps) of each budget")
    parser.add_argument("--variants", default=",".join(VARIANTS),
                        help=f"runs to do now ({', '.join(VARIANTS)}, or nK: K new tokens)")
    parser.add_argument("--heldout-chars", type=int, default=20000)
    parser.add_argument("--distill-steps", type=int, default=0, help=(
        "warmup.distill_steps of the extended runs (token distillation of the new input rows before the output-row "
        "fit); their keys and table rows say `+ distillation N`"))
    parser.add_argument("--distill-layers", type=int, default=8, help="warmup.distill_layers of those runs")
    parser.add_argument("--quick", action="store_true", help="tiny budget: checks the script, not the claim")
    parser.add_argument("--out", default=None, help=f"results folder (default {RESULTS.relative_to(ROOT)}/full, "
                        "or .../quick with --quick): another model's runs beside the recorded ones")
    parser.add_argument("--trained", action="append", default=[], metavar="STEPS_VARIANT=FOLDER", help=(
        "take an identical run already trained instead of training it again, e.g. "
        "40_capped=runs/smollm2-135m-laws/04_cpt (the laws recipe's own CPT stage: same budget, tokenizer and "
        "settings); it is measured as the others are"))
    args = parser.parse_args()
    model_dir = Path(args.model)
    if not (model_dir / "config.json").is_file():
        print(f"{model_dir}: no model; run `make real-model` first", file=sys.stderr)
        return 1
    if not (REALDATA / "laws/laws.jsonl.zst").is_file():
        print(f"{REALDATA}: the real releases are not beside this checkout (set YUNSHAN_REALDATA)", file=sys.stderr)
        return 1
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from yunshan.tokenizer.extend import capped_new_tokens
    from yunshan.training.models import fast_bf16
    from yunshan.training.monitoring import read_heldout

    budgets = [int(b) for b in args.budgets.split(",")]
    trained = dict((k, Path(v)) for k, v in (t.split("=", 1) for t in args.trained))
    variants = [check_variant(v) for v in args.variants.split(",") if v]
    if args.quick:
        budgets, args.heldout_chars = [4], 2000
    torch.set_num_threads(max(1, os.cpu_count() or 1))
    autocast, why = fast_bf16()
    recipe = load_pipeline(model_dir)
    c = recipe.cpt
    tokens_per_step = c.training.per_device_batch_size * c.training.gradient_accumulation_steps * c.data.seq_len
    out = Path(args.out) if args.out else RESULTS / ("quick" if args.quick else "full")
    out.mkdir(parents=True, exist_ok=True)
    partial = out / "partial.json"
    results = json.loads(partial.read_text()) if partial.is_file() else {}
    results.update({"model": model_dir.name, "heldout_chars": args.heldout_chars, "tokens_per_step": tokens_per_step,
                    "precision": f"{'bfloat16 autocast' if autocast else 'float32'} ({why})",
                    "recipe": str(RECIPE.relative_to(ROOT)), "requested_new_tokens": recipe.tokenizer_extension.new_tokens})
    results.setdefault("runs", {})
    docs = {"civil_code": read_heldout([str(REALDATA / "laws/civil_code.txt")], args.heldout_chars)}
    docs.update({name: read_heldout([str(REALDATA / f"general/{lang}_heldout.txt")], args.heldout_chars)
                 for name, lang in GENERAL.items()})
    if "base" not in results:
        model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32).eval()
        results["base"] = measure(model, AutoTokenizer.from_pretrained(model_dir), docs, autocast)
        del model
        partial.write_text(json.dumps(results, indent=2))
    for steps in budgets:
        budget = steps * tokens_per_step
        for variant in variants:
            distilled = args.distill_steps if variant != "none" else 0
            key = f"{steps}_{variant}" + (f"_d{distilled}" if distilled else "")
            if key in results["runs"]:
                print(key, "done in an earlier invocation", flush=True)
                continue
            if variant == "none":
                new_tokens, tok = 0, None
            elif size_of(variant) is not None:
                new_tokens = size_of(variant)
                tok = None if key in trained else extended(recipe, model_dir, new_tokens, out / f"tokenizer_{new_tokens}")
            else:
                ext = dataclasses.replace(recipe.tokenizer_extension,
                                          budget_tokens=budget if variant == "capped" else None)
                new_tokens = capped_new_tokens(ext)[0]
                if new_tokens == 0:
                    print(key, "is the none run (the cap allows no new token at this budget)", flush=True)
                    continue
                if variant == "uncapped" and new_tokens == capped_new_tokens(dataclasses.replace(
                        ext, budget_tokens=budget))[0]:
                    print(key, "is the capped run (the cap does not bind at this budget)", flush=True)
                    continue
                tok = None if key in trained else extended(recipe, model_dir, new_tokens, out / f"tokenizer_{new_tokens}")
            folder = out / "runs" / key
            if key in trained:
                folder = trained[key]
                run = adopted(folder, new_tokens)
            else:
                run = train(recipe, model_dir, tok, steps, folder, (distilled, args.distill_layers))
            model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).eval()
            run["final"] = measure(model, AutoTokenizer.from_pretrained(folder), docs, autocast)
            del model
            if key in trained:
                run.update(variant=variant, steps_planned=steps, new_tokens=new_tokens)
                results["runs"][key] = run
                partial.write_text(json.dumps(results, indent=2))
                continue
            for heavy in ("checkpoints", "adapter"):  # the figures are kept; the weights (0.5 GB a run) are not
                shutil.rmtree(out / "runs" / key / heavy, ignore_errors=True)
            for weights in (out / "runs" / key).glob("*.safetensors"):
                weights.unlink()
            run.update(variant=variant + (f" + distillation {distilled}" if distilled else ""), steps_planned=steps,
                       new_tokens=new_tokens)
            results["runs"][key] = run
            partial.write_text(json.dumps(results, indent=2))
            print(key, {k: round(v["bpc"], 4) for k, v in run["final"].items()}, f"{run['seconds']:.0f}s", flush=True)
    table = render(results)
    (out / "results.json").write_text(json.dumps(results, indent=2))
    (out / "table.md").write_text(table + "\n")
    print(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
