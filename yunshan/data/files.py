"""Files named in recipes and on command lines: one resolution of paths, folders and globs, and one file hash.

    from yunshan.data.files import resolve_paths, sha256_file
    resolve_paths(["data/finance/", "data/legal/*.jsonl.zst"], "source 'legal'")    # sorted files, or a clear error

Every reader of the data layer (corpus sources, SFT sources, `yunshan data convert`) and the pipeline's input
hashing resolve what a recipe names through `resolve_paths`, so a folder, a glob and a missing path mean the same
thing everywhere.
"""

from __future__ import annotations

import glob
import hashlib
import os
from collections.abc import Callable
from pathlib import Path


def resolve_paths(patterns: str | list[str], what: str, keep: Callable[[str], bool] | None = None,
                  kinds: str = "corpus file") -> list[str]:
    """The files that `patterns` name: each a file, a folder (searched recursively, keeping the files for which
    `keep` is true, default all) or a glob; in order, each pattern's files sorted. A path that exists is taken as
    it is even when it holds glob characters (`*?[`).

    Args:
        patterns: one path or a list of them.
        what: who names them, for errors (e.g. "source 'finance'").
        keep: which files of a folder count (e.g. by extension).
        kinds: what a matching file is, for the error when a folder or glob holds none.
    Raises FileNotFoundError naming `what` and the pattern when a path does not exist or matches nothing."""
    files: list[str] = []
    for pattern in [patterns] if isinstance(patterns, str) else list(patterns):
        pattern = os.path.expanduser(str(pattern))
        # A path that exists is that path, before any glob: a file named `corpus[2024].jsonl` is itself, not the
        # pattern `corpus2.jsonl`, `corpus0.jsonl`, ...
        if os.path.isdir(pattern):
            found = [str(p) for p in sorted(Path(pattern).rglob("*")) if p.is_file() and (keep is None or keep(str(p)))]
        elif os.path.isfile(pattern):
            found = [pattern]
        elif any(ch in pattern for ch in "*?["):
            found = sorted(p for p in glob.glob(pattern, recursive=True) if os.path.isfile(p))
        else:
            raise FileNotFoundError(f"{what}: {pattern} does not exist (no such file or folder)")
        if not found:
            raise FileNotFoundError(f"{what}: {pattern} matches no {kinds}")
        files.extend(found)
    return files


def sha256_file(path: str | os.PathLike, chunk: int = 1 << 20) -> str:
    """The sha256 of a file's bytes, read in chunks (hex).

    A file already hashed in this process and unchanged since (same inode, size and modification time to the
    nanosecond) is not read again: `yunshan run` hashes a stage's outputs when it finishes, and the next stage's
    evaluation fingerprints the same weights (600 MB for a 135M-parameter model in float32)."""
    stat = os.stat(path)
    key = (os.path.realpath(path), stat.st_ino, stat.st_size, stat.st_mtime_ns)
    if key in _DIGESTS:
        return _DIGESTS[key]
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(chunk):
            digest.update(block)
    _DIGESTS[key] = digest.hexdigest()
    return _DIGESTS[key]


# Digests of the files hashed in this process, keyed by what would change if the file did (sha256_file).
_DIGESTS: dict[tuple, str] = {}
