"""JEC-QA (China's national judicial examination): multi-answer questions scored by exact set match.

    yunshan eval --model out/yunshan --tasks jecqa=path/to/JEC-QA

Records as released (one JSON object per line in a `.json` file, or a JSON list): `{id, statement, option_list:
{A..D}, answer: [letters], ...}` (the release also has `subject` and `type`). The question type is the file's:
`0_*.json` knowledge-driven, `1_*.json` case-analysis (the release's naming, kept by `yunshan data convert --from
jecqa-holdout`); a record's own `source` field (0 or 1), where a converted set has one, wins. Every `*.json` /
`*.jsonl` file of the folder is read (or give a single file). A prediction is right only if its letter set equals the
gold set. JEC-QA publishes no LLM prompt; yunshan's (documented in eval/README.md) is

    以下是中国司法考试的不定项选择题，请选出所有正确答案。\\n\\n{statement}\\nA. {A}\\nB. {B}\\nC. {C}\\nD. {D}\\n答案：

mode "loglik" scores the 15 non-empty letter sets written in order ("A", "AB", ..., "ABCD") as continuations and
takes the most likely; mode "generate" decodes greedily and reads the letter set (`extract_choice_set`).
"""

from __future__ import annotations

import itertools
import json
from pathlib import Path

from .extraction import LETTERS, extract_choice_set

SUBSETS = ["".join(c) for n in range(1, 5) for c in itertools.combinations(LETTERS, n)]
SOURCES = {0: "knowledge", 1: "case analysis"}


def _records_of(path: Path) -> list[tuple[dict, int]]:
    text = path.read_text(encoding="utf-8")
    stripped = text.lstrip()
    if stripped.startswith("["):
        try:
            data = json.loads(text)
        except json.JSONDecodeError as err:
            raise ValueError(f"{path}:{err.lineno}: not valid JSON ({err.msg})") from None
        return [(rec, 0) for rec in data]
    out = []
    for line_no, line in enumerate(text.splitlines(), start=1):
        if line.strip():
            try:
                out.append((json.loads(line), line_no))
            except json.JSONDecodeError as err:
                raise ValueError(f"{path}:{line_no}: not valid JSON ({err.msg})") from None
    return out


def source_of_file(path: Path) -> int | None:
    """The question type of a released file: 0 (knowledge-driven) for `0_*`, 1 (case-analysis) for `1_*`."""
    head = path.name.split("_", 1)[0]
    return int(head) if head in ("0", "1") and "_" in path.name else None


def load_jecqa(path: str | Path) -> list[dict]:
    """Validated records of a JEC-QA file or folder, each with `where` (file:line) for messages and `source`
    (0, 1 or None) from the record or else the file name."""
    path = Path(path)
    files = [path] if path.is_file() else sorted([*path.glob("*.json"), *path.glob("*.jsonl")])
    if not files:
        raise FileNotFoundError(f"{path}: no JEC-QA files (*.json or *.jsonl)")
    records = []
    for file in files:
        file_source = source_of_file(file)
        for k, (rec, line) in enumerate(_records_of(file)):
            where = f"{file}:{line}" if line else f"{file}: record {k}"
            if not isinstance(rec, dict):
                raise ValueError(f"{where}: expected a JSON object {{id, statement, option_list, answer, ...}}")
            for key in ("statement", "option_list"):
                if key not in rec:
                    raise ValueError(f"{where}: field {key!r} is missing; JEC-QA records are "
                                     "{id, statement, option_list: {A..D}, answer: [letters], ...}")
            if not isinstance(rec["statement"], str) or not rec["statement"].strip():
                raise ValueError(f"{where}: field 'statement' is {rec['statement']!r}; it must be the question text")
            options = rec["option_list"]
            if not isinstance(options, dict) or sorted(options) != list(LETTERS) or \
                    not all(isinstance(v, str) for v in options.values()):
                raise ValueError(f"{where}: field 'option_list' must map exactly the keys A, B, C, D to texts")
            if "answer" not in rec:
                raise ValueError(f"{where}: field 'answer' is missing; JEC-QA's test files are released without "
                                 "answers (scored on CodaLab): evaluate a held-out part of the train files "
                                 "(yunshan data convert --from jecqa-holdout)")
            answer = rec["answer"]
            if not isinstance(answer, list) or not answer or any(a not in LETTERS for a in answer):
                raise ValueError(f"{where}: field 'answer' is {answer!r}; it must be a non-empty list of A-D")
            source = rec.get("source", file_source)
            if source not in (0, 1, None):
                raise ValueError(f"{where}: field 'source' is {source!r}; it must be 0 (knowledge) or 1 (case "
                                 "analysis)")
            records.append({**rec, "source": source, "where": where})
    return records


def render_prompt(record: dict) -> str:
    o = record["option_list"]
    return (f"以下是中国司法考试的不定项选择题，请选出所有正确答案。\n\n{record['statement']}\n"
            f"A. {o['A']}\nB. {o['B']}\nC. {o['C']}\nD. {o['D']}\n答案：")


def exact_set_match(pred: frozenset | set | None, gold: list[str]) -> bool:
    return pred is not None and set(pred) == set(gold)


def run_jecqa(lm, path: str | Path, limit: int | None = None, mode: str = "loglik", batch_size: int = 16,
              chat: bool = False, max_new_tokens: int = 32, add_bos: bool | None = None,
              progress: bool = False) -> dict:
    """Evaluate one model on JEC-QA records; accuracy by source and overall (percent), every prediction kept."""
    records = load_jecqa(path)
    records = records[:limit] if limit is not None else records
    prompts = [render_prompt(r) for r in records]
    if mode == "loglik":
        from .likelihood import score_choices

        scores = score_choices(lm, [(p, SUBSETS) for p in prompts], batch_size=batch_size, add_bos=add_bos,
                               progress=progress, desc="jecqa")
        preds = [(frozenset(SUBSETS[s.best]), None, None) for s in scores]
        rescored = sum(s.rescored for s in scores)
    elif mode == "generate":
        from .generation import generate

        outputs = generate(lm, prompts, max_new_tokens=max_new_tokens, batch_size=batch_size, chat=chat,
                           add_bos=add_bos, progress=progress, desc="jecqa")
        preds = [(*extract_choice_set(o), o) for o in outputs]
        rescored = 0
    else:
        raise ValueError(f"--mode {mode!r} is not valid; use loglik or generate")
    by_source: dict[str, list[int]] = {}
    predictions = []
    for rec, (pred, pattern, output) in zip(records, preds):
        ok = exact_set_match(pred, rec["answer"])
        name = SOURCES.get(rec.get("source"), "unknown")
        by_source.setdefault(name, [0, 0])
        by_source[name][0] += ok
        by_source[name][1] += 1
        predictions.append({"id": rec.get("id"), "source": rec.get("source"), "gold": sorted(rec["answer"]),
                            "pred": sorted(pred) if pred is not None else None, "correct": ok,
                            "output": output, "pattern": pattern})
    correct = sum(p["correct"] for p in predictions)
    return {"format": "jecqa", "mode": mode, "limit": limit, "n": len(records),
            "sources": {k: {"correct": c, "n": n, "accuracy": 100.0 * c / n} for k, (c, n) in by_source.items()},
            "overall": 100.0 * correct / len(records), "unmatched": sum(1 for p in preds if p[0] is None),
            "rescored_float32": rescored, "predictions": predictions, "columns": list(by_source)}


def run_task(lm, data: Path, args, chat: bool, task=None) -> tuple[dict, list[Path]]:
    """`yunshan eval --tasks jecqa`: this module's entry in yunshan.eval.tasks."""
    return run_jecqa(lm, data, mode=args.mode, batch_size=args.batch_size, chat=chat,
                     max_new_tokens=args.max_new_tokens or 32, add_bos=args.add_bos, progress=args.progress,
                     limit=args.limit), []
