"""Byte-stable rendering of the sample files: CSV (C-Eval / CMMLU layouts), JSON lists, JSON Lines.

Every writer of yunshan.samples goes through these functions so that the same records always give the same
bytes: UTF-8, "\\n" line ends, no ASCII escaping, dictionary keys in insertion order. Nothing to run on its own.
"""

from __future__ import annotations

import csv
import io
import json
from dataclasses import dataclass


@dataclass(frozen=True)
class OutFile:
    """A rendered file: its text and how many records it holds (rows, list items, lines or documents)."""

    text: str
    records: int


def render_csv(header: list[str], rows: list[list]) -> OutFile:
    """CSV with minimal quoting and \\n line ends, as pandas' to_csv writes the C-Eval and CMMLU files."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n", quoting=csv.QUOTE_MINIMAL)
    w.writerow(header)
    w.writerows(rows)
    return OutFile(buf.getvalue(), len(rows))


def render_json_list(records: list[dict]) -> OutFile:
    """A JSON array, two-space indented, non-ASCII kept (the LawBench layout)."""
    return OutFile(json.dumps(records, ensure_ascii=False, indent=2) + "\n", len(records))


def render_jsonl(records: list[dict]) -> OutFile:
    """One compact JSON object per line (SFT sets, corpora, and the JEC-QA release layout)."""
    return OutFile("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records), len(records))


def render_text(docs: list[str]) -> OutFile:
    """Plain text documents separated by one blank line; documents themselves never contain a blank line."""
    return OutFile("\n\n".join(docs) + "\n", len(docs))
