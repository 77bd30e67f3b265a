"""One lock per output folder: a second yunshan command writing a folder in use stops in one line before it
touches anything.

    from yunshan.io.folder_lock import folder_lock
    with folder_lock("runs/cpt", "training.output_dir"):    # FolderInUse (one line) if another run writes there
        ...

Every command that writes a folder takes it for that folder: `yunshan cpt` and `sft` (training.output_dir),
`yunshan run` (its run folder; each stage then takes its own folder's), `eval --out`, `export --out`,
`tokenizer extend --out`, `model import-gguf OUT` and `data decontaminate --out`. A dry run takes none. Once the lock is taken, what killed
writers left beside the folder is cleaned (yunshan.io.folders.remove_leftovers).

The lock is a file beside the folder, `PARENT/.NAME.lock`, not inside it: export, tokenizer extend and import-gguf
replace their folder as a whole (yunshan.io.folders.replace_folder), and a stage folder's contents are hashed by
`yunshan run`. The folder's path is resolved first (symlinks, `..`), so two names of one folder share one lock. The
file holds its owner as JSON: pid, host, the kernel's boot id and the process's start tick (so a reused pid is
not mistaken for the owner), the start time and the command line.

Taken with O_CREAT | O_EXCL: the create is atomic on a local filesystem and on NFS (v3 and later send an exclusive
CREATE to the server), where flock/fcntl locks are emulated per client or need a lock daemon, and on some network
filesystems (CIFS, some FUSE mounts) are granted without locking anything. The price of a lock that is a plain file
is that a killed owner leaves it behind: a lock whose owner on this host no longer runs (no such pid, the pid now
names a process started later, or the machine rebooted since) is stale and taken over with a note; the take-over
itself is guarded by a directory created beside it (mkdir is atomic too), so two runs that find the same stale lock
do not both take it. A lock from another host cannot be checked from here and is refused, naming the file to remove
if that run is gone.

Under `accelerate launch` every process of the launch calls this for the same folder: the first to create the file
holds it, and the others find that it names their own launch (the same MASTER_ADDR:MASTER_PORT and
TORCHELASTIC_RUN_ID, and on one host the same launcher process) and go on without holding it. A lock held by
another run stops each process of the launch alike, before any collective operation, so none is left waiting for
the others.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import socket
import sys
import time
from pathlib import Path

# A lock file found empty or unreadable is being written by its creator (microseconds) unless it is older than this.
EMPTY_GRACE_SECONDS = 5.0
# A take-over guard older than this was left by a process killed during the take-over (which takes milliseconds).
GUARD_STALE_SECONDS = 30.0


class FolderInUse(ValueError):
    """Another live run writes the folder; the message is one line naming the owner and the lock file."""


def lock_path(folder: str | os.PathLike) -> Path:
    """The lock file of `folder`: `.NAME.lock` beside the folder its path resolves to."""
    real = Path(os.path.realpath(Path(folder).expanduser()))
    return real.parent / f".{real.name}.lock"


@contextlib.contextmanager
def folder_lock(folder: str | os.PathLike, what: str, log=print):
    """Hold the lock of `folder` for the block (see the module docstring). `what` names the flag or recipe field
    in messages; `log` receives the note when a stale lock is taken over. Raises FolderInUse while another live
    run holds it."""
    path = lock_path(folder)
    token = _acquire(path, what, Path(folder), log)
    if token is not None:
        # No other run writes here now: what killed writers left beside the folder goes (a half-written
        # .NAME.partial-*, an earlier output renamed aside: put back if the folder itself is missing).
        from yunshan.io.folders import remove_leftovers

        remove_leftovers(Path(os.path.realpath(Path(folder).expanduser())))
    try:
        yield path
    finally:
        if token is not None:
            _release(path, token)


def _acquire(path: Path, what: str, folder: Path, log) -> str | None:
    """Create the lock file; returns its token, or None when this process or its launch already holds it."""
    me = _owner_record()
    path.parent.mkdir(parents=True, exist_ok=True)
    taken_over = None
    while True:
        try:
            fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        except FileExistsError:
            raw = _read_bytes(path)
            if raw is None:  # removed between the create and the read: try again
                continue
            owner = _parse(raw)
            if owner is None:
                if _age(path) < EMPTY_GRACE_SECONDS:
                    time.sleep(0.02)  # its creator is writing it
                    continue
                reason = "an empty or damaged lock file"
            elif _same_run(owner, me):
                return None
            else:
                alive = _alive(owner)
                if alive is not False:
                    raise FolderInUse(_in_use(what, folder, path, owner, alive))
                reason = f"left by pid {owner.get('pid')} on {owner.get('host')}, which no longer runs"
            if _remove_if_unchanged(path, raw):
                taken_over = reason
            continue
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(json.dumps(me, ensure_ascii=False) + "\n")
            f.flush()
            os.fsync(f.fileno())
        if taken_over:
            log(f"note: {what} {folder}: took over the stale lock {path} ({taken_over})")
        return me["token"]


def _release(path: Path, token: str) -> None:
    """Remove the lock file if it is still this holder's (only a take-over could have replaced it)."""
    raw = _read_bytes(path)
    owner = _parse(raw) if raw is not None else None
    if owner is not None and owner.get("token") == token:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)


def _remove_if_unchanged(path: Path, seen: bytes) -> bool:
    """Remove a stale lock file if it still holds `seen`, under the take-over guard; False if another process is
    taking it over or it changed (the caller looks again)."""
    guard = path.with_name(path.name + ".takeover")
    try:
        os.mkdir(guard)
    except FileExistsError:
        if _age(guard) > GUARD_STALE_SECONDS:
            with contextlib.suppress(OSError):
                os.rmdir(guard)
        time.sleep(0.02)
        return False
    try:
        if _read_bytes(path) != seen:
            return False
        os.unlink(path)
        return True
    finally:
        with contextlib.suppress(OSError):
            os.rmdir(guard)


def _in_use(what: str, folder: Path, path: Path, owner: dict, alive: bool | None) -> str:
    command = " ".join(str(owner.get("command") or "").split())[:160]
    where = f"pid {owner.get('pid')} on {owner.get('host')}"
    if alive is None:
        check = (f"it runs on another host, so this one cannot check it: if that run has ended, remove {path} and "
                 "launch again")
    else:
        check = f"wait for it to end or stop it; the lock is {path}"
    return (f"{what} {folder} is in use by another yunshan run ({where} since {owner.get('started')}"
            f"{f': {command}' if command else ''}); {check}")


# ---------------------------------------------------------------- owners


def _owner_record() -> dict:
    launch = _launch()
    return {"pid": os.getpid(), "host": socket.gethostname(), "boot_id": _boot_id(),
            "process_start": _process_start(os.getpid()), "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            "command": " ".join(sys.argv)[:500], "launch": launch, "launcher": os.getppid() if launch else None,
            "token": secrets.token_hex(8)}


def _launch() -> str | None:
    """What identifies this process's `accelerate launch` / torchrun launch (None when it is a single process): the
    rendezvous address and run id, which no two live launches share."""
    if int(os.environ.get("WORLD_SIZE", "1") or 1) <= 1:
        return None
    return (f"{os.environ.get('MASTER_ADDR', '')}:{os.environ.get('MASTER_PORT', '')}/"
            f"{os.environ.get('TORCHELASTIC_RUN_ID', '')}")


def _same_run(owner: dict, me: dict) -> bool:
    """The lock is this process's own, or another process's of the same launch."""
    same_host = owner.get("host") == me["host"]
    if same_host and owner.get("pid") == me["pid"] and owner.get("process_start") == me["process_start"]:
        return True
    if me["launch"] is None or owner.get("launch") != me["launch"]:
        return False
    return not same_host or owner.get("launcher") == me["launcher"]


def _alive(owner: dict) -> bool | None:
    """Whether the lock's owner still runs: None when it cannot be told from here (another host)."""
    if owner.get("host") != socket.gethostname():
        return None
    boot = _boot_id()
    if boot and owner.get("boot_id") and owner["boot_id"] != boot:
        return False  # the machine rebooted since
    pid = owner.get("pid")
    if not isinstance(pid, int) or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # another user's process: it exists
    start = owner.get("process_start")
    return not (start is not None and _process_start(pid) not in (None, start))  # a reused pid is not the owner


def _process_start(pid: int) -> int | None:
    """The process's start time in clock ticks since boot (Linux /proc; None elsewhere or if it has ended)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        return int(stat.rsplit(")", 1)[1].split()[19])
    except (OSError, IndexError, ValueError):
        return None


def _boot_id() -> str | None:
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip() or None
    except OSError:
        return None


def _read_bytes(path: Path) -> bytes | None:
    try:
        return path.read_bytes()
    except FileNotFoundError:
        return None


def _parse(raw: bytes) -> dict | None:
    try:
        owner = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        return None
    return owner if isinstance(owner, dict) and "pid" in owner and "token" in owner else None


def _age(path: Path) -> float:
    try:
        return time.time() - path.stat().st_mtime
    except FileNotFoundError:
        return 0.0
