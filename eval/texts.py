"""Read the texts that compression, bits-per-character and feature diversity measure.

    from yunshan.eval.texts import read_documents
    docs = read_documents("heldout/legal.txt")

- `.txt`: one continuous document (a held-out or evaluation text: its blank lines are paragraph breaks inside it,
  not document boundaries; yunshan.data.records' `.txt` rule for held-out texts), or with `txt_document="paragraph"`
  one document per paragraph (feature diversity samples passages that way);
- `.jsonl` / `.json` (a JSON list or one object per line): a record's `text` field, or for JEC-QA records
  (`statement` + `option_list`) the statement and each option as separate pieces, so "statement plus options"
  counts exactly those characters (the paper's Table 7 measures JEC-QA that way).
"""

from __future__ import annotations

from pathlib import Path


def _pieces(record: dict, where: str) -> list[str]:
    if isinstance(record.get("text"), str):
        return [record["text"]]
    if isinstance(record.get("statement"), str) and isinstance(record.get("option_list"), dict):
        return [record["statement"], *(str(record["option_list"][k]) for k in sorted(record["option_list"]))]
    raise ValueError(f"{where}: a record needs a 'text' field or JEC-QA's 'statement' and 'option_list'")


def read_documents(path: str | Path, txt_document: str | None = None) -> list[str]:
    """The non-empty documents (or JEC-QA pieces) of a text file, in file order; a .txt is one document unless
    `txt_document` says otherwise."""
    from yunshan.data.records import HELDOUT_TXT_DOCUMENT, BadRecord, read_records

    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such text file")
    if path.suffix not in (".txt", ".json", ".jsonl"):
        raise ValueError(f"{path}: unsupported text file; use .txt (one document), .jsonl or .json (one per record)")
    docs = []
    for where, record, _ in read_records(str(path), txt_document=txt_document or HELDOUT_TXT_DOCUMENT):
        if isinstance(record, BadRecord):
            raise ValueError(record.describe())
        if not isinstance(record, dict):
            raise ValueError(f"{where}: a record needs a 'text' field or JEC-QA's 'statement' and 'option_list'")
        docs += [p for p in _pieces(record, where) if p]
    if not docs:
        raise ValueError(f"{path}: no text")
    return docs


def default_texts(kind: str) -> list[Path]:
    """The sample texts a text task reads when none are given: the held-out general, finance and legal texts
    (and, for compression, the JEC-QA sample)."""
    try:
        from yunshan.samples import sample_data_dir

        samples = Path(sample_data_dir())
    except ImportError:
        samples = None
    if samples is None or not samples.is_dir():
        raise ValueError(f"{kind}: no text files given and the yunshan.samples sample data is not installed")
    held = [samples / "heldout" / f"{d}.txt" for d in ("general", "finance", "legal")]
    if kind == "compression":
        return held + sorted((samples / "eval" / "jecqa").glob("*.json"))
    return held


def labelled_files(specs: list[str], flag: str) -> dict[str, Path]:
    """LABEL=FILE items (e.g. --heldout general=g.txt) as {label: path}."""
    out = {}
    for spec in specs:
        label, sep, path = spec.partition("=")
        if not sep or not label or not path:
            raise ValueError(f"{flag} {spec!r}: use LABEL=FILE, for example general=heldout/general.txt")
        out[label] = Path(path)
    return out
