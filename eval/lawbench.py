"""LawBench: generate answers for the task files of a folder and score them with LawBench's rules.

    yunshan eval --model out/yunshan-chat --tasks lawbench=path/to/LawBench/data/zero_shot

Layout (as released, zero-shot and one-shot alike): `{task_id}.json`, each a JSON list of `{instruction, question,
answer}`; the prompt is `instruction + "\\n" + question` (through the chat template for chat models), decoded
greedily. Every file, gold answers included, is checked before the first generation. Scores are x100; the
columns are the means of the Memorization (1-x), Understanding (2-x) and Applying (3-x) tasks present, and the
overall score is the plain mean over the tasks present (with all 20: the paper's (2 Mem + 10 Und + 8 App) / 20).
Metrics per task: `lawbench_scoring.py`; task 2-1 through ChERRANT (`cherrant.py`), whose two data files ship with
yunshan (`cherrant_data/`; the LawBench checkout holding the task folder, or $YUNSHAN_CHERRANT_DATA, is read first).

LawBench's published predictions (`predictions/{zero,one}_shot/{model}/{task}.json`, `{"0": {origin_prompt,
prediction, refr}, ...}`) and scores (`results.csv`) are read by `load_predictions` and `load_published_scores`:
benchmarks/lawbench_agreement.py scores the one and compares with the other.
"""

from __future__ import annotations

import csv
import json
import re
from pathlib import Path

from .lawbench_scoring import LEVELS, TASKS, aggregate_levels, parse_answers, score_task


def _task_key(task_id: str) -> tuple[int, int]:
    level, number = task_id.split("-")
    return int(level), int(number)


_SPACE = re.compile(r"\s*")


def _json_items(path: Path, kind: str) -> list[tuple[str | int, object, int]]:
    """The top-level items of a JSON file holding a list (`kind` "list") or an object ("object"), each with its
    index or key and the line it starts on. Read with Python's own JSON decoder, one item at a time, so an error
    names the line; a UTF-8 BOM is accepted."""
    try:
        text = path.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError as err:
        raise ValueError(f"{path}: not UTF-8 text (byte {err.start}); LawBench files are UTF-8 JSON") from None
    decoder = json.JSONDecoder()
    opening, closing = ("[", "]") if kind == "list" else ("{", "}")
    expected = "a JSON list of records" if kind == "list" else 'a JSON object of items {"0": ..., "1": ...}'
    pos = _SPACE.match(text, 0).end()
    line_of = _LineCounter(text)
    if text[pos: pos + 1] != opening:
        raise ValueError(f"{path}:{line_of(pos)}: expected {expected}")
    pos = _SPACE.match(text, pos + 1).end()
    items = []
    try:
        while text[pos: pos + 1] != closing:
            if items:
                if text[pos: pos + 1] != ",":
                    raise json.JSONDecodeError(f"expected ',' or '{closing}'", text, pos)
                pos = _SPACE.match(text, pos + 1).end()
            start = pos
            if kind == "list":
                key = len(items)
            else:
                key, pos = decoder.raw_decode(text, pos)
                if not isinstance(key, str):
                    raise json.JSONDecodeError("expected a string key", text, start)
                pos = _SPACE.match(text, pos).end()
                if text[pos: pos + 1] != ":":
                    raise json.JSONDecodeError("expected ':'", text, pos)
                pos = _SPACE.match(text, pos + 1).end()
            value, pos = decoder.raw_decode(text, pos)
            items.append((key, value, line_of(start)))
            pos = _SPACE.match(text, pos).end()
    except json.JSONDecodeError as err:
        raise ValueError(f"{path}:{line_of(err.pos)}: not valid JSON ({err.msg}); expected {expected}") from None
    after = _SPACE.match(text, pos + 1).end()
    if after != len(text):
        raise ValueError(f"{path}:{line_of(after)}: text after the end of the JSON {kind}")
    return items


class _LineCounter:
    """Line number of a character offset, counting forward from the last offset asked (items come in order)."""

    def __init__(self, text: str):
        self.text, self.pos, self.line = text, 0, 1

    def __call__(self, pos: int) -> int:
        if pos < self.pos:
            self.pos, self.line = 0, 1
        self.line += self.text.count("\n", self.pos, pos)
        self.pos = pos
        return self.line


def load_task_file(path: Path) -> list[dict]:
    """One LawBench task file, every record and gold answer checked (errors name the file, line and field)."""
    if path.stem not in TASKS:
        raise ValueError(f"{path}: not a LawBench task id; files are named {{task_id}}.json with ids among "
                         f"{', '.join(TASKS)}")
    items = _json_items(path, "list")
    if not items:
        raise ValueError(f"{path}: an empty list; expected a JSON list of {{instruction, question, answer}}")
    where = []
    for i, rec, line in items:
        if not isinstance(rec, dict):
            raise ValueError(f"{path}:{line}: record {i} is not an object; LawBench records are "
                             "{instruction, question, answer}")
        for key in ("instruction", "question", "answer"):
            if not isinstance(rec.get(key), str):
                found = "missing" if key not in rec else f"a {type(rec[key]).__name__}"
                raise ValueError(f"{path}:{line}: record {i} field {key!r} is {found}; LawBench records are "
                                 "{instruction, question, answer}, all strings")
        where.append(f"{path}:{line}")
    records = [rec for _, rec, _ in items]
    parse_answers(path.stem, [r["answer"] for r in records], [render_prompt(r) for r in records], where)
    return records


def load_lawbench(root: str | Path) -> dict[str, list[dict]]:
    """Task id -> records, for every `{task_id}.json` in `root` whose id LawBench defines, all checked."""
    root = Path(root)
    files = sorted((p for p in root.glob("*.json") if p.stem in TASKS), key=lambda p: _task_key(p.stem))
    if not files:
        raise FileNotFoundError(f"{root}: no LawBench task files; expected files named {{task_id}}.json "
                                f"with ids among {', '.join(TASKS)}")
    return {path.stem: load_task_file(path) for path in files}


def check_data(root: str | Path) -> None:
    """`yunshan eval` calls this before loading any model: every task file of `root` read and checked."""
    load_lawbench(root)


def render_prompt(record: dict) -> str:
    return record["instruction"] + "\n" + record["question"]


def prompt_text(origin_prompt, where: str) -> str:
    """The prompt of a prediction file's item: a string, or OpenCompass's chat form `[{"role", "prompt"}, ...]`
    (LawBench's wsjd.py reads the first turn's prompt)."""
    if isinstance(origin_prompt, str):
        return origin_prompt
    if (isinstance(origin_prompt, list) and origin_prompt and isinstance(origin_prompt[0], dict)
            and isinstance(origin_prompt[0].get("prompt"), str)):
        return origin_prompt[0]["prompt"]
    raise ValueError(f"{where}: field 'origin_prompt' is {str(origin_prompt)[:40]!r}; expected a string or a list "
                     'of turns [{"role": ..., "prompt": "..."}]')


def load_predictions(path: str | Path) -> dict:
    """A LawBench predictions file: `{"0": {"origin_prompt", "prediction", "refr"}, "1": ...}` (keys 0..N-1, read
    in that order as LawBench's main.py reads them). Returns prompts, predictions, answers (the `refr` fields) and
    each item's location for errors ("FILE:LINE (item "K")"); the answers are checked as gold answers."""
    path = Path(path)
    task = path.stem
    if task not in TASKS:
        raise ValueError(f"{path}: not a LawBench task id; prediction files are named {{task_id}}.json with ids "
                         f"among {', '.join(TASKS)}")
    items = {}
    for key, item, line in _json_items(path, "object"):
        items[key] = (item, line)
    out = {"task": task, "prompts": [], "predictions": [], "answers": [], "where": []}
    for i in range(len(items)):
        if str(i) not in items:
            extra = next(k for k in items if not (k.isascii() and k.isdigit() and int(k) < len(items)))
            raise ValueError(f"{path}:{items[extra][1]}: item key {extra!r}; expected the keys \"0\" to "
                             f"\"{len(items) - 1}\" (LawBench reads items by index)")
        item, line = items[str(i)]
        where = f'{path}:{line} (item "{i}")'
        if not isinstance(item, dict):
            raise ValueError(f"{where}: not an object; expected {{origin_prompt, prediction, refr}}")
        for key in ("prediction", "refr"):
            if not isinstance(item.get(key), str):
                found = "missing" if key not in item else f"a {type(item[key]).__name__}"
                raise ValueError(f"{where}: field {key!r} is {found}; expected a string")
        if "origin_prompt" not in item:
            raise ValueError(f"{where}: field 'origin_prompt' is missing; expected the prompt (a string or "
                             "a list of turns)")
        out["prompts"].append(prompt_text(item["origin_prompt"], where))
        out["predictions"].append(item["prediction"])
        out["answers"].append(item["refr"])
        out["where"].append(where)
    if not out["answers"]:
        raise ValueError(f"{path}: no items; expected a JSON object of items {{\"0\": ..., \"1\": ...}}")
    parse_answers(task, out["answers"], out["prompts"], out["where"], prompt_field="origin_prompt")
    return out


RESULTS_COLUMNS = ("task", "model_name", "score", "abstention_rate")


def load_published_scores(path: str | Path) -> dict[tuple[str, str], dict[str, float]]:
    """LawBench's results.csv (`task,model_name,score,abstention_rate`, scores in [0, 1]) as (model, task) ->
    {"score", "abstention_rate"}, both x100. A (model, task) listed twice is an error."""
    path = Path(path)
    try:
        with open(path, encoding="utf-8-sig", newline="") as fh:
            reader = csv.reader(fh)
            header = next(reader, None)
            if header is None or tuple(h.strip() for h in header) != RESULTS_COLUMNS:
                raise ValueError(f"{path}:1: header is {','.join(header or [])!r}; expected "
                                 f"{','.join(RESULTS_COLUMNS)!r}")
            out = {}
            for row in reader:
                line = reader.line_num
                if not row:
                    continue
                if len(row) != len(RESULTS_COLUMNS):
                    raise ValueError(f"{path}:{line}: {len(row)} fields; expected {len(RESULTS_COLUMNS)} "
                                     f"({','.join(RESULTS_COLUMNS)})")
                task, model = row[0].strip(), row[1].strip()
                if task not in TASKS:
                    raise ValueError(f"{path}:{line}: field 'task' is {task!r}; expected a LawBench task id "
                                     f"({', '.join(TASKS)})")
                values = {}
                for name, text in zip(RESULTS_COLUMNS[2:], row[2:]):
                    try:
                        value = float(text)
                    except ValueError:
                        value = float("nan")
                    if not 0.0 <= value <= 1.0:
                        raise ValueError(f"{path}:{line}: field {name!r} is {text!r}; expected a number in [0, 1]")
                    values[name] = 100.0 * value
                if (model, task) in out:
                    raise ValueError(f"{path}:{line}: model {model!r}, task {task!r} listed a second time")
                out[(model, task)] = values
    except UnicodeDecodeError as err:
        raise ValueError(f"{path}: not UTF-8 text (byte {err.start})") from None
    return out


def generation_chunks(sizes: dict[str, int], batch_size: int) -> list[list[str]]:
    """Task ids in order, consecutive ones pooled until their prompts fill at least one generation batch (the last
    group may hold fewer); a task that fills a batch on its own ends its group."""
    chunks, current, n = [], [], 0
    for task_id, size in sizes.items():
        current.append(task_id)
        n += size
        if n >= batch_size:
            chunks.append(current)
            current, n = [], 0
    return chunks + ([current] if current else [])


def run_lawbench(lm, root: str | Path, limit: int | None = None, batch_size: int = 8, chat: bool = False,
                 max_new_tokens: int = 256, add_bos: bool | None = None, progress: bool = False, keep=None) -> dict:
    """Evaluate one model on every LawBench task file in `root`; returns the JSON-ready result.

    Every file is read and checked first. After each task `keep(result so far)` is called (yunshan eval writes
    it to results.partial.json), and if scoring a task fails its generations are kept that way before the error
    is raised: hours of generation never depend on the last task's scorer."""
    from .cherrant import CharAnnotator, find_resource_dir, load_resources
    from .generation import generate

    root = Path(root)
    tasks = load_lawbench(root)
    cherrant = None
    if "2-1" in tasks:  # found (or not) before generation, and said in the result
        cherrant = CharAnnotator(load_resources(find_resource_dir(root)))
    task_results, scores = {}, {}
    settings = {"limit": limit, "chat": chat, "max_new_tokens": max_new_tokens}
    selected = {task_id: records[:limit] if limit is not None else records for task_id, records in tasks.items()}
    for chunk in generation_chunks({t: len(r) for t, r in selected.items()}, batch_size):
        # Tasks smaller than a batch share their generation batches (a --limit 1 run: 20 prompts in 2 batches, not
        # 20 runs of one); a full task is its own chunk. Each task is scored and kept in order after its chunk.
        prompts = {t: [render_prompt(r) for r in selected[t]] for t in chunk}
        pooled = [p for t in chunk for p in prompts[t]]
        desc = f"lawbench {chunk[0]}" if len(chunk) == 1 else f"lawbench {chunk[0]}..{chunk[-1]}"
        generated = generate(lm, pooled, max_new_tokens=max_new_tokens, batch_size=batch_size, chat=chat,
                             add_bos=add_bos, progress=progress, desc=desc)
        outputs = {}
        for task_id in chunk:
            records = selected[task_id]
            outputs[task_id], generated = generated[:len(records)], generated[len(records):]
            task_results[task_id] = {"name": TASKS[task_id][1], "level": LEVELS[task_id.split("-")[0]],
                                     "n": len(records),
                                     "predictions": [{"prompt": p, "output": o, "answer": r["answer"]}
                                                     for p, o, r in zip(prompts[task_id], outputs[task_id], records)]}
        for task_id in chunk:
            entry, records = task_results[task_id], selected[task_id]
            try:
                scored = score_task(task_id, outputs[task_id], [r["answer"] for r in records], prompts[task_id],
                                    source=str(root / f"{task_id}.json"), cherrant=cherrant)
            except Exception as err:
                entry["error"] = f"{type(err).__name__}: {err}"
                if keep is not None:  # with every generation of the chunk, the later tasks' unscored
                    keep({"format": "lawbench", "partial": True, "tasks": task_results, **settings})
                raise
            scores[task_id] = 100.0 * scored.score
            entry.update({"metric": scored.metric, "score": scores[task_id], "abstentions": scored.abstentions,
                          "skipped": scored.skipped, **({"details": scored.details} if scored.details else {})})
            for pred, s in zip(entry["predictions"], scored.per_item):
                pred["score"] = s
            if keep is not None:
                keep({"format": "lawbench", "partial": True, "tasks": task_results, **settings})
    summary = aggregate_levels(scores)
    return {"format": "lawbench", "tasks": task_results, "levels": summary["levels"], "overall": summary["overall"],
            "n_tasks": summary["n_tasks"], "missing_tasks": summary["missing_tasks"], **settings,
            "columns": list(LEVELS.values()), "average": "mean over tasks (with all 20: (2 Mem + 10 Und + 8 App) / 20)"}


def run_task(lm, data: Path, args, chat: bool, task=None, keep=None) -> tuple[dict, list[Path]]:
    """`yunshan eval --tasks lawbench`: this module's entry in yunshan.eval.tasks (`keep`: see run_lawbench)."""
    return run_lawbench(lm, data, batch_size=args.batch_size, chat=chat, max_new_tokens=args.max_new_tokens or 256,
                        add_bos=args.add_bos, progress=args.progress, limit=args.limit, keep=keep), []
