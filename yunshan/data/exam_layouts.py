"""Exam data into the layouts yunshan's SFT and eval read: JEC-QA train/held-out split, Hub parquet -> CSV.

    yunshan data convert --from jecqa-holdout jec-qa/0_train.json jec-qa/1_train.json --out jecqa_split/
    yunshan data convert --from mc-parquet --layout ceval ceval-exam/ --subject-mapping subject_mapping.json --out ceval/
    yunshan data convert --from mc-parquet --layout cmmlu cmmlu-parquet/ --out cmmlu/

JEC-QA: the public release scores its test questions on CodaLab, and LawBench tasks 1-2 and 3-6 are built from
JEC-QA too, so a run that trains on JEC-QA needs its own held-out questions for `yunshan eval --tasks jecqa`. The
split is by a hash of each question's id (stable across runs and machines, independent of file order); both parts
keep the release's JSON Lines format, one file per input file, under OUT/train/ and OUT/heldout/.

mc-parquet: a benchmark downloaded from the Hub as parquet (`hf download ceval/ceval-exam --repo-type dataset`, or a
`refs/convert/parquet` revision) has one folder per subject with the split in the file or folder name
(`accountant/val-00000-of-00001.parquet`, `accountant/ceval-exam-val.parquet`, `ethnology/test/0000.parquet`). It
becomes the released CSV layout: C-Eval `{split}/{subject}_{split}.csv` with `id,question,A,B,C,D,answer,
explanation` plus `subject_mapping.json`; CMMLU `{split}/{subject}.csv` with `,Question,A,B,C,D,Answer`. Hub
`validation` splits are written as `val` (C-Eval's name).
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import shutil
from pathlib import Path

from .convert import ConvertReport
from .records import BadRecord, read_records

SPLIT_NAMES = {"dev": "dev", "val": "val", "validation": "val", "test": "test", "train": "train"}
CEVAL_COLUMNS = ("id", "question", "A", "B", "C", "D", "answer", "explanation")
CMMLU_COLUMNS = ("Question", "A", "B", "C", "D", "Answer")


def _heldout(question_id: str, fraction: float) -> bool:
    digest = hashlib.sha256(f"jecqa-holdout/{question_id}".encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big") / 2**64 < fraction


def _check_jecqa(record) -> str:
    if not isinstance(record, dict):
        raise BadRecord("unknown_shape", None, f"expected a JEC-QA object, got {type(record).__name__}")
    for key in ("id", "statement", "option_list", "answer"):
        if key not in record:
            raise BadRecord("missing_field", key, "JEC-QA records are {id, statement, option_list, answer, ...}")
    options, answer = record["option_list"], record["answer"]
    if not isinstance(options, dict) or not isinstance(answer, list) or not answer or \
            any(a not in options for a in answer):
        raise BadRecord("bad_answer", "answer", f"expected a non-empty list of keys of option_list, got {answer!r}")
    return str(record["id"])


def split_jecqa(files: list[str], out: str, fraction: float, report: ConvertReport,
                on_bad_record: str = "fail") -> ConvertReport:
    """Write OUT/train/<name> and OUT/heldout/<name> for every JEC-QA file, split by id hash."""
    if not 0 < fraction < 1:
        raise ValueError(f"--heldout-fraction must be between 0 and 1, got {fraction}")
    out_dir = Path(out)
    names = [Path(f).name for f in files]
    if len(set(names)) != len(names):
        raise ValueError(f"input file names must differ (outputs keep them): {names}")
    counts = {"train": 0, "heldout": 0}
    seen: dict[str, str] = {}
    buffers = {}
    for path in files:
        parts = {"train": io.StringIO(), "heldout": io.StringIO()}
        for location, record, _ in read_records(path):
            report.records_read += 1
            try:
                if isinstance(record, BadRecord):
                    raise record
                qid = _check_jecqa(record)
            except BadRecord as bad:
                report.bad(bad.at(location), on_bad_record)
                continue
            if qid in seen:
                report.drop("duplicate", location)
                continue
            seen[qid] = location
            part = "heldout" if _heldout(qid, fraction) else "train"
            parts[part].write(json.dumps(record, ensure_ascii=False) + "\n")
            counts[part] += 1
        buffers[Path(path).name] = parts
    # Written only once every input has been read, so a failure leaves no partial split behind.
    for name, parts in buffers.items():
        for part, buf in parts.items():
            target = out_dir / part / name
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(buf.getvalue(), encoding="utf-8")
    report.records_written = counts["train"] + counts["heldout"]
    report.extra.update({"train questions": counts["train"], "held-out questions": counts["heldout"]})
    return report


def _subject_and_split(path: Path, root: Path) -> tuple[str, str]:
    rel = path.relative_to(root)
    if len(rel.parts) < 2:
        raise ValueError(f"{path}: expected <subject>/<split...>.parquet under {root}")
    subject = rel.parts[0]
    tokens = [t for part in rel.parts[1:] for t in part.replace(".parquet", "").replace("_", "-").split("-")]
    found = {SPLIT_NAMES[t] for t in tokens if t in SPLIT_NAMES}
    if len(found) != 1:
        raise ValueError(f"{path}: cannot tell the split (dev, val/validation, test or train) from the path")
    return subject, found.pop()


def _load_mapping(path: str, subjects: set[str]) -> dict:
    try:
        mapping = json.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise FileNotFoundError(f"--subject-mapping {path}: no such file") from None
    except json.JSONDecodeError as err:
        raise ValueError(f"{path}:{err.lineno}: not valid JSON ({err.msg})") from None
    for key, value in mapping.items():
        if not (isinstance(value, list) and len(value) == 3 and all(isinstance(v, str) and v for v in value)):
            raise ValueError(f"{path}: entry {key!r} is {value!r}; yunshan eval needs [english name, chinese name, "
                             "group] for every subject")
    missing = sorted(subjects - set(mapping))
    if missing:
        raise ValueError(f"{path}: no entry for subjects {missing}")
    return mapping


def parquet_to_csv_layout(root: str, out: str, layout: str, report: ConvertReport,
                          subject_mapping: str | None = None) -> ConvertReport:
    """Rewrite a folder of per-subject Hub parquet files as the C-Eval or CMMLU CSV layout."""
    import pyarrow.parquet as pq

    root_path, out_dir = Path(root), Path(out)
    files = sorted(root_path.rglob("*.parquet"))
    if not files:
        raise FileNotFoundError(f"{root}: no .parquet files")
    groups: dict[tuple[str, str], list[Path]] = {}
    for f in files:
        groups.setdefault(_subject_and_split(f, root_path), []).append(f)
    columns = CEVAL_COLUMNS if layout == "ceval" else CMMLU_COLUMNS
    required = columns[:-1] if layout == "ceval" else columns  # C-Eval's explanation is optional
    mapping = None
    if layout == "ceval":
        if subject_mapping is None:
            raise ValueError("--layout ceval needs --subject-mapping subject_mapping.json (subject -> [english name, "
                             "chinese name, group]); C-Eval publishes it in its GitHub repository")
        mapping = _load_mapping(subject_mapping, {s for s, _ in groups})
    for (subject, split), paths in sorted(groups.items()):
        rows = []
        for p in paths:
            table = pq.read_table(p)
            missing = [c for c in required if c not in table.column_names]
            if missing:
                raise ValueError(f"{p}: missing columns {missing}; has {table.column_names}")
            for i, row in enumerate(table.to_pylist()):
                answer = row[columns[6] if layout == "ceval" else "Answer"]
                if split != "test" and answer not in ("A", "B", "C", "D"):
                    raise ValueError(f"{p}: row {i}: field 'answer': {answer!r} is not one of A, B, C, D")
                rows.append(row)
        report.records_read += len(rows)
        if layout == "ceval":
            target = out_dir / split / f"{subject}_{split}.csv"
            header = list(columns)
            body = [[("" if r.get(c) is None else r.get(c)) for c in columns] for r in rows]
        else:
            target = out_dir / split / f"{subject}.csv"
            header = [""] + list(columns)
            body = [[i] + [("" if r[c] is None else r[c]) for c in columns] for i, r in enumerate(rows)]
        target.parent.mkdir(parents=True, exist_ok=True)
        with open(target, "w", encoding="utf-8", newline="") as f:
            writer = csv.writer(f, lineterminator="\n")  # pandas to_csv style, as the releases were written
            writer.writerow(header)
            writer.writerows(body)
        report.records_written += len(rows)
    if mapping is not None:
        shutil.copyfile(subject_mapping, out_dir / "subject_mapping.json")
    report.extra["subjects"] = len({s for s, _ in groups})
    report.extra["splits"] = ", ".join(sorted({sp for _, sp in groups}))
    return report
