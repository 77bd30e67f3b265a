"""How far each task of a stage has read, for the progress bar of `yunshan data prepare`.

    counter = Progress("OUT/logs/clean/progress", rank)    # in a task: counter.add(len(doc.text)) per document
    read_progress("OUT/logs/clean/progress")              # in the command: (documents, characters) of all tasks

datatrove marks a task only when it completes, which on a corpus split into as many tasks as cores is once, at the
end; each reader here writes its own count (a tiny file, replaced every two seconds) so the bar moves while the tasks
run, on every executor whose tasks share the output folder's file system.
"""

from __future__ import annotations

import os
import time
from pathlib import Path


class Progress:
    """A task's count of documents and characters read, written to FOLDER/RANK at most every `every` seconds."""

    def __init__(self, folder: str | None, rank: int, every: float = 2.0):
        self.path = Path(folder) / f"{rank:05d}" if folder else None
        self.every, self.documents, self.chars, self._last = every, 0, 0, 0.0

    def add(self, chars: int) -> None:
        self.documents += 1
        self.chars += chars
        if self.path is not None and time.monotonic() - self._last >= self.every:
            self.flush()

    def flush(self) -> None:
        if self.path is None:
            return
        self._last = time.monotonic()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        temporary = self.path.with_suffix(".tmp")
        temporary.write_text(f"{self.documents} {self.chars}")
        os.replace(temporary, self.path)


def read_progress(folder: Path) -> tuple[int, int]:
    """(documents, characters) read so far by every task of a stage."""
    documents = chars = 0
    if folder.is_dir():
        for path in folder.iterdir():
            if path.suffix == ".tmp":
                continue
            try:
                d, c = path.read_text().split()
            except (OSError, ValueError):
                continue
            documents, chars = documents + int(d), chars + int(c)
    return documents, chars
