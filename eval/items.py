"""Every item of an evaluation set as text, with the file and line it is on: what decontamination compares the
training data against (yunshan.data.decontamination, `yunshan data decontaminate`).

    from yunshan.eval.items import eval_items
    for item in eval_items("fineval", "data/FinEval"):
        print(item.location, item.fields)            # .../val/accounting_val.csv:2 ['应收账款是指（ ）。', ...]

The layouts are read by the benchmark modules' own readers, so a file `yunshan eval` rejects is rejected here with
the same message:

| format (tasks) | reader | item | fields compared |
|---|---|---|---|
| ceval (C-Eval, FinEval) | `ceval.load_subject_mapping`, `multiple_choice.read_choice_csv` | a row of every split folder present (dev, val, test; test may lack answers) | the question, each option |
| cmmlu (CMMLU, FinanceIQ) | `multiple_choice.read_choice_csv` | a row of dev/ and test/ | the question, each option |
| lawbench | `lawbench.load_lawbench` | a record | the question and the answer |
| jecqa | `jecqa.load_jecqa` | a record | the statement, each option |
| generic (your own mc, qa, gen) | `generic.read_rows` | a row of the file, or of every data file of the folder (test, dev, ...) | the question and each option (mc) or each accepted answer (qa, gen) |
| bpc (held-out texts) | yunshan.data.records (`.txt`: a paragraph per item, though scored whole) | a paragraph or record | its text |
| chat_loss (held-out instruction sets) | yunshan.data.conversations, as yunshan sft reads the source | a sample | every turn |

Each item's tag is {"task", "id", "group"}; the group is the subtask a report breaks a set down by (the LawBench
task, the C-Eval/CMMLU subject, the JEC-QA file, your own set's subject or else its file, the held-out label). Every split is checked, dev included: few-shot examples leak as surely as scored questions. A LawBench task's
instruction is the same in every record of the task, so it is not compared (it would match any copy of the task's
prompt, not of its questions). Explanations of C-Eval rows are not compared either: they are not shown to the model.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from yunshan.data.decontamination import Text
from yunshan.data.records import list_item_lines

from .tasks import TASKS

FORMATS = ("ceval", "cmmlu", "lawbench", "jecqa", "generic")


def eval_items(name: str, path: str | Path) -> Iterator[Text]:
    """The items of task `name` (a key of yunshan.eval.tasks.TASKS with a data layout, or your own set's KIND:LABEL)
    in the folder or file `path`; each Text's tag is {"task", "id", "group"}."""
    kind = name.partition(":")[0]
    if kind not in TASKS or TASKS[kind].format not in FORMATS or (kind != name and not TASKS[kind].labelled):
        valid = ", ".join(t for t, task in TASKS.items() if task.format in FORMATS)
        raise ValueError(f"task {name!r} has no evaluation set to check; valid: {valid} (and held-out texts)")
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"{name}: {path} does not exist")
    fmt = TASKS[kind].format
    reader = {"ceval": _ceval_items, "cmmlu": _cmmlu_items, "lawbench": _lawbench_items, "jecqa": _jecqa_items,
              "generic": _generic_items}[fmt]
    yield from reader(name, path)


def heldout_items(label: str, path: str | Path) -> Iterator[Text]:
    """The documents of a held-out text (bits per character) with their first line."""
    from yunshan.data.records import read_texts

    # Paragraphs as items: an overlap is located and measured per paragraph (scoring takes the text whole).
    for where, text in read_texts(str(path), f"held-out text {label}", txt_document="paragraph"):
        yield Text(where, [text], {"task": f"heldout:{label}", "id": where.rsplit(":", 1)[-1], "group": label})


def instruction_items(source, on_bad_record: str = "fail") -> Iterator[Text]:
    """The samples of a held-out instruction set (an SFT source) as yunshan sft reads them, every turn a field; the
    group is the set's name."""
    from yunshan.data.decontamination import conversation_texts

    for text in conversation_texts(source, on_bad_record, {}):
        yield Text(text.location, text.fields, {"task": f"instructions:{source.name}", "id": text.location,
                                                "group": source.name})


def _questions(name: str, path: Path, columns: dict, format_name: str, hint: str, group: str) -> Iterator[Text]:
    import csv

    from .multiple_choice import read_choice_csv

    with open(path, encoding="utf-8-sig", newline="") as f:
        header = next(csv.reader(f), [])
    if columns["answer"] not in header:  # C-Eval's test split is released without answers
        columns = {role: name for role, name in columns.items() if role != "answer"}
    for q in read_choice_csv(path, columns, format_name, require_answer=False, header_hint=hint):
        yield Text(f"{q.file}:{q.line}", [q.question, *q.options], {"task": name, "id": q.id, "group": group})


def _ceval_items(name: str, root: Path) -> Iterator[Text]:
    from . import ceval

    mapping = ceval.load_subject_mapping(root)
    splits = [s for s in ("dev", "val", "test") if (root / s).is_dir()]
    if not splits:
        raise FileNotFoundError(f"{root}: no dev/, val/ or test/ folder; the C-Eval format is "
                                "{dev,val,test}/{subject}_{split}.csv")
    for split in splits:
        for path in sorted((root / split).glob(f"*_{split}.csv")):
            subject = path.name[: -len(f"_{split}.csv")]
            if subject not in mapping:
                raise ValueError(f"{path}: subject {subject!r} has no entry in {root / 'subject_mapping.json'}")
            yield from _questions(name, path, ceval.COLUMNS, "C-Eval", ceval.HEADER_HINT, subject)


def _cmmlu_items(name: str, root: Path) -> Iterator[Text]:
    from . import cmmlu

    files = [p for split in ("dev", "test") for p in sorted((root / split).glob("*.csv"))]
    if not files:
        raise FileNotFoundError(f"{root}: no dev/*.csv or test/*.csv; the CMMLU format is {{dev,test}}/{{subject}}.csv "
                                f"with columns {cmmlu.HEADER_HINT}")
    for path in files:
        yield from _questions(name, path, cmmlu.COLUMNS, "CMMLU", cmmlu.HEADER_HINT, path.stem)


def _lawbench_items(name: str, root: Path) -> Iterator[Text]:
    from .lawbench import load_lawbench

    for task_id, records in load_lawbench(root).items():
        path = root / f"{task_id}.json"
        lines = list_item_lines(path.read_text(encoding="utf-8"))
        for i, (record, line) in enumerate(zip(records, lines)):
            yield Text(f"{path}:{line}", [record["question"], record["answer"]],
                       {"task": name, "id": f"{task_id}#{i}", "group": task_id})


def _jecqa_items(name: str, path: Path) -> Iterator[Text]:
    from .jecqa import load_jecqa

    lines: dict[str, list[int]] = {}
    counters: dict[str, int] = {}
    for record in load_jecqa(path):
        where = record["where"]
        if ": record " in where:  # a JSON list: find the line the record starts on
            file = where.split(": record ")[0]
            if file not in lines:
                lines[file] = list_item_lines(Path(file).read_text(encoding="utf-8"))
            i = counters[file] = counters.get(file, -1) + 1
            where = f"{file}:{lines[file][i]}"
        options = record["option_list"]
        yield Text(where, [record["statement"], *(str(options[k]) for k in sorted(options))],
                   {"task": name, "id": str(record.get("id", where)), "group": Path(where.rsplit(":", 1)[0]).stem})


def _generic_items(name: str, path: Path) -> Iterator[Text]:
    from .generic import is_row_file, read_rows

    kind = name.partition(":")[0]
    files = [path] if path.is_file() else sorted(p for p in path.iterdir() if p.is_file() and is_row_file(p))
    if not files:
        raise FileNotFoundError(f"{path}: no .jsonl/.json/.csv/.parquet file of {kind} rows")
    for file in files:
        for row in read_rows(file, kind, require_answer=False):
            texts = [row.question, *row.options] if kind == "mc" else [row.question, *row.answers]
            yield Text(f"{row.file}:{row.line}", texts,
                       {"task": name, "id": f"{file.name}#{row.id}", "group": row.subject or file.name})
