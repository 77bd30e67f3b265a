"""Folders yunshan reads models and tokenizers from or writes outputs to: one-line errors before the work starts,
and a finished output put in place in one step.

    from yunshan.io.folders import check_model_folder, check_output_folder, readable_by_transformers, staged_folder
    check_output_folder("runs/cpt", "training.output_dir")        # writable (or creatable) folder, else one line
    check_model_folder("models/llama", "model.name_or_path")      # an existing folder, else one line
    with readable_by_transformers("models/llama", "tokenizer"):   # a damaged folder is one line naming the file
        AutoTokenizer.from_pretrained("models/llama", trust_remote_code=False)
    with staged_folder("exports/demo") as tmp:                    # written beside, then swapped in (replace_folder)
        (tmp / "config.json").write_text("{}")

transformers answers a path that does not exist with "Repo id must be in the form ..." or a hub connection error,
and a damaged tokenizer.json with a KeyError, a TypeError or a bare `Exception` from the tokenizers library; an
output folder that cannot be written fails only when the first file is saved, after the work. Every yunshan command
checks its folders here first, so each of these is one line naming the file and what would be valid.

A command that writes a whole folder (`yunshan export`, `yunshan tokenizer extend`, `yunshan model import-gguf`)
writes it beside its destination and swaps it in with `replace_folder` only when everything succeeded: the
destination is at every moment the old folder or the new one, and a failed swap puts the old one back.
`check_replaceable` says whether an existing destination may be replaced at all (--overwrite).
"""

from __future__ import annotations

import contextlib
import glob
import json
import os
import secrets
import shutil
import stat
from pathlib import Path

# The JSON files transformers reads from a model or tokenizer folder (a damaged one is named with its line).
JSON_FILES = ("config.json", "generation_config.json", "tokenizer.json", "tokenizer_config.json",
              "special_tokens_map.json", "added_tokens.json", "adapter_config.json")


def check_output_folder(path: str | os.PathLike, what: str) -> Path:
    """`path` as a folder this process can write into: an existing writable folder, or one that can be created
    (the nearest existing parent is a writable folder). Raises NotADirectoryError / PermissionError in one line
    naming `what` (the flag or recipe field) otherwise. Creates nothing."""
    path = Path(path).expanduser()
    probe = path
    while not probe.exists() and not probe.is_symlink():
        if probe.parent == probe:
            break
        probe = probe.parent
    if probe.exists() and not probe.is_dir():
        where = "is a file" if probe == path else f"is inside {probe}, which is a file"
        raise NotADirectoryError(f"{what}: {path} {where}; give a folder path")
    if not os.access(probe, os.W_OK | os.X_OK):
        where = "" if probe == path else f" (its parent {probe} exists)"
        raise PermissionError(f"{what}: cannot write into {probe}{where}: permission denied; give a folder you "
                              "can write to")
    return path


def check_model_folder(path: str | os.PathLike, what: str) -> Path:
    """An existing folder: a local model or tokenizer folder, or the HF cache folder a Hub id resolved to
    (yunshan.loading.hub_download.resolve_pretrained, which answers a missing id itself). Raises FileNotFoundError in
    one line naming `what` otherwise."""
    folder = Path(path).expanduser()
    if not folder.is_dir():
        found = "is a file, not a folder" if folder.exists() else "does not exist (no such folder)"
        raise FileNotFoundError(f"{what}: {path} {found}; give a folder written by save_pretrained or a Hub id "
                                "ORG/NAME")
    return folder


def check_replaceable(out: Path, report: str, tool: str, flag: str, fallback: tuple[str, ...] = ()) -> None:
    """--overwrite replaces only a folder an earlier run of `tool` wrote: `report` in it lists the files that run
    wrote (its "files"), and every file below `out` is one of them (a folder counts by its files). A report written
    by an older yunshan, without that list, is read with `fallback`: the fnmatch patterns of the names the tool
    writes, which match files at the top of `out` only (a pattern never reaches into a subfolder; without patterns
    such a folder is refused). A report that cannot be read is refused, never guessed at. Raises ValueError in one
    line naming `flag`; reads only, so a refused folder is left as it was."""
    import fnmatch

    marker = out / report
    if not marker.is_file():
        raise ValueError(f"{flag} {out} is not a folder written by {tool} (no {report}); --overwrite replaces only "
                         f"such a folder, never other files: choose another {flag}")
    way_out = f"remove the folder yourself or choose another {flag}"
    try:
        data = json.loads(marker.read_text(encoding="utf-8"))
    except (ValueError, OSError) as err:  # not UTF-8, not JSON, unreadable: damaged, so nothing in it is trusted
        raise ValueError(f"{marker}: not a readable report of {tool} ({' '.join(str(err).split())}); --overwrite "
                         f"cannot tell its files from yours: {way_out}") from None
    if not isinstance(data, dict) or ("files" in data and not (
            isinstance(data["files"], list) and all(isinstance(name, str) for name in data["files"]))):
        raise ValueError(f"{marker}: not a report of {tool} (expected a JSON object whose 'files' is a list of "
                         f"names); --overwrite cannot tell its files from yours: {way_out}")
    if "files" in data:
        own = set(data["files"]).__contains__
    elif fallback:
        def own(name: str) -> bool:
            return "/" not in name and any(fnmatch.fnmatchcase(name, pattern) for pattern in fallback)
    else:
        raise ValueError(f"{marker}: an older report of {tool} without its list of files; --overwrite cannot tell "
                         f"its files from yours: {way_out}")
    for path in sorted(out.rglob("*")):
        name = path.relative_to(out).as_posix()
        if name != report and (path.is_file() or path.is_symlink()) and not own(name):
            raise ValueError(f"{flag} {out} holds {name}, which {tool} did not write; --overwrite would delete it: "
                             f"move it away or choose another {flag}")


def replace_folder(new: str | os.PathLike, out: str | os.PathLike) -> None:
    """Put the folder `new` at `out`, replacing whatever is there, by renames within `out`'s parent folder (`new`
    must be in it too: one filesystem, so every rename is atomic). An existing `out` is first renamed aside
    (`.NAME.old-PID-RANDOM`) and removed only once `new` is in its place; if that rename fails, the old `out` is
    renamed back (rolled back) and the error raised, `new` left where it was for the caller to remove. A process
    killed between the two renames leaves the old folder aside, and `staged_folder` puts it back next time."""
    new, out = Path(new), Path(out)
    old = None
    if out.exists() or out.is_symlink():
        old = out.parent / f".{out.name}.old-{os.getpid()}-{secrets.token_hex(4)}"
        os.rename(out, old)
    try:
        os.rename(new, out)
    except BaseException:
        if old is not None:
            os.rename(old, out)
        raise
    if old is not None:
        if old.is_dir() and not old.is_symlink():
            shutil.rmtree(old, ignore_errors=True)
        else:
            old.unlink()


def _umask() -> int:
    """The process's umask, read without changing it where Linux shows it (/proc/self/status); elsewhere set to
    0o077 for an instant (a file another thread creates then is only more private) and put back."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o077)
    os.umask(mask)
    return mask


def apply_umask(paths) -> None:
    """Give each file of `paths` the mode a file the user creates gets: 0666 (0777 for an executable) less the
    umask. safetensors (0.8) writes through a private temporary file renamed into place, mode 0600, so a model
    folder would otherwise hide its weights from the group and others the umask lets read every other file. Every
    yunshan writer of safetensors calls it: `staged_folder` (export, merge, import-gguf, tokenizer extend), a
    training run's final save (yunshan.io.artifacts.FinalOutputs.write) and checkpoints (mark_complete), `model
    upcycle`. Links and folders are left alone."""
    mask = _umask()
    for path in map(Path, paths):
        if path.is_symlink() or not path.is_file():
            continue
        mode = stat.S_IMODE(path.stat().st_mode)
        wanted = (0o777 if mode & 0o111 else 0o666) & ~mask
        if mode != wanted:
            path.chmod(wanted)


@contextlib.contextmanager
def staged_folder(out: str | os.PathLike):
    """A fresh hidden folder beside `out` (`.NAME.partial-PID-RANDOM`) to write a whole output into. Leaving the block
    without an error puts it at `out` (replace_folder); an error removes it and leaves `out` as it was. The folder is
    made with the mode any folder the user makes gets (not mkdtemp's private 0700), in the same filesystem as `out`,
    and its files get the mode of any file the user makes (`apply_umask`) before it is put in place.

    A symbolic link at `out` is written through: the folder it points to is replaced and the link kept, so the link
    still names the output (renaming the link aside would leave its target with the old contents). Callers hold
    `out`'s lock (yunshan.io.folder_lock), which has cleaned what killed earlier runs left beside it."""
    out = Path(out)
    if out.is_symlink():
        out = Path(os.path.realpath(out))
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.parent / f".{out.name}.partial-{os.getpid()}-{secrets.token_hex(4)}"
    tmp.mkdir()
    try:
        yield tmp
        apply_umask(tmp.rglob("*"))
        replace_folder(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def remove_leftovers(out: str | os.PathLike) -> list[Path]:
    """Remove what killed runs of staged_folder / replace_folder left beside `out`: half-written
    `.NAME.partial-PID-*` folders, and `.NAME.old-PID-*` folders renamed aside. When `out` itself is missing (killed
    between replace_folder's two renames) the newest old folder is first renamed back to `out`, so a kill never
    costs the previous output. A leftover whose process still runs on this machine is kept. Returns what was
    removed. yunshan.io.folder_lock calls it for every folder it locks."""
    out = Path(out)
    removed = []
    leftovers = []
    for kind in ("partial", "old"):
        for path in out.parent.glob(f".{glob.escape(out.name)}.{kind}-*"):
            pid = path.name[len(out.name) + len(kind) + 3:].split("-", 1)[0]
            if not (pid.isdigit() and int(pid) != os.getpid() and _running(int(pid))):
                leftovers.append((kind, path))
    olds = sorted((p for kind, p in leftovers if kind == "old"), key=lambda p: p.lstat().st_mtime)
    if olds and not (out.exists() or out.is_symlink()):
        os.rename(olds.pop(), out)
    for path in [p for kind, p in leftovers if kind == "partial"] + olds:
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path, ignore_errors=True)
        else:
            path.unlink(missing_ok=True)
        removed.append(path)
    return removed


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def check_json_files(folder: str | os.PathLike) -> None:
    """Every JSON file transformers reads from `folder` parses and holds an object; else a ValueError naming the
    file and line."""
    for name in JSON_FILES:
        path = Path(folder) / name
        if not path.is_file():
            continue
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except UnicodeDecodeError as err:
            raise ValueError(f"{path}: not UTF-8 text (byte {err.start}); the file is damaged: restore it from "
                             "the model's source") from None
        except json.JSONDecodeError as err:
            raise ValueError(f"{path}:{err.lineno}: not valid JSON ({err.msg} at column {err.colno}); the file is "
                             "damaged: restore it from the model's source") from None
        if not isinstance(data, dict):
            raise ValueError(f"{path}: expected a JSON object, found a {type(data).__name__}; the file is damaged: "
                             "restore it from the model's source")


@contextlib.contextmanager
def readable_by_transformers(folder: str | os.PathLike, what: str = "model"):
    """Around transformers' `from_pretrained` of a local folder: damaged JSON is named by file and line before the
    load, and whatever the load raises for unreadable contents becomes one ValueError naming the folder (and
    tokenizer.json for a tokenizer). A refusal to run the folder's own code passes through unchanged
    (yunshan.loading.remote_code words it)."""
    check_json_files(folder)
    try:
        yield
    except Exception as err:  # noqa: BLE001  (transformers and tokenizers raise many types for a damaged folder)
        if isinstance(err, ValueError) and "trust_remote_code" in str(err):
            raise
        if isinstance(err, (ImportError, MemoryError)):
            raise  # a missing package or no memory is not the folder's fault
        target = Path(folder)
        if what == "tokenizer" and (target / "tokenizer.json").is_file():
            target = target / "tokenizer.json"
        detail = " ".join(f"{type(err).__name__}: {err}".split())
        raise ValueError(f"{target}: transformers cannot load this {what} ({detail[:300]}); the folder is "
                         f"incomplete or damaged: give a {what} folder written by save_pretrained") from None
