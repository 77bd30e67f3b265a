"""What `yunshan run` shows at the end: the before/after table (printed, in report.md and report.html) with the
stages, the data and the plots.

    yunshan run recipes/demo_tiny.yaml      # prints the table; writes runs/demo_tiny/report.md and report.html

Rows of the before/after table come from the evaluation stages' results (bits per character per held-out text,
accuracy per multiple-choice benchmark, the loss on each held-out instruction set's assistant turns), one column per
evaluated model (base, after cpt, after sft, after preference) and the change from the base to the last, then
the tokenizer stage's compression (tokens per character before and after the extension). report.md then gives the
stages and their times, the decontamination, the vocabulary extension's cost, the continual-pretraining mixture,
the forgetting curve and the loss curves, and every evaluation table; report.html is the same report as one
self-contained page (yunshan.io.html_page).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from yunshan.io.artifacts import DecontaminationReport, EvalResults, RunManifest, TokenizerReport
from yunshan.eval.bpc import is_general

from .stages import RunLayout


def _load(path: Path) -> EvalResults | None:
    return EvalResults.read(path) if path.is_file() else None


def before_after(layout: RunLayout) -> tuple[list[str], list[list[str]]]:
    """(column names, rows) of the before/after table."""
    before = _load(layout.folder("eval_before") / "results.json")
    after = _load(layout.folder("eval_after") / "results.json")
    columns, rows = [], []
    if before and after:
        models = [("before", before, next(iter(before.models)))]
        models += [(f"after {name.split('_', 1)[-1]}", after, name) for name in after.models]
        columns = [label for label, _, _ in models]
        mode = after.settings.get("mode", "loglik")
        for task, res in after.tasks.items():
            if task not in before.tasks:
                continue
            values = [doc.tasks[task].results[name] for _, doc, name in models]
            if res.format == "bpc":
                for label in values[-1]["files"]:
                    if all(label in v["files"] for v in values):
                        kind = "general (forgetting)" if is_general(label) else "domain (gain)"
                        nums = [v["files"][label]["bpc"] for v in values]
                        rows.append([f"bits/char, {label}: {kind}"] + [f"{x:.4f}" for x in nums]
                                    + [f"{100 * (nums[-1] / nums[0] - 1):+.1f}%"])
            elif res.format == "chat_loss":
                # Held-out instruction sets: the SFT loss on their assistant turns (bits per response character
                # compare across a vocabulary extension; nats per response token is the loss SFT reports).
                for name in values[-1]["sets"]:
                    if not all(name in v["sets"] and v["sets"][name]["tokens"] for v in values):
                        continue
                    for key, unit in (("bits_per_char", "bits/response char"),
                                      ("nats_per_token", "nats/response token")):
                        nums = [v["sets"][name][key] for v in values]
                        rows.append([f"{unit}, held-out instructions {name}"] + [f"{x:.4f}" for x in nums]
                                    + [f"{100 * (nums[-1] / nums[0] - 1):+.1f}%"])
            elif res.format == "lmeval" and all(v.get("overall") is not None for v in values):
                # lm-eval's headline metric in lm-eval's own units (accuracy as a fraction).
                nums = [v["overall"] for v in values]
                rows.append([f"{task} {values[-1]['metric']} (lm-eval)"] + [f"{x:.4f}" for x in nums]
                            + [f"{nums[-1] - nums[0]:+.4f}"])
            elif res.format == "generic" and values[-1]["kind"] != "mc":
                nums = [v["overall"] for v in values]
                metric = {"exact_match": "exact match", "rouge_l": "ROUGE-L"}[values[-1]["metric"]]
                rows.append([f"{task} {metric} %"] + [f"{x:.1f}" for x in nums] + [f"{nums[-1] - nums[0]:+.1f} pt"])
            elif all("overall" in v for v in values):
                nums = [v["overall"] for v in values]
                scoring = {"loglik": "answer-only", "cloze": "cloze", "generate": "generated"}.get(mode, mode)
                # Your own sets may have 2-10 options a question: their mean chance level is recorded.
                chance = values[-1].get("chance", 25.0)
                rows.append([f"{task} accuracy % ({scoring}; chance {chance:.3g})"] + [f"{x:.1f}" for x in nums]
                            + [f"{nums[-1] - nums[0]:+.1f} pt"])
    tok_report = layout.folder("tokenizer") / TokenizerReport.FILE
    if tok_report.is_file():
        comp = TokenizerReport.read(tok_report).compression
        width = max(len(columns), 2)
        for path, b, a in comp.tokens_per_char() if comp else []:
            cells = [f"{b:.3f}"] + [""] * (width - 2) + [f"{a:.3f}"]
            rows.append([f"tokens/char, {Path(path).name}"] + cells + [f"{100 * (a / b - 1):+.1f}%"])
        columns = columns or ["before", "after"]
    return columns, rows


def write_report(layout: RunLayout, manifest: RunManifest) -> Path:
    """report.md and report.html in the run folder: the table, the stages, the decontamination, the continual-
    pretraining mixture, the plots and the evaluation tables."""
    columns, rows = before_after(layout)
    out = layout.out
    lines = [f"# yunshan run: {layout.recipe.name}", "",
             f"Base model: `{manifest.base_model}`" + (" (stand-in trained here from the bundled general sample)"
                                                       if layout.recipe.base is not None else ""),
             f"Final model: `{manifest.final_model}`", "", "## Before and after", ""]
    if rows:
        lines += ["| metric | " + " | ".join(columns) + " | change |", "|---|" + "---:|" * (len(columns) + 1)]
        lines += ["| " + " | ".join(r) + " |" for r in rows]
    else:
        lines.append("(no evaluation stages ran)")
    lines += ["", "## Stages", "", "| stage | status | seconds | output |", "|---|---|---:|---|"]
    for s in manifest.stages:
        lines.append(f"| {s.name} | {s.status} | {'' if s.seconds is None else s.seconds} | `{s.output}` |")
    lines += _prepare_lines(layout)
    lines += _decontamination_lines(layout)
    cpt = manifest.stage("cpt").summary if manifest.stage("cpt") else None
    if cpt and cpt.get("extension_cost"):
        lines += ["", *_extension_cost_lines(cpt)]
    precisions = [(s.name, s.summary.get("precision")) for s in manifest.stages
                  if s.name in ("cpt", "sft", "preference")]
    if any(p for _, p in precisions):
        lines += ["", "Training precision: " + "; ".join(f"{stage} {p['value']} ({p['reason']})"
                                                        for stage, p in precisions if p)]
    if cpt:
        lines += ["", "## Continual-pretraining mixture (tokens trained)", "", "| source | tokens | share |",
                  "|---|---:|---:|"]
        total = sum(cpt["tokens_by_source"].values()) or 1
        lines += [f"| {n} | {t:,} | {100 * t / total:.2f}% |" for n, t in cpt["tokens_by_source"].items()]
    preference = manifest.stage("preference").summary if manifest.stage("preference") else None
    if preference and preference.get("heldout"):
        lines += ["", *_preference_lines(preference)]
    forgetting = _forgetting_plot(layout, out / "forgetting.png")
    plots = [(forgetting, "forgetting curve: held-out bits/char of general (forgetting) and domain (gain) text"),
             (layout.folder("cpt") / "curves.png",
              "continual pretraining: loss, held-out bits/char and realised token shares"),
             (layout.folder("sft") / "curves.png", "SFT: loss, overall and per source"),
             (layout.folder("preference") / "curves.png",
              "preference tuning: loss, held-out preference accuracy and reward margin, held-out bits/char"),
             (layout.folder("base") / "curves.png", "stand-in base pretraining")]
    lines += ["", "## Plots", ""]
    for path, caption in plots:
        if path is not None and path.is_file():
            lines += [f"![{caption}]({path.relative_to(out)})", ""]
    lines += _evaluation_tables(layout)
    path = out / "report.md"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    from yunshan.io.html_page import write_page

    write_page(path, out / "report.html", f"yunshan run: {layout.recipe.name}")
    return path


# The held-out preference metrics of yunshan.training.preference_monitor, in the order the report shows them.
PREFERENCE_ROWS = (
    ("heldout/likelihood_accuracy", "chosen answer more likely per token (share of pairs)", "{:.3f}"),
    ("heldout/reward_accuracy", "reward accuracy (share of pairs)", "{:.3f}"),
    ("heldout/reward_margin", "reward margin, chosen - rejected", "{:+.4f}"),
    ("heldout/logps_chosen", "log-probability of the chosen answer (mean)", "{:.2f}"),
    ("heldout/logps_rejected", "log-probability of the rejected answer (mean)", "{:.2f}"),
)


def _preference_lines(summary: dict) -> list[str]:
    """The preference stage: its method, and the held-out pairs' metrics before the first step and after the last,
    beside the held-out bits/char of its forgetting monitor."""
    method = summary.get("method") or {}
    before, after = summary["heldout"]["before"], summary["heldout"]["after"]
    lines = [f"## Preference tuning ({method.get('name', '?')}, loss {method.get('loss_type', '?')}, beta "
             f"{method.get('beta', '?')}, reference {method.get('reference', '?')}; "
             f"{summary.get('heldout_pairs', '?')} held-out pairs)", "",
             f"| held-out metric | step {before['step']} | step {after['step']} | change |", "|---|---:|---:|---:|"]
    for key, label, fmt in PREFERENCE_ROWS:
        if key in before and key in after:
            lines.append(f"| {label} | {fmt.format(before[key])} | {fmt.format(after[key])} | "
                         f"{after[key] - before[key]:+.4f} |")
    bpc = summary.get("bpc") or []
    if len(bpc) > 1:
        for key in sorted(k for k in bpc[0] if k.startswith("bpc_")):
            first, last = bpc[0][key], bpc[-1][key]
            lines.append(f"| bits/char, {key[4:]} held-out text | {first:.4f} | {last:.4f} | "
                         f"{100 * (last / first - 1):+.2f}% |")
    return lines


def _prepare_lines(layout: RunLayout) -> list[str]:
    """The prepare stage's table: documents and characters at each step, every drop by reason, and its funnel."""
    import json

    from yunshan.prepare.report import REPORT, render_table

    folder = layout.folder("prepare")
    if not layout.enabled("prepare") or not (folder / REPORT).is_file():
        return []
    s = json.loads((folder / REPORT).read_text(encoding="utf-8"))
    nd = s["near_duplicates"]
    lines = ["", f"## Corpus preparation (`{folder.name}/prepare_report.md`)", "",
             f"{s['documents_read']:,} documents read, {s['documents_written'] or 0:,} kept; characters "
             f"{s['chars_read']:,} -> {s['chars_written']:,} ({(s['chars_kept_share'] or 0):.1%}); "
             f"{nd['clusters']:,} near-duplicate clusters ({nd['removed']:,} documents removed); the corpus the "
             f"later stages read: `{folder.name}/documents/`.", "", render_table(s["steps"])]
    if (folder / "funnel.png").is_file():
        lines += ["", f"![characters from raw to kept]({folder.name}/funnel.png)"]
    return lines


def _decontamination_lines(layout: RunLayout) -> list[str]:
    """The decontamination stage's counts: per training source, and whether training left the records out."""
    path = layout.folder("decontamination") / DecontaminationReport.FILE
    if not layout.enabled("decontamination") or not path.is_file():
        return []
    report = DecontaminationReport.read(path)
    lines = ["", f"## Decontamination ({report.n} words or {report.cjk_n} CJK characters a window; "
                 f"`{path.parent.name}/items.jsonl` lists every item found, `hits.jsonl` every overlap)", "",
             "Evaluation items by the share of each found in the training data (the Llama 2 report's measure: clean "
             f"below {report.clean_below:.0%}, dirty from {report.dirty_from:.0%}), boilerplate left out "
             f"({report.boilerplate.windows_train + report.boilerplate.windows_eval:,} windows):", "",
             "| evaluation set | items | clean | partial | dirty | not checkable |", "|---|---:|---:|---:|---:|---:|"]
    lines += [f"| {name} | {s.items:,} | {s.clean:,} | {s.partial:,} | {s.dirty:,} | {s.unchecked:,} |"
              for name, s in report.eval_sets.items()]
    lines += ["", f"{report.contaminated:,} of {report.records:,} training records hold at least "
                  f"{report.record_share:.0%} of an item ({report.overlapping:,} share a window that is not boilerplate, "
                  f"{report.hits:,} record-item pairs); "
                  + ("they are left out of training." if report.drop else "they are kept in training (drop: false)."),
              "", "| training source | records | overlapping | listed | hits |", "|---|---:|---:|---:|---:|"]
    lines += [f"| {name} | {s.records:,} | {s.overlapping:,} | {s.contaminated:,} | {s.hits:,} |"
              for name, s in report.sources.items()]
    return lines


def _evaluation_tables(layout: RunLayout) -> list[str]:
    """Every table of the evaluation stages (their results.md), under one heading per stage."""
    lines = []
    for stage, title in (("eval_before", "before (base model)"), ("eval_after", "after (trained models)")):
        path = layout.folder(stage) / "results.md"
        if layout.enabled(stage) and path.is_file():
            text = re.sub(r"\A# .*\n", "", path.read_text(encoding="utf-8")).strip()  # its title: the stage's here
            lines += ["", f"## Evaluation {title}", "", re.sub(r"^(#+) ", r"#\1 ", text, flags=re.MULTILINE)]
    return lines


def _forgetting_plot(layout: RunLayout, png: Path) -> Path | None:
    """Held-out bits per character: along continual pretraining (the monitor's measurements) and for every
    evaluated model (base, after cpt, after sft), general text (forgetting) beside domain text (gain)."""
    log = layout.folder("cpt") / "log.jsonl"
    monitor = [json.loads(line) for line in log.read_text().splitlines() if line.strip()] if log.is_file() else []
    monitor = [r for r in monitor if r.get("event") == "bpc"]
    models: list[tuple[str, dict]] = []
    for stage in ("eval_before", "eval_after"):
        results = _load(layout.folder(stage) / "results.json")
        task = next((t for t in (results.tasks.values() if results else []) if t.format == "bpc"), None)
        for name, result in (task.results.items() if task else []):
            label = "before" if stage == "eval_before" else f"after {name.split('_', 1)[-1]}"
            models.append((label, {k: v["bpc"] for k, v in result.get("files", {}).items()}))
    if not monitor and not models:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2 if monitor and models else 1, figsize=(11 if monitor and models else 6, 4),
                             squeeze=False)
    axes = list(axes[0])
    if monitor:
        ax = axes.pop(0)
        for key in sorted({k for r in monitor for k in r if k.startswith("bpc_")}):
            points = [(r["step"], r[key]) for r in monitor if key in r]
            ax.plot(*zip(*points), marker="o", label=key[4:] + (" (forgetting)" if key == "bpc_general" else ""))
        ax.set(title="during continual pretraining", xlabel="step", ylabel="held-out bits / char")
        ax.legend()
    if models:
        ax = axes.pop(0)
        labels = [label for label, _ in models]
        for text in dict.fromkeys(k for _, values in models for k in values):
            ax.plot(labels, [values.get(text, float("nan")) for _, values in models], marker="o",
                    label=text + (" (forgetting)" if is_general(text) else " (gain)"))
        ax.set(title="evaluated models", ylabel="held-out bits / char")
        ax.legend()
    fig.suptitle("forgetting and gain: held-out bits per character")
    fig.tight_layout()
    fig.savefig(png, dpi=100)
    plt.close(fig)
    return png


def _extension_cost_lines(cpt: dict) -> list[str]:
    """The step-0 cost of the vocabulary extension and what the warm-up and CPT recovered (held-out bits/char)."""
    cost = cpt["extension_cost"]
    warm = cpt.get("embedding_warmup") or {}
    final = (cpt.get("bpc") or [{}])[-1]
    columns = [("base model, own tokenizer", cost.get("base", {})), ("extended, new rows as initialised",
                                                                    cost.get("init", {}))]
    if cost.get("step0") and warm.get("fit"):
        columns.append(("after the output-row fit", cost["step0"]))
    columns.append((f"after cpt (step {final.get('step', '?')})", {k[4:]: v for k, v in final.items()
                                                                    if k.startswith("bpc_")}))
    lines = ["## Vocabulary extension: cost at step 0 and recovery (held-out bits/char of the cpt monitor)", "",
             f"{cost.get('new_tokens', '?'):,} new tokens; {cost.get('planned_tokens', 0):,} training tokens "
             "planned.", "", "| held-out | " + " | ".join(label for label, _ in columns) + " |",
             "|---|" + "---:|" * len(columns)]
    for name, base in cost.get("base", {}).items():
        cells = []
        for label, values in columns:
            value = values.get(name)
            cells.append("" if value is None else f"{value:.4f}" if values is cost["base"]
                         else f"{value:.4f} ({100 * (value / base - 1):+.1f}%)")
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    if warm:
        budget = (f" of the {warm['budget_steps']} steps of the run ({100 * warm['share_of_budget']:.0f}% of "
                  f"training.max_steps; at most {warm.get('max_steps')})" if warm.get("budget_steps") else "")
        lines += ["", f"Embedding warm-up: {warm.get('steps')} steps{budget} ({warm.get('ended')}), new rows only, "
                      f"learning rate {warm.get('learning_rate')}."]
    lines += [f"Warning: {w}" for w in cost.get("warnings", [])]
    return lines


def print_summary(layout: RunLayout, manifest: RunManifest, manifest_path: Path) -> None:
    """Where everything is, each stage's time, and the before/after table, on stdout."""
    out = layout.out
    print(f"\n== done: {out}", flush=True)
    for s in manifest.stages:
        seconds = "" if s.seconds is None else s.seconds
        print(f"   {s.name:<12} {s.status:<9} {str(seconds):>7} s  {out / s.output}")
    columns, rows = before_after(layout)
    if rows:
        width = max(len(r[0]) for r in rows)
        print(f"\n   {'metric':<{width}}  " + "  ".join(f"{c:>10}" for c in columns) + "  change")
        for r in rows:
            print(f"   {r[0]:<{width}}  " + "  ".join(f"{c:>10}" for c in r[1:-1]) + f"  {r[-1]}")
    print(f"\n   report: {out / 'report.md'} and {out / 'report.html'} (open it in a browser)   manifest: "
          f"{manifest_path}", flush=True)
