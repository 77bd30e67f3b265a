"""`yunshan push`: upload a folder written by `yunshan export` to the Hugging Face Hub, in one commit.

    HF_TOKEN=hf_... yunshan push exports/yunshan-7b --repo-id my-org/yunshan-7b --private
    yunshan push exports/yunshan-7b --repo-id my-org/yunshan-7b --revision v2     # a branch (created if missing)
    yunshan push exports/yunshan-7b --repo-id my-org/yunshan-7b --create-pr       # a pull request on main

Through huggingface_hub: create the repository if it does not exist (private with --private), create the branch
for --revision, then upload_folder, which sends every file of the folder in one commit. The token comes from the
HF_TOKEN environment variable or the login cache (`hf auth login`); yunshan never prints it, never writes it
anywhere and scrubs it from any error text. Every failure is one line naming the step and what to do: no token,
a repo id that is not ORG/NAME (checked before any request), and a refused request (401 bad token, 403 no write
access, 404 missing repo or branch, 5xx Hub error, unreachable endpoint).

Other yunshan commands download (a Hub id for a model or tokenizer) only when the environment allows it
(HF_HUB_OFFLINE unset or 0; the test suite and `make demo` set it to 1); push exists to talk to the Hub, so it lifts
offline mode for its own requests only. With --endpoint (or HF_ENDPOINT) pointing anywhere but huggingface.co it
uploads through the plain HTTP/LFS protocol (as huggingface_hub does with HF_HUB_DISABLE_XET=1), since Xet storage
is a huggingface.co service; against huggingface.co it uses the library's defaults. The token travels in every
request's headers, so a plain http:// endpoint is refused unless it is this machine (a local test hub) or
--allow-insecure-endpoint says the network is trusted.
"""

from __future__ import annotations

import argparse
import contextlib
import os
from dataclasses import dataclass, field, fields
from pathlib import Path

from yunshan.hub.export import EXPORT_MARKER
from yunshan.hub.provenance import REPO_ID
from yunshan.arguments.field_rules import check_fields

DEFAULT_ENDPOINT = "https://huggingface.co"


class PushError(ValueError):
    """A push that could not be done; the message is one line and never holds the token."""


@dataclass
class PushArgs:
    """Settings of `yunshan push`, and the `push` section of a `yunshan run` recipe (where the runner fills
    `folder`)."""

    folder: str = field(default="", metadata={"path": True, "help": "a folder written by `yunshan export`"})
    repo_id: str = field(default="", metadata={"help": "ORG/NAME of the model repository (created if missing)"})
    private: bool = field(default=True, metadata={
        "help": "create the repository private, --no-private for public (an existing repository keeps its "
                "visibility); private by default so that nothing is published by accident"})
    revision: str | None = field(default=None, metadata={"help": "branch to commit to (created from main if "
                                                                 "missing); default main"})
    create_pr: bool = field(default=False, metadata={"help": "open a pull request against main instead of "
                                                             "committing to it"})
    commit_message: str | None = field(default=None, metadata={
        "help": "commit title (default: 'Upload NAME exported by yunshan VERSION')"})
    endpoint: str | None = field(default=None, metadata={
        "help": "Hub endpoint (default: HF_ENDPOINT or https://huggingface.co)"})
    allow_insecure_endpoint: bool = field(default=False, metadata={
        "help": "allow a plain http:// endpoint on another machine (the token then crosses the network in clear "
                "text); http://localhost needs no flag"})

    def __post_init__(self):
        check_fields(self)

def add_arguments(parser: argparse.ArgumentParser) -> None:
    from yunshan.arguments.flags import add_flags

    add_flags(parser, PushArgs, positional={"folder": "DIR"}, required=("repo_id",))


def run(args: argparse.Namespace) -> int:
    from yunshan.arguments.flags import from_flags

    settings = {f.name: getattr(from_flags(PushArgs, args), f.name) for f in fields(PushArgs)}
    result = push_folder(settings.pop("folder"), settings.pop("repo_id"), **settings)
    where = result["pr_url"] or f"{result['repo_url']} ({result['revision']})"
    print(f"pushed {len(result['files'])} files ({result['bytes']:,} bytes) to {where}: commit {result['commit_oid']}")
    return 0


def check_repo_id(repo_id: str) -> None:
    """ORG/NAME as the Hub accepts it; raised before any request is made."""
    if not isinstance(repo_id, str) or not REPO_ID.match(repo_id) or "--" in repo_id or ".." in repo_id \
            or len(repo_id.split("/")[1]) > 96 or repo_id.endswith(".git"):
        raise PushError(f"--repo-id {repo_id!r} is not a Hub model id: use ORG/NAME (letters, digits, '-', '_', '.'; "
                        "no '--' or '..'; a name of at most 96 characters), e.g. my-org/yunshan-7b")


def check_endpoint(endpoint: str, allow_insecure: bool = False) -> None:
    """An https:// URL, or http:// to this machine (a local test hub); plain http:// elsewhere only when allowed,
    since every request carries the token in its Authorization header. Raised before any request is made."""
    import ipaddress
    from urllib.parse import urlsplit

    parts = urlsplit(endpoint)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise PushError(f"--endpoint {endpoint!r} is not a Hub URL: use https://HOST (or http://localhost:PORT for "
                        "a local hub)")
    if parts.scheme == "https" or allow_insecure:
        return
    try:
        local = ipaddress.ip_address(parts.hostname).is_loopback
    except ValueError:
        local = parts.hostname.lower() == "localhost" or parts.hostname.lower().endswith(".localhost")
    if not local:
        raise PushError(f"--endpoint {endpoint} is plain http: the token would cross the network in clear text; use "
                        "https://, or pass --allow-insecure-endpoint if this network is trusted")


def check_export_folder(folder: Path) -> list[Path]:
    """The files to upload; the folder must look like an export (a card and a config or adapter)."""
    if not folder.is_dir():
        raise FileNotFoundError(f"{folder}: no such folder (write one with yunshan export RUN --out {folder})")
    from huggingface_hub.utils import DEFAULT_IGNORE_PATTERNS, filter_repo_objects

    # Exactly what upload_folder sends: every file but .git/ and .cache/huggingface/ (its default ignores) and the
    # export's own marker (yunshan.hub.export.EXPORT_MARKER: for --overwrite on this machine, not for the Hub).
    found = {p.relative_to(folder).as_posix(): p for p in folder.rglob("*") if p.is_file()}
    files = [found[name] for name in sorted(filter_repo_objects(
        found, ignore_patterns=[*DEFAULT_IGNORE_PATTERNS, EXPORT_MARKER]))]
    names = {p.name for p in files if p.parent == folder}
    if "README.md" not in names or not names & {"config.json", "adapter_config.json"}:
        raise PushError(f"{folder}: not a folder written by yunshan export (it needs README.md and config.json or "
                        "adapter_config.json); export first: yunshan export RUN --out DIR")
    if (folder / "checkpoints").exists() or any(p.name == "optimizer.pt" for p in files):
        raise PushError(f"{folder}: holds training checkpoints; push the folder yunshan export wrote instead")
    return files


@contextlib.contextmanager
def hub_requests(plain_http: bool):
    """Lift offline mode (and, for a non-huggingface.co endpoint, Xet) for this push's requests only.

    huggingface_hub reads HF_HUB_OFFLINE and HF_HUB_DISABLE_XET into `constants` at import and checks them on every
    request (utils/_http.py hf_request_event_hook, utils/_runtime.py is_xet_available), so setting the constants
    here is what setting the variables before the import would do; they are restored afterwards."""
    from huggingface_hub import constants

    saved = constants.HF_HUB_OFFLINE, constants.HF_HUB_DISABLE_XET
    constants.HF_HUB_OFFLINE = False
    if plain_http:
        constants.HF_HUB_DISABLE_XET = True
    try:
        yield
    finally:
        constants.HF_HUB_OFFLINE, constants.HF_HUB_DISABLE_XET = saved


def _scrub(text: str, token: str | None) -> str:
    text = " ".join(str(text).split())
    return text.replace(token, "***") if token else text


def _http_error(err: BaseException):
    """The HfHubHTTPError behind an exception (upload errors arrive wrapped, e.g. in a RuntimeError)."""
    from huggingface_hub.errors import HfHubHTTPError

    seen = set()
    while err is not None and id(err) not in seen:
        seen.add(id(err))
        if isinstance(err, HfHubHTTPError):
            return err
        err = err.__cause__ or err.__context__
    return None


def _explain(step: str, repo_id: str, endpoint: str, err: BaseException, token: str) -> PushError:
    import httpx2

    http = _http_error(err)
    if http is not None and http.response is not None:
        code = http.response.status_code
        why = {
            401: "the token was refused (invalid, expired or revoked): set a valid HF_TOKEN or run `hf auth login`",
            403: f"the token may not write to {repo_id.split('/')[0]} (a read-only token, or not a member of the "
                 "organization with write access)",
            404: f"{repo_id} (or the branch) was not found, or the token cannot see it",
            409: "conflict with the repository's state (e.g. the branch or PR changed meanwhile): retry",
            413: "the upload is too large for one request",
            429: "rate limited by the Hub: wait and retry",
        }.get(code, "the Hub had an error: retry later" if code >= 500 else "the request was refused")
        server = getattr(http, "server_message", None) or ""
        detail = f" (server: {server})" if server else ""
        return PushError(_scrub(f"push to {repo_id}: {step} failed with HTTP {code}: {why}{detail}", token))
    if isinstance(err, (httpx2.TransportError, ConnectionError, OSError)):
        return PushError(_scrub(f"push to {repo_id}: {step} failed: cannot reach {endpoint} ({err})", token))
    if isinstance(err, ValueError):  # e.g. the Hub's README metadata validation
        return PushError(_scrub(f"push to {repo_id}: {step} failed: {err}", token))
    return PushError(_scrub(f"push to {repo_id}: {step} failed: {type(err).__name__}: {err}", token))


def push_folder(folder: str | os.PathLike, repo_id: str, *, private: bool = True, revision: str | None = None,
                create_pr: bool = False, commit_message: str | None = None, endpoint: str | None = None,
                allow_insecure_endpoint: bool = False, token: str | None = None) -> dict:
    """Upload `folder` to the model repository `repo_id` in one commit (see the module docstring).

    Args:
        folder: an export folder (`yunshan export`).
        repo_id: ORG/NAME; created if missing (`private` applies only then).
        revision: branch to commit to, created from main when missing; None = main.
        create_pr: open a pull request against main (cannot be combined with `revision`).
        commit_message: commit title.
        endpoint: Hub URL (default HF_ENDPOINT or https://huggingface.co).
        allow_insecure_endpoint: accept a plain http:// endpoint that is not this machine (check_endpoint).
        token: a token to use instead of HF_TOKEN / the login cache (held in memory only).

    Returns a summary without the token: repo_url, revision, commit_url, commit_oid, pr_url, files (path, bytes),
    bytes."""
    from huggingface_hub import HfApi, constants, get_token

    folder = Path(folder)
    check_repo_id(repo_id)
    if create_pr and revision not in (None, "main"):
        raise PushError("--create-pr opens a pull request against main and cannot be combined with --revision; to "
                        "add commits to an open pull request use --revision refs/pr/N without --create-pr")
    endpoint = (endpoint or constants.ENDPOINT or DEFAULT_ENDPOINT).rstrip("/")
    check_endpoint(endpoint, allow_insecure_endpoint)
    files = check_export_folder(folder)
    token = token or get_token()
    if not token:
        raise PushError("no Hugging Face token: set HF_TOKEN (a token with write access, "
                        "https://huggingface.co/settings/tokens) or run `hf auth login`")
    plain_http = endpoint != DEFAULT_ENDPOINT
    if commit_message is None:
        from yunshan import __version__

        commit_message = f"Upload {repo_id.split('/')[1]} exported by yunshan {__version__}"
    api = HfApi(endpoint=endpoint, token=token)
    with hub_requests(plain_http):
        step = "creating the repository"
        try:
            repo_url = api.create_repo(repo_id, repo_type="model", private=private, exist_ok=True)
            if revision not in (None, "main") and not revision.startswith("refs/pr/"):
                step = f"creating branch {revision}"
                api.create_branch(repo_id, branch=revision, repo_type="model", exist_ok=True)
            step = "uploading the files"
            commit = api.upload_folder(repo_id=repo_id, folder_path=str(folder), repo_type="model",
                                       revision=revision, create_pr=create_pr, commit_message=commit_message,
                                       ignore_patterns=[EXPORT_MARKER])
        except PushError:
            raise
        except Exception as err:  # noqa: BLE001  (every failure becomes one clear line)
            raise _explain(step, repo_id, endpoint, err, token) from None
    listed = [{"path": p.relative_to(folder).as_posix(), "bytes": p.stat().st_size} for p in files]
    return {"repo_id": repo_id, "repo_url": str(repo_url), "endpoint": endpoint, "revision": revision or "main",
            "commit_url": commit.commit_url, "commit_oid": commit.oid, "pr_url": commit.pr_url,
            "private_requested": private, "files": listed, "bytes": sum(f["bytes"] for f in listed)}
