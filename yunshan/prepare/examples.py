"""Examples of every drop and every change a step made, a few per reason and task, for the preparation report.

    examples = Examples("runs/prep/work/examples", "quality")
    examples.add("cjk_share", doc, doc.text, rank)        # kept only while the reason has fewer than `per_reason`
    examples.close(rank)                                    # -> runs/prep/work/examples/quality/00003.jsonl

datatrove counts a filter's drops by reason (`dropped_<reason>` in its stats) and can write every dropped document
through an `exclusion_writer`; a report needs neither all of them nor none: `ExampleWriter` is an exclusion writer
that keeps the first few of each reason, and yunshan's own steps call `Examples` directly (a line removed from
inside a document, an identifier masked). Each task writes its own file when its step ends (write then rename, so a
killed task leaves none and its rerun writes it whole), and the report reads them all (`load_examples`).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from datatrove.pipeline.writers.disk_base import DiskWriter

SNIPPET_CHARS = 300


class Examples:
    """The first `per_reason` examples of each reason in one task, written to FOLDER/STEP/RANK.jsonl at close."""

    def __init__(self, folder: str, step: str, per_reason: int = 5):
        self.folder, self.step, self.per_reason = str(folder), step, per_reason
        self._kept: dict[str, list[dict]] = {}

    def add(self, reason: str, doc, snippet: str | None = None, rank: int = 0) -> None:
        kept = self._kept.setdefault(reason, [])
        if len(kept) < self.per_reason:
            text = doc.text if snippet is None else snippet
            kept.append({"reason": reason, "id": doc.id, "chars": len(doc.text),
                         "text": text[:SNIPPET_CHARS] + ("…" if len(text) > SNIPPET_CHARS else "")})

    def close(self, rank: int) -> None:
        folder = Path(self.folder) / self.step
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"{rank:05d}.jsonl"
        temporary = path.with_suffix(".jsonl.tmp")
        with open(temporary, "w", encoding="utf-8") as f:
            for items in self._kept.values():
                for item in items:
                    f.write(json.dumps(item, ensure_ascii=False) + "\n")
        os.replace(temporary, path)
        self._kept = {}


class ExampleWriter(DiskWriter):
    """An exclusion writer for datatrove's filters that keeps `Examples` of the dropped documents instead of all of
    them (the reason is the filter's `filter_reason`, else `default_reason`)."""

    name = "examples"

    def __init__(self, folder: str, step: str, default_reason: str, per_reason: int = 5):
        super().__init__(folder, output_filename="${rank}.unused")
        self.examples = Examples(folder, step, per_reason)
        self.default_reason = default_reason
        self._rank = 0

    def write(self, document, rank: int = 0, **kwargs):
        self._rank = rank
        self.examples.add(document.metadata.get("filter_reason", self.default_reason), document, rank=rank)

    def _write(self, document, file_handler, filename):  # never called: write() keeps examples only
        raise NotImplementedError

    def close(self):
        if self.examples._kept:  # the rank is known from a write; a task that dropped nothing writes no file
            self.examples.close(self._rank)
        super().close()


def load_examples(folder: str | Path) -> dict[str, dict[str, list[dict]]]:
    """{step: {reason: [examples]}} from every task's file, tasks in order, at most 5 per reason."""
    out: dict[str, dict[str, list[dict]]] = {}
    folder = Path(folder)
    if not folder.is_dir():
        return out
    for step_dir in sorted(p for p in folder.iterdir() if p.is_dir()):
        reasons = out.setdefault(step_dir.name, {})
        for path in sorted(step_dir.glob("*.jsonl")):
            for line in path.read_text(encoding="utf-8").splitlines():
                item = json.loads(line)
                kept = reasons.setdefault(item["reason"], [])
                if len(kept) < 5:
                    kept.append(item)
    return out
