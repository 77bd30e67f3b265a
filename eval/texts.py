"""Read the texts that compression, bits-per-character and feature diversity measure.

    from yunshan.eval.texts import read_documents
    docs = read_documents("heldout/legal.txt")

- `.txt`: documents separated by blank lines (the held-out files yunshan.samples writes), each stripped;
- `.jsonl` / `.json` (a JSON list or one object per line): a record's `text` field, or for JEC-QA records
  (`statement` + `option_list`) the statement and each option as separate pieces, so "statement plus options"
  counts exactly those characters (the paper's Table 7 measures JEC-QA that way).
"""

from __future__ import annotations

import json
from pathlib import Path


def _pieces(record: dict, where: str) -> list[str]:
    if isinstance(record.get("text"), str):
        return [record["text"]]
    if isinstance(record.get("statement"), str) and isinstance(record.get("option_list"), dict):
        return [record["statement"], *(str(record["option_list"][k]) for k in sorted(record["option_list"]))]
    raise ValueError(f"{where}: a record needs a 'text' field or JEC-QA's 'statement' and 'option_list'")


def read_documents(path: str | Path) -> list[str]:
    """The non-empty documents (or JEC-QA pieces) of a text file, in file order."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such text file")
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".txt":
        docs = [d.strip() for d in text.split("\n\n")]
        docs = [d for d in docs if d]
    elif path.suffix in (".json", ".jsonl"):
        if text.lstrip().startswith("["):
            records = [(r, f"{path}: record {i}") for i, r in enumerate(json.loads(text))]
        else:
            records = []
            for n, line in enumerate(text.splitlines(), start=1):
                if line.strip():
                    try:
                        records.append((json.loads(line), f"{path}:{n}"))
                    except json.JSONDecodeError as err:
                        raise ValueError(f"{path}:{n}: not valid JSON ({err.msg})") from None
        docs = [p for r, where in records for p in _pieces(r, where) if p]
    else:
        raise ValueError(f"{path}: unsupported text file; use .txt (blank-line separated documents), .jsonl or .json")
    if not docs:
        raise ValueError(f"{path}: no text")
    return docs
