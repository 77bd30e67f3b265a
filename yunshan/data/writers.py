"""Writers of the data layer: JSON Lines, plain or compressed, that appear only when complete.

    from yunshan.data.writers import JsonlWriter
    writer = JsonlWriter("out/legal.jsonl.zst"); writer.write({"text": "..."}); writer.close()
"""

from __future__ import annotations

import gzip
import json
import os
from pathlib import Path


class JsonlWriter:
    """Writes JSON Lines to .jsonl / .jsonl.gz / .jsonl.zst through a temporary file renamed at the end, so a failed
    run never leaves a half-written file that looks complete."""

    def __init__(self, out: str):
        lower = out.lower()
        if not (lower.endswith(".jsonl") or lower.endswith(".jsonl.gz") or lower.endswith(".jsonl.zst")):
            raise ValueError(f"--out {out}: the output must end in .jsonl, .jsonl.gz or .jsonl.zst")
        self.out = Path(out)
        self.out.parent.mkdir(parents=True, exist_ok=True)
        self.tmp = self.out.with_name(self.out.name + ".part")
        self._raw = open(self.tmp, "wb")
        if lower.endswith(".gz"):
            self._f = gzip.GzipFile(fileobj=self._raw, mode="wb", mtime=0)
        elif lower.endswith(".zst"):
            import zstandard

            self._f = zstandard.ZstdCompressor(level=10).stream_writer(self._raw, closefd=False)
        else:
            self._f = self._raw

    def write(self, obj: dict) -> None:
        self._f.write((json.dumps(obj, ensure_ascii=False) + "\n").encode("utf-8"))

    def close(self, keep: bool = True) -> None:
        if self._f is not self._raw:
            self._f.close()
        self._raw.close()
        if keep:
            os.replace(self.tmp, self.out)
        else:
            self.tmp.unlink(missing_ok=True)
