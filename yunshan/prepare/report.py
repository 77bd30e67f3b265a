"""The report of a preparation: every drop by step and reason with examples, every change, the characters kept at
each step (prepare_report.json, prepare_report.md, funnel.png) and the near-duplicate clusters
(near_duplicates.jsonl).

    yunshan data prepare --config recipes/prepare/laws.yaml      # prints the table; OUT/prepare_report.md has it too

The figures are datatrove's own stats, summed over the tasks' files (OUT/logs/<stage>/stats/RANK.json, written by
each task as it completes, so a resumed run still counts every task once): a filter's `dropped_<reason>` and the
`doc_len` of what it forwarded, a reader's `bad_<reason>`, a formatter's changes (`lines_<kind>`, `masked_<kind>`)
and `chars_out`. The funnel follows the characters from the raw input to the written corpus.
"""

from __future__ import annotations

import json
import re
from pathlib import Path


REPORT = "prepare_report.json"
SECONDS_NOTE = ("Seconds: datatrove's time of each step, summed over the tasks; a step that pulls documents through the "
                "steps before it in its stage (the dedup signatures and filters, the writer) counts their time too.")
# What a step's stats say it dropped (prefix -> kind) and changed.
DROP_PREFIXES = ("dropped_", "bad_")
CHANGE_PREFIXES = ("lines_", "masked_", "documents_changed", "documents_masked", "chars_changed")
# Steps whose only drops carry no reason: the reason they stand for.
UNNAMED_DROPS = {"exact-deduplication stage 3": "exact_duplicate", "MinHash stage 4": "near_duplicate",
                 "Trafilatura": "no_text_extracted"}


# datatrove's step names for what they do here
LABELS = {"exact-deduplication stage 1": "exact dedup: signatures", "exact-deduplication stage 2": "exact dedup: find",
          "exact-deduplication stage 3": "exact duplicates", "MinHash stage 1 (units)": "MinHash: signatures",
          "MinHash stage 1": "MinHash: signatures", "MinHash stage 2": "MinHash: buckets",
          "MinHash stage 3": "MinHash: clusters", "MinHash stage 4": "near duplicates"}


def _label(name: str) -> str:
    """'🔻 - FILTER: 🌐 language (py3langid)' -> 'language (py3langid)'; datatrove's dedup stages by what they do."""
    name = re.sub(r"^[^\w(]+", "", name.split(": ", 1)[-1]).strip()
    return LABELS.get(name, name)


def _total(value) -> float:
    return value.get("total", 0) if isinstance(value, dict) else value


def merged_stats(stage_logs: Path) -> list[dict]:
    """[{"name", "stats": {key: total}, "n": {key: count}, "seconds"}] of a stage's steps, summed over its tasks."""
    steps: list[dict] = []
    for path in sorted((stage_logs / "stats").glob("*.json")):
        for i, step in enumerate(json.loads(path.read_text())):
            if i == len(steps):
                steps.append({"name": step["name"], "stats": {}, "n": {}, "seconds": 0.0})
            merged = steps[i]
            merged["seconds"] += _total(step.get("time_stats") or 0)
            for key, value in step["stats"].items():
                merged["stats"][key] = merged["stats"].get(key, 0) + _total(value)
                if isinstance(value, dict):
                    # datatrove writes a stat seen once without its count
                    merged["n"][key] = merged["n"].get(key, 0) + value.get("n", 1)
    return steps


def _chars_after(step: dict) -> tuple[int, int] | None:
    """(documents, characters) a step passed on, when its stats say."""
    for key in ("chars_out", "doc_len", "chars_in"):
        if key in step["stats"]:
            return int(step["n"].get(key, 0)), int(step["stats"][key])
    return None


def step_rows(out: Path, stages: list[tuple[str, int]]) -> list[dict]:
    rows = []
    for stage, _ in stages:
        for step in merged_stats(out / "logs" / stage):
            label = _label(step["name"])
            stats = step["stats"]
            last = stage == stages[-1][0]
            if label.startswith("task file") or (label.startswith("Jsonl") and not last):
                continue  # re-reading and writing the stage files: no decision of their own
            if label.startswith("Jsonl"):
                label = "written"
            dropped = {k.split("_", 1)[1] if k.startswith("dropped_") else k: int(v) for k, v in stats.items()
                       if k.startswith(DROP_PREFIXES)}
            for marker, reason in UNNAMED_DROPS.items():
                if marker in step["name"] and stats.get("dropped"):
                    dropped.setdefault(reason, int(stats["dropped"]))
            for key in ("timeout", "clean_error", "broken_process"):
                if stats.get(key):
                    dropped[f"extraction_{key}"] = int(stats[key])
            changed = {k: int(v) for k, v in stats.items() if k.startswith(CHANGE_PREFIXES)}
            after = _chars_after(step)
            rows.append({"stage": stage, "step": label, "documents_in": int(stats.get("total", 0)) or None,
                         "documents_out": after[0] if after else None, "chars_out": after[1] if after else None,
                         "dropped": dropped, "changed": changed, "seconds": round(step["seconds"], 2)})
    return rows


def _funnel(rows: list[dict]) -> list[tuple[str, int]]:
    """(step, characters after it) from the raw input to the written corpus."""
    raw = sum(r["chars_out"] for r in rows if r["stage"] == "clean" and r["step"].startswith(("yunshan records",
                                                                                               "Warc")))
    points = [("raw input", raw)]
    readers_done = False
    for r in rows:
        if r["step"].startswith(("yunshan records", "Warc")):
            continue
        readers_done = True
        if r["chars_out"] is not None and readers_done:
            points.append((r["step"], r["chars_out"]))
    return points


def write_funnel_png(points: list[tuple[str, int]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 0.45 * len(points) + 1.2))
    labels = [p[0] for p in points][::-1]
    values = [p[1] for p in points][::-1]
    ax.barh(range(len(points)), values, color="#4c72b0")
    ax.set_yticks(range(len(points)), labels)
    top = max(values) if values and max(values) else 1
    for i, v in enumerate(values):
        ax.text(v + top * 0.01, i, f"{v:,} ({v / top:.1%})", va="center", fontsize=8)
    ax.set_xlim(0, top * 1.35)
    ax.set_xlabel("characters after the step")
    ax.set_title("corpus preparation: raw characters to kept characters")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def render_table(rows: list[dict]) -> str:
    lines = ["| stage | step | documents in | documents out | characters out | dropped | changed | seconds |",
             "|---|---|---:|---:|---:|---|---|---:|"]
    for r in rows:
        drops = ", ".join(f"{k} {v:,}" for k, v in sorted(r["dropped"].items())) or "-"
        changes = ", ".join(f"{k} {v:,}" for k, v in sorted(r["changed"].items())) or "-"
        fmt = (lambda v: "-" if v is None else f"{v:,}")
        lines.append(f"| {r['stage']} | {r['step']} | {fmt(r['documents_in'])} | {fmt(r['documents_out'])} | "
                     f"{fmt(r['chars_out'])} | {drops} | {changes} | {r['seconds']} |")
    return "\n".join(lines)


def write_report(args, out: Path, stages: list[tuple[str, int]], seconds: float, resumed: bool,
                 files: dict[str, list[str]], used: int) -> dict:
    """Write prepare_report.json/.md, funnel.png and near_duplicates.jsonl into `out`; return the summary. `used`:
    the cores the tasks ran on."""
    from .dedup import load_clusters
    from .examples import load_examples

    rows = step_rows(out, stages)
    points = _funnel(rows)
    clusters = load_clusters(out / "work" / "clusters")
    with open(out / "near_duplicates.jsonl", "w", encoding="utf-8") as f:
        for c in clusters:
            kept = [m["id"] for m in c["members"] if m["kept"]]
            f.write(json.dumps({"cluster": c["cluster"], "size": c["size"], "kept": kept,
                                "removed": [m["id"] for m in c["members"] if not m["kept"]],
                                "chars": [m["chars"] for m in c["members"]], "start": c["members"][0]["start"]},
                               ensure_ascii=False) + "\n")
    documents = sorted(str(p.relative_to(out)) for p in (out / "documents").glob("*.jsonl.zst"))
    written = rows[-1] if rows else {}
    raw = points[0][1] if points else 0
    kept_chars = points[-1][1] if len(points) > 1 else raw
    summary = {
        "inputs": {name: paths for name, paths in files.items()},
        "output": "documents/", "files": documents,
        "documents_read": sum((r["documents_out"] or 0) for r in rows if r["stage"] == "clean"
                              and r["step"].startswith(("yunshan records", "Warc"))),
        "documents_written": written.get("documents_out"),
        "chars_read": raw, "chars_written": kept_chars,
        "chars_kept_share": round(kept_chars / raw, 4) if raw else None,
        "dropped": _dropped_totals(rows),
        "near_duplicates": {"clusters": len(clusters), "documents_in_clusters": sum(c["size"] for c in clusters),
                            "removed": sum(c["size"] - 1 for c in clusters),
                            "largest": [{"size": c["size"], "start": c["members"][0]["start"]} for c in clusters[:10]],
                            "threshold": round(args.near_dedup.threshold(), 3) if args.near_dedup.enabled else None},
        "seconds": round(seconds, 1), "resumed": resumed, "executor": args.executor, "cores": used,
        "chars_per_second_per_core": round(raw / seconds / used) if seconds and raw and not resumed else None,
        "steps": rows, "funnel": [{"step": s, "chars": c} for s, c in points],
        "examples": load_examples(out / "work" / "examples"),
    }
    (out / REPORT).write_text(json.dumps(summary, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    write_funnel_png(points, out / "funnel.png")
    (out / "prepare_report.md").write_text(render_markdown(summary), encoding="utf-8")
    return summary


def _dropped_totals(rows: list[dict]) -> dict[str, int]:
    totals: dict[str, int] = {}
    for r in rows:
        for reason, n in r["dropped"].items():
            totals[f"{r['step']}: {reason}"] = totals.get(f"{r['step']}: {reason}", 0) + n
    return totals


def render_markdown(summary: dict) -> str:
    s = summary
    lines = [f"# Corpus preparation", "",
             f"{s['documents_read']:,} documents read, {s['documents_written'] or 0:,} written "
             f"(`{s['output']}`, {len(s['files'])} files); characters {s['chars_read']:,} -> {s['chars_written']:,} "
             f"({(s['chars_kept_share'] or 0):.1%} kept); {s['seconds']} s on {s['cores']} cores ({s['executor']})"
             + (f", {s['chars_per_second_per_core']:,} characters/s per core" if s["chars_per_second_per_core"]
                else "") + ".", "", render_table(s["steps"]), "", SECONDS_NOTE, "", "![funnel](funnel.png)", ""]
    nd = s["near_duplicates"]
    if nd["clusters"]:
        lines += [f"Near duplicates: {nd['clusters']:,} clusters holding {nd['documents_in_clusters']:,} documents, "
                  f"{nd['removed']:,} removed (LSH threshold about {nd['threshold']}); the largest:", ""]
        lines += [f"- {c['size']} documents: {' '.join(c['start'].split())[:60]}" for c in nd["largest"]]
        lines.append("")
    if s["examples"]:
        lines += ["## Examples", ""]
        for step, reasons in s["examples"].items():
            for reason, items in reasons.items():
                first = items[0]
                text = " ".join(first["text"].split())[:160]
                lines.append(f"- {step} / {reason} ({first['id']}): {text}")
        lines.append("")
    return "\n".join(lines)


def render_summary(summary: dict, out: Path) -> str:
    """What `yunshan data prepare` prints."""
    if "submitted" in summary:
        jobs = ", ".join(f"{k} {v}" for k, v in summary["submitted"].items())
        return (f"prepare: submitted to Slurm ({jobs}); scripts in {out / 'logs'}/*/launch_script.slurm. Run the "
                "same command again once they finish to write the report (finished tasks are skipped).")
    return render_markdown(summary) + f"\nreport: {out / REPORT}, {out / 'prepare_report.md'}, {out / 'funnel.png'}"
