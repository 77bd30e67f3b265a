"""`yunshan push` against a local stand-in of the Hub (tests/hub/standin.py): the commit holds exactly the export's
files and bytes (small files inline, safetensors through LFS), the token comes from HF_TOKEN or the login cache and
never appears in output or files, and every refusal is one clear line."""

from __future__ import annotations

import socket
import time
from pathlib import Path

import pytest

from yunshan.cli import main
from yunshan.hub.push import PushError, push_folder

from .conftest import TOKEN
from .standin import HubStandIn


@pytest.fixture
def hub(monkeypatch, tmp_path):
    from huggingface_hub import constants

    monkeypatch.setenv("HF_TOKEN", TOKEN)
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    # The login cache of this machine (if any) must not leak in; tests write their own.
    monkeypatch.setattr(constants, "HF_TOKEN_PATH", str(tmp_path / "hf_home" / "token"))
    with HubStandIn({TOKEN}) as server:
        yield server


def folder_bytes(folder: Path) -> dict[str, bytes]:
    """What a push must upload: every file of the export but its marker (yunshan.hub.export.EXPORT_MARKER)."""
    from yunshan.hub.export import EXPORT_MARKER

    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in folder.rglob("*")
            if p.is_file() and p.name != EXPORT_MARKER}


def files_containing(root: Path, needle: bytes, since: float) -> list[Path]:
    hits = []
    for path in root.rglob("*"):
        try:
            if path.is_file() and path.stat().st_mtime >= since and needle in path.read_bytes():
                hits.append(path)
        except OSError:
            pass
    return hits


def test_push_commits_exactly_the_export(run_export, hub, capsys, tmp_path_factory):
    from huggingface_hub import constants

    started = time.time() - 1
    offline, xet = constants.HF_HUB_OFFLINE, constants.HF_HUB_DISABLE_XET
    assert main(["push", str(run_export), "--repo-id", "org/yunshan-tiny", "--private", "--endpoint", hub.url,
                 "--commit-message", "first release"]) == 0
    out, err = capsys.readouterr()
    assert hub.unhandled == []
    assert len(hub.commits) == 1
    commit = hub.commits[0]
    assert commit["files"] == folder_bytes(run_export)  # names and bytes, nothing more, nothing less
    assert commit["ref"] == "main" and commit["summary"] == "first release"
    assert hub.repos["org/yunshan-tiny"]["private"] is True
    # Weights went through LFS (batch, PUT, verify), every other file inline in the commit.
    shards = sorted(p.name for p in run_export.glob("*.safetensors"))
    uploads = [r for r in hub.requests if r["route"] == "lfs_upload"]
    assert len(uploads) == len(shards) and sorted(hub.lfs.values(), key=len) == sorted(
        ((run_export / s).read_bytes() for s in shards), key=len)
    routes = hub.routes_called()
    assert routes[0] == "create" and routes[-1] == "commit" and "preupload" in routes and "lfs_batch" in routes
    # Every Hub request carried the token from HF_TOKEN; the storage PUTs carried none (like presigned URLs).
    assert all(r["authorization"] == f"Bearer {TOKEN}" for r in hub.requests if r["route"] != "lfs_upload")
    assert all(r["authorization"] is None for r in uploads)
    # The token is never shown or written.
    assert TOKEN not in out and TOKEN not in err
    assert f"pushed {len(commit['files'])} files" in out and hub.url in out
    for root in (tmp_path_factory.getbasetemp(), Path.cwd(), Path.home() / ".cache" / "huggingface"):
        if root.exists():
            assert files_containing(root, TOKEN.encode(), started) == []
    # Offline mode and Xet are as they were for everything after the push.
    assert (constants.HF_HUB_OFFLINE, constants.HF_HUB_DISABLE_XET) == (offline, xet)


def test_the_push_summary_never_holds_the_token(run_export, hub):
    result = push_folder(run_export, "org/yunshan-tiny", endpoint=hub.url)
    assert TOKEN not in repr(result)
    assert result["revision"] == "main" and result["commit_oid"] in result["commit_url"] and result["pr_url"] is None
    assert {f["path"] for f in result["files"]} == set(folder_bytes(run_export))
    assert result["bytes"] == sum(len(b) for b in folder_bytes(run_export).values())


def test_token_from_the_login_cache(run_export, hub, monkeypatch, tmp_path):
    from huggingface_hub import constants

    monkeypatch.delenv("HF_TOKEN")
    cached = "hf_cachedLoginToken_0123456789"
    hub.tokens.add(cached)
    Path(constants.HF_TOKEN_PATH).parent.mkdir(parents=True)
    Path(constants.HF_TOKEN_PATH).write_text(cached)
    push_folder(run_export, "org/yunshan-tiny", endpoint=hub.url)
    assert {r["authorization"] for r in hub.requests if r["route"] != "lfs_upload"} == {f"Bearer {cached}"}


def test_missing_token(run_export, hub, monkeypatch, capsys):
    monkeypatch.delenv("HF_TOKEN")
    assert main(["push", str(run_export), "--repo-id", "org/yunshan-tiny", "--endpoint", hub.url]) == 1
    err = capsys.readouterr().err
    assert "no Hugging Face token: set HF_TOKEN" in err and "hf auth login" in err and err.count("\n") == 1
    assert hub.requests == []


@pytest.mark.parametrize("repo_id", ["yunshan-tiny", "org/", "/name", "org/na me", "org/a--b", "org/x/y",
                                     "-org/name", "org/name.", "org/name.git", "org/" + "n" * 97, "org/中文"])
def test_a_bad_repo_id_fails_before_any_request(run_export, hub, repo_id):
    with pytest.raises(PushError, match="is not a Hub model id: use ORG/NAME"):
        push_folder(run_export, repo_id, endpoint=hub.url)
    assert hub.requests == []


@pytest.mark.parametrize("route, status, token, expected", [
    ("create", None, "hf_wrongToken_abcdef", "creating the repository failed with HTTP 401: the token was refused"),
    ("commit", 403, TOKEN, "uploading the files failed with HTTP 403: the token may not write to org"),
    ("preupload", 404, TOKEN, "uploading the files failed with HTTP 404: org/yunshan-tiny (or the branch) was not "
                              "found"),
    ("commit", 500, TOKEN, "uploading the files failed with HTTP 500: the Hub had an error: retry later"),
])
def test_a_refused_request_is_one_clear_line(run_export, hub, monkeypatch, capsys, route, status, token, expected):
    monkeypatch.setenv("HF_TOKEN", token)
    if status:
        hub.fail[route] = status
    assert main(["push", str(run_export), "--repo-id", "org/yunshan-tiny", "--endpoint", hub.url]) == 1
    out, err = capsys.readouterr()
    line = err.splitlines()[-1]  # above it: huggingface_hub's upload progress bars, if it got that far
    assert line.startswith("yunshan push: error: push to org/yunshan-tiny: ") and expected in line
    assert "error" not in err.replace(line, "") and token not in err and token not in out
    assert hub.commits == []


def test_a_branch_and_a_pull_request(run_export, hub):
    push_folder(run_export, "org/yunshan-tiny", revision="v2", endpoint=hub.url)
    refs = hub.repos["org/yunshan-tiny"]["refs"]
    assert refs["v2"] == folder_bytes(run_export) and refs["main"] == {}  # main untouched
    result = push_folder(run_export, "org/yunshan-tiny", create_pr=True, endpoint=hub.url)
    assert result["pr_url"] == f"{hub.url}/org/yunshan-tiny/discussions/1"
    assert hub.commits[-1]["ref"] == "refs/pr/1" and hub.commits[-1]["create_pr"] is True
    assert refs["main"] == {} and refs["refs/pr/1"] == folder_bytes(run_export)
    before = len(hub.requests)
    with pytest.raises(PushError, match="cannot be combined with --revision"):
        push_folder(run_export, "org/yunshan-tiny", create_pr=True, revision="v2", endpoint=hub.url)
    assert len(hub.requests) == before
    assert hub.unhandled == []


def test_an_unreachable_endpoint(run_export, hub):
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(PushError, match=rf"creating the repository failed: cannot reach http://127.0.0.1:{port}"):
        push_folder(run_export, "org/yunshan-tiny", endpoint=f"http://127.0.0.1:{port}")


def test_only_an_export_folder_is_pushed(run_dir, hub, tmp_path):
    with pytest.raises(PushError, match="not a folder written by yunshan export"):
        push_folder(run_dir / "04_sft", "org/yunshan-tiny", endpoint=hub.url)
    with pytest.raises(FileNotFoundError, match="no such folder"):
        push_folder(tmp_path / "missing", "org/yunshan-tiny", endpoint=hub.url)
    assert hub.requests == []


def test_xet_stays_on_for_huggingface_co(run_export, monkeypatch):
    """Only a non-default endpoint switches huggingface_hub to plain HTTP/LFS; a real push keeps its defaults."""
    from huggingface_hub import HfApi, constants

    monkeypatch.setenv("HF_TOKEN", TOKEN)
    monkeypatch.setattr(constants, "HF_HUB_DISABLE_XET", False)
    seen = []

    def create_repo(self, *args, **kwargs):
        seen.append((self.endpoint, constants.HF_HUB_DISABLE_XET, constants.HF_HUB_OFFLINE))
        raise RuntimeError("stop here")

    monkeypatch.setattr(HfApi, "create_repo", create_repo)
    for endpoint in (None, "https://huggingface.co/", "http://127.0.0.1:1"):
        with pytest.raises(PushError, match="stop here"):
            push_folder(run_export, "org/yunshan-tiny", endpoint=endpoint)
    assert seen == [("https://huggingface.co", False, False), ("https://huggingface.co", False, False),
                    ("http://127.0.0.1:1", True, False)]
    assert constants.HF_HUB_DISABLE_XET is False and constants.HF_HUB_OFFLINE is True  # restored afterwards


def test_a_plain_http_endpoint_elsewhere_is_refused_before_the_token_leaves(run_export, monkeypatch, capsys):
    """The token rides in every request's headers: plain http:// goes only to this machine unless the user says the
    network is trusted (--allow-insecure-endpoint)."""
    from huggingface_hub import HfApi

    monkeypatch.setenv("HF_TOKEN", TOKEN)
    sent = []

    def create_repo(self, *args, **kwargs):
        sent.append(self.endpoint)
        raise RuntimeError("stop here")

    monkeypatch.setattr(HfApi, "create_repo", create_repo)
    assert main(["push", str(run_export), "--repo-id", "org/yunshan-tiny", "--endpoint", "http://hub.example.org"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "plain http: the token would cross the network in clear text" in err
    assert "--allow-insecure-endpoint" in err and TOKEN not in err
    with pytest.raises(PushError, match="is not a Hub URL"):
        push_folder(run_export, "org/yunshan-tiny", endpoint="ftp://hub.example.org")
    assert sent == []
    # this machine, https, or an explicit opt-in: the request is made
    for endpoint, allow in [("http://localhost:1", False), ("http://[::1]:1", False), ("https://hub.example.org", False),
                            ("http://hub.example.org", True)]:
        with pytest.raises(PushError, match="stop here"):
            push_folder(run_export, "org/yunshan-tiny", endpoint=endpoint, allow_insecure_endpoint=allow)
    assert sent == ["http://localhost:1", "http://[::1]:1", "https://hub.example.org", "http://hub.example.org"]
    assert main(["push", str(run_export), "--repo-id", "org/yunshan-tiny", "--endpoint", "http://hub.example.org",
                 "--allow-insecure-endpoint"]) == 1
    assert "stop here" in capsys.readouterr().err and sent[-1] == "http://hub.example.org"
