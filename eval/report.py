"""Side-by-side markdown tables (rows = models, columns = subjects or task groups, AVG last) and the JSON report.

    from yunshan.eval.report import task_table, write_report
    print(task_table("fineval", {"base": res_a, "yunshan": res_b}))

Tables are laid out like the paper's Tables 7-10 so a run can be read next to them.
"""

from __future__ import annotations

import math
from pathlib import Path


def _fmt(value: float, digits: int = 2) -> str:
    return "-" if value is None or (isinstance(value, float) and math.isnan(value)) else f"{value:.{digits}f}"


def _row(name: str, cells: list[str]) -> str:
    return "| " + " | ".join([name, *cells]) + " |"


def _figures_table(results: dict[str, dict], group: str, cols: list[str], figures: list[tuple[str, str]]) -> str:
    """A row per model, a column per (figure, label): result[group][label][figure] to 4 digits, figure by figure."""
    lines = [_row("Model", [f"{c} {title}" for _, title in figures for c in cols]),
             "|" + "---|" * (len(figures) * len(cols) + 1)]
    for name, r in results.items():
        lines.append(_row(name, [_fmt(r[group][c][key], 4) for key, _ in figures for c in cols]))
    return "\n".join(lines)


def task_table(task: str, results: dict[str, dict]) -> str:
    """One markdown table for one task over several models."""
    first = next(iter(results.values()))
    fmt = first["format"]
    if fmt == "ceval":
        cols = first["columns"]
        lines = [_row("Model", [*cols, "AVG"]), "|" + "---|" * (len(cols) + 2)]
        for name, r in results.items():
            lines.append(_row(name, [_fmt(r["groups"].get(c, {}).get("accuracy")) for c in cols] + [_fmt(r["overall"])]))
        return "\n".join(lines)
    if fmt == "cmmlu":
        cols = first["columns"]
        # FinanceIQ's own scoring (financeiq.py) guesses a random letter where no pattern reads one: say how often.
        guessed = all("random_fallbacks" in r for r in results.values())
        extra = ["AVG, random letters wrong", "random letters"] if guessed else []
        lines = [_row("Model", [first["subjects"][c]["name"] for c in cols] + ["AVG", *extra]),
                 "|" + "---|" * (len(cols) + 2 + len(extra))]
        for name, r in results.items():
            tail = [_fmt(r["overall_fallbacks_wrong"]), f"{r['random_fallbacks']} / {r['n']}"] if guessed else []
            lines.append(_row(name, [_fmt(r["subjects"].get(c, {}).get("accuracy")) for c in cols]
                              + [_fmt(r["overall"]), *tail]))
        return "\n".join(lines)
    if fmt == "lawbench":
        cols = first["columns"]
        lines = [_row("Model", [*cols, "AVG"]), "|" + "---|" * (len(cols) + 2)]
        for name, r in results.items():
            lines.append(_row(name, [_fmt(r["levels"][c]) for c in cols] + [_fmt(r["overall"])]))
        return "\n".join(lines)
    if fmt == "jecqa":
        cols = first["columns"]
        lines = [_row("Model", [*cols, "AVG"]), "|" + "---|" * (len(cols) + 2)]
        for name, r in results.items():
            lines.append(_row(name, [_fmt(r["sources"].get(c, {}).get("accuracy")) for c in cols]
                              + [_fmt(r["overall"])]))
        return "\n".join(lines)
    if fmt == "generic" and first["kind"] == "mc":
        # Your own multiple-choice set: a column per subject (none without subjects), the micro-average last.
        cols = first["columns"]
        lines = [_row("Model", [*cols, "AVG"]), "|" + "---|" * (len(cols) + 2)]
        for name, r in results.items():
            lines.append(_row(name, [_fmt(r["subjects"].get(c, {}).get("accuracy")) for c in cols]
                              + [_fmt(r["overall"])]))
        return "\n".join(lines)
    if fmt == "generic":
        # Short answer and free generation: each metric over the whole set.
        from .generic import METRIC_NAMES

        cols = first["columns"]
        lines = [_row("Model", [METRIC_NAMES[c] for c in cols]), "|" + "---|" * (len(cols) + 1)]
        for name, r in results.items():
            lines.append(_row(name, [_fmt(r["metrics"].get(c)) for c in cols]))
        return "\n".join(lines)
    if fmt == "lmeval":
        # lm-eval's own table: a row per model and (sub)task, a column per metric as lm-eval names it.
        cols = first["columns"]
        lines = [_row("Model", ["task", *cols]), "|" + "---|" * (len(cols) + 2)]
        for name, r in results.items():
            for task_name, values in r["rows"].items():
                lines.append(_row(name, [task_name] + [_fmt(values.get(c), 4) for c in cols]))
        return "\n".join(lines)
    if fmt == "compression":
        cols = first["columns"]
        lines = [_row("Tokenizer", ["vocab", *[f"{c} tok/char" for c in cols], "all tok/char", "all bytes/tok"]),
                 "|" + "---|" * (len(cols) + 4)]
        for name, r in results.items():
            lines.append(_row(name, [f"{r['vocab_size']:,}"] + [_fmt(r["files"][c]["tokens_per_char"], 3) for c in cols]
                              + [_fmt(r["all"]["tokens_per_char"], 3), _fmt(r["all"]["bytes_per_token"], 3)]))
        return "\n".join(lines)
    if fmt == "bpc":
        return _figures_table(results, "files", first["columns"], [("bpc", "BPC"), ("bits_per_byte", "bits/byte")])
    if fmt == "chat_loss":
        # Held-out instruction sets: the SFT loss on their assistant turns, per token and per character.
        return _figures_table(results, "sets", first["columns"],
                              [("nats_per_token", "nats/token"), ("bits_per_char", "bits/char")])
    if fmt == "diversity":
        n = max(len(r["effective_dimension"]) for r in results.values())
        lines = [_row("Model", [f"L{i + 1}" for i in range(n)] + ["hidden"]), "|" + "---|" * (n + 2)]
        for name, r in results.items():
            dims = r["effective_dimension"] + [None] * (n - len(r["effective_dimension"]))
            lines.append(_row(name, [str(d) if d is not None else "-" for d in dims] + [str(r["hidden_size"])]))
        return "\n".join(lines)
    raise ValueError(f"no table layout for result format {fmt!r}")


def write_report(out_dir: str | Path, results, markdown: str) -> tuple[Path, Path]:
    """Write results.json (every prediction and score: yunshan.io.artifacts.EvalResults), results.md (the tables) and
    report.html (the tables as one self-contained page: yunshan.io.html_page) into out_dir."""
    from yunshan.io.html_page import markdown_page

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    json_path, md_path = results.write(out), out / "results.md"
    md_path.write_text(markdown + "\n", encoding="utf-8")
    title = f"yunshan eval: {', '.join(results.models) or 'models'}"
    (out / "report.html").write_text(markdown_page(f"# {title}\n\n{markdown}\n", title, out), encoding="utf-8")
    return json_path, md_path
