"""LawBench: generate answers for the task files of a folder and score them with LawBench's rules.

    yunshan eval --model out/yunshan-chat --tasks lawbench=path/to/LawBench/data/zero_shot

Layout (as released): `{task_id}.json`, each a JSON list of `{instruction, question, answer}`; the prompt is
`instruction + "\\n" + question` (through the chat template for chat models), decoded greedily. Scores are
x100; the columns are the means of the Memorization (1-x), Understanding (2-x) and Applying (3-x) tasks present,
and the overall score is the plain mean over the tasks present (with all 20: the paper's (2 Mem + 10 Und + 8 App)
/ 20). Metrics per task: `lawbench_scoring.py`.
"""

from __future__ import annotations

import json
from pathlib import Path

from .lawbench_scoring import LEVELS, TASKS, aggregate_levels, score_task


def _task_key(task_id: str) -> tuple[int, int]:
    level, number = task_id.split("-")
    return int(level), int(number)


def load_lawbench(root: str | Path) -> dict[str, list[dict]]:
    """Task id -> records, for every `{task_id}.json` in `root` whose id LawBench defines."""
    root = Path(root)
    files = sorted((p for p in root.glob("*.json") if p.stem in TASKS), key=lambda p: _task_key(p.stem))
    if not files:
        raise FileNotFoundError(f"{root}: no LawBench task files; expected files named {{task_id}}.json "
                                f"with ids among {', '.join(TASKS)}")
    tasks = {}
    for path in files:
        try:
            records = json.loads(path.read_text(encoding="utf-8"))
        except json.JSONDecodeError as err:
            raise ValueError(f"{path}:{err.lineno}: not valid JSON ({err.msg})") from None
        if not isinstance(records, list) or not records:
            raise ValueError(f"{path}: expected a non-empty JSON list of {{instruction, question, answer}}")
        for i, rec in enumerate(records):
            if not isinstance(rec, dict):
                raise ValueError(f"{path}: record {i} is not an object")
            for key in ("instruction", "question", "answer"):
                if not isinstance(rec.get(key), str):
                    raise ValueError(f"{path}: record {i} has no string field {key!r}; "
                                     "LawBench records are {instruction, question, answer}")
        tasks[path.stem] = records
    return tasks


def render_prompt(record: dict) -> str:
    return record["instruction"] + "\n" + record["question"]


def run_lawbench(lm, root: str | Path, limit: int | None = None, batch_size: int = 8, chat: bool = False,
                 max_new_tokens: int = 256, add_bos: bool = False, progress: bool = False) -> dict:
    """Evaluate one model on every LawBench task file in `root`; returns the JSON-ready result."""
    from .generation import generate

    root = Path(root)
    tasks = load_lawbench(root)
    task_results, scores = {}, {}
    for task_id, records in tasks.items():
        records = records[:limit] if limit is not None else records
        prompts = [render_prompt(r) for r in records]
        outputs = generate(lm, prompts, max_new_tokens=max_new_tokens, batch_size=batch_size, chat=chat,
                           add_bos=add_bos, progress=progress, desc=f"lawbench {task_id}")
        scored = score_task(task_id, outputs, [r["answer"] for r in records], prompts,
                            source=str(root / f"{task_id}.json"))
        scores[task_id] = 100.0 * scored.score
        task_results[task_id] = {
            "name": TASKS[task_id][1], "level": LEVELS[task_id.split("-")[0]], "metric": scored.metric,
            "score": scores[task_id], "n": len(records), "abstentions": scored.abstentions,
            "skipped": scored.skipped,
            "predictions": [{"prompt": p, "output": o, "answer": r["answer"], "score": s}
                            for p, o, r, s in zip(prompts, outputs, records, scored.per_item)],
        }
    summary = aggregate_levels(scores)
    return {"format": "lawbench", "tasks": task_results, "levels": summary["levels"], "overall": summary["overall"],
            "n_tasks": summary["n_tasks"], "missing_tasks": summary["missing_tasks"], "limit": limit,
            "chat": chat, "max_new_tokens": max_new_tokens, "columns": list(LEVELS.values()),
            "average": "mean over tasks (with all 20: (2 Mem + 10 Und + 8 App) / 20)"}


def run_task(lm, data: Path, args, chat: bool) -> tuple[dict, list[Path]]:
    """`yunshan eval --tasks lawbench`: this module's entry in yunshan.eval.tasks."""
    return run_lawbench(lm, data, batch_size=args.batch_size, chat=chat, max_new_tokens=args.max_new_tokens or 256,
                        add_bos=args.add_bos, progress=args.progress, limit=args.limit), []
