"""A local stand-in for the Hugging Face Hub endpoints a push and a download call, so `yunshan push` and Hub ids in
recipes and flags (yunshan.loading.hub_download) are tested end to end offline.

The routes are the requests huggingface_hub 2.x makes for HfApi.create_repo, create_branch and upload_folder when
it uploads through plain HTTP/LFS (HF_HUB_DISABLE_XET, which `yunshan push` sets for a non-huggingface.co
endpoint): hf_api.py create_repo / repo_info / create_branch / _validate_yaml, _commit_api.py _fetch_upload_modes
(preupload) and _send_commit (ndjson commit), lfs.py post_lfs_batch_info and lfs_upload (single PUT + verify).
Downloads (snapshot_download / hf_hub_download over plain HTTP, no Xet) call repo_info at a revision, the recursive
tree listing and HEAD + GET of each file under /{repo}/resolve/{revision}/{path}; a public repository answers them
without a token, a private one only with one. Every request is recorded; a request to any other route is answered
404 and listed in `unhandled`, so a test notices when the client starts calling something new. `fail[route] = status` makes a route refuse.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
import secrets
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, unquote, urlsplit

REPO = r"(?P<repo>[^/]+/[^/]+)"
ROUTES = [
    ("POST", re.compile(r"^/api/repos/create$"), "create"),
    ("GET", re.compile(rf"^/api/models/{REPO}(?:/revision/(?P<rev>[^/]+))?$"), "repo_info"),
    ("POST", re.compile(rf"^/api/models/{REPO}/branch/(?P<rev>.+)$"), "branch"),
    ("POST", re.compile(r"^/api/validate-yaml$"), "validate"),
    ("POST", re.compile(rf"^/api/models/{REPO}/preupload/(?P<rev>.+)$"), "preupload"),
    ("POST", re.compile(rf"^/{REPO}\.git/info/lfs/objects/batch$"), "lfs_batch"),
    ("PUT", re.compile(r"^/lfs-storage/(?P<oid>[0-9a-f]{64})$"), "lfs_upload"),
    ("POST", re.compile(r"^/lfs-verify/(?P<oid>[0-9a-f]{64})$"), "lfs_verify"),
    ("POST", re.compile(rf"^/api/models/{REPO}/commit/(?P<rev>.+)$"), "commit"),
    ("GET", re.compile(rf"^/api/models/{REPO}/tree/(?P<rev>[^/]+)(?:/(?P<path>.*))?$"), "tree"),
    ("GET", re.compile(rf"^/{REPO}/resolve/(?P<rev>[^/]+)/(?P<path>.+)$"), "resolve"),
    ("HEAD", re.compile(rf"^/{REPO}/resolve/(?P<rev>[^/]+)/(?P<path>.+)$"), "resolve"),
    # huggingface_hub 2.x fetches this registry (for its user-agent header) at most once a day when online.
    ("GET", re.compile(r"^/api/agent-harnesses$"), "agent_harnesses"),
]
# Routes answered without a token: reads of a public repository, and the public registry.
READ_ROUTES = {"repo_info", "tree", "resolve"}


class HubStandIn:
    """Repositories in memory: {repo_id: {"private", "refs": {ref: {path: bytes}}}}; commits and LFS objects kept."""

    def __init__(self, tokens: set[str], lfs_suffixes=(".safetensors", ".bin"), lfs_min_bytes: int = 10 * 2**20):
        self.tokens = set(tokens)
        self.lfs_suffixes, self.lfs_min_bytes = lfs_suffixes, lfs_min_bytes
        self.repos: dict[str, dict] = {}
        self.lfs: dict[str, bytes] = {}
        self.commits: list[dict] = []
        self.requests: list[dict] = []
        self.unhandled: list[str] = []
        self.fail: dict[str, int] = {}
        self.lock = threading.Lock()
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.server.shutdown()
        self.server.server_close()

    def routes_called(self) -> list[str]:
        return [r["route"] for r in self.requests]

    # -- the routes (each returns status, JSON body, extra headers) ------------------------------------------

    def create(self, req):
        body = req["json"]
        repo_id = f"{body.get('organization')}/{body['name']}" if body.get("organization") else body["name"]
        if repo_id in self.repos:
            return 409, {"error": "You already created this model repo", "url": f"{self.url}/{repo_id}"}, {}
        self.repos[repo_id] = {"private": body.get("visibility") == "private" or body.get("private") is True,
                               "refs": {"main": {}}, "prs": 0}
        return 200, {"url": f"{self.url}/{repo_id}", "name": repo_id}, {}

    def add_repo(self, repo_id: str, files: dict[str, bytes], private: bool = False,
                 refs: dict[str, dict[str, bytes]] | None = None) -> None:
        """A repository to download from: `files` on main, other branches or tags in `refs`."""
        self.repos[repo_id] = {"private": private, "refs": {"main": dict(files), **(refs or {})}, "prs": 0}

    def commit_of(self, repo_id: str, ref: str) -> str:
        """A commit id for a ref: a digest of its files (stable while they do not change)."""
        files = self.repos[repo_id]["refs"][ref]
        digest = hashlib.sha1(repo_id.encode())
        for path in sorted(files):
            digest.update(path.encode() + b"\0" + hashlib.sha256(files[path]).digest())
        return digest.hexdigest()

    def _files_at(self, repo, rev):
        """(commit id, files) of a branch, tag or commit id."""
        state = self._repo(repo)
        rev = unquote(rev)
        if rev in state["refs"]:
            return self.commit_of(unquote(repo), rev), state["refs"][rev]
        for ref, files in state["refs"].items():
            if self.commit_of(unquote(repo), ref) == rev:
                return rev, files
        raise _Reply(404, {"error": f"Invalid rev id: {rev}"}, {"X-Error-Code": "RevisionNotFound"})

    def repo_info(self, req, repo, rev=None):
        repo_id = unquote(repo)
        if repo_id not in self.repos:
            return 404, {"error": "Repository not found"}, {"X-Error-Code": "RepoNotFound"}
        if rev is None and not self.repos[repo_id]["refs"]["main"]:  # an empty repository (push tests)
            return 200, {"id": repo_id, "sha": "0" * 40, "private": self.repos[repo_id]["private"]}, {}
        sha, files = self._files_at(repo, rev or "main")
        return 200, {"id": repo_id, "sha": sha, "private": self.repos[repo_id]["private"],
                     "siblings": [{"rfilename": p} for p in sorted(files)]}, {}

    def agent_harnesses(self, req):
        return 200, {"standardEnvVars": [], "harnesses": {}}, {}

    def tree(self, req, repo, rev, path=None):
        _, files = self._files_at(repo, rev)
        prefix = f"{unquote(path).rstrip('/')}/" if path else ""
        entries = [{"type": "file", "path": p, "size": len(b), "oid": hashlib.sha1(b).hexdigest()}
                   for p, b in sorted(files.items()) if p.startswith(prefix)]
        return 200, entries, {}

    def resolve(self, req, repo, rev, path):
        sha, files = self._files_at(repo, rev)
        path = unquote(path)
        if path not in files:
            return 404, {"error": "Entry not found"}, {"X-Error-Code": "EntryNotFound"}
        data = files[path]
        headers = {"X-Repo-Commit": sha, "ETag": f'"{hashlib.sha1(data).hexdigest()}"'}
        return 200, data, headers

    def branch(self, req, repo, rev):
        refs = self._repo(repo)["refs"]
        branch = unquote(rev)
        if branch in refs:
            return 409, {"error": f"Reference refs/heads/{branch} already exists"}, {}
        refs[branch] = dict(refs["main"])
        return 200, {}, {}

    def validate(self, req):
        text = req["json"].get("content", "")
        if not text.startswith("---\n"):
            return 400, {"errors": [{"message": "README.md has no metadata block"}]}, {}
        return 200, {"errors": [], "warnings": []}, {}

    def preupload(self, req, repo, rev):
        self._repo(repo)
        files = []
        for f in req["json"]["files"]:
            lfs = f["path"].endswith(self.lfs_suffixes) or f["size"] >= self.lfs_min_bytes
            files.append({"path": f["path"], "uploadMode": "lfs" if lfs else "regular", "shouldIgnore": False,
                          "oid": None})
        return 200, {"files": files, "commitOid": "0" * 40}, {}

    def lfs_batch(self, req, repo):
        self._repo(repo)
        objects = []
        for obj in req["json"]["objects"]:
            entry = {"oid": obj["oid"], "size": obj["size"], "authenticated": True}
            if obj["oid"] not in self.lfs:  # already stored objects get no actions (nothing to upload)
                entry["actions"] = {"upload": {"href": f"{self.url}/lfs-storage/{obj['oid']}"},
                                    "verify": {"href": f"{self.url}/lfs-verify/{obj['oid']}"}}
            objects.append(entry)
        return 200, {"transfer": "basic", "objects": objects}, {}

    def lfs_upload(self, req, oid):
        data = req["body"]
        if hashlib.sha256(data).hexdigest() != oid:
            return 400, {"error": "sha256 does not match the object id"}, {}
        self.lfs[oid] = data
        return 200, {}, {}

    def lfs_verify(self, req, oid):
        if oid not in self.lfs or len(self.lfs[oid]) != req["json"]["size"]:
            return 404, {"error": "object not uploaded"}, {}
        return 200, {}, {}

    def commit(self, req, repo, rev):
        state = self._repo(repo)
        lines = [json.loads(line) for line in req["body"].decode().splitlines() if line.strip()]
        header = next(x["value"] for x in lines if x["key"] == "header")
        files = {}
        for item in lines:
            value = item["value"]
            if item["key"] == "file":
                files[value["path"]] = base64.b64decode(value["content"])
            elif item["key"] == "lfsFile":
                if value["oid"] not in self.lfs:
                    return 422, {"error": f"LFS object {value['oid']} of {value['path']} was never uploaded"}, {}
                files[value["path"]] = self.lfs[value["oid"]]
            elif item["key"] != "header":
                return 400, {"error": f"unsupported commit operation {item['key']}"}, {}
        ref = unquote(rev)
        create_pr = req["query"].get("create_pr") == ["1"]
        if create_pr:
            state["prs"] += 1
            ref = f"refs/pr/{state['prs']}"
            state["refs"][ref] = dict(state["refs"]["main"])
        elif ref not in state["refs"]:
            return 404, {"error": f"Invalid rev id: {ref}"}, {"X-Error-Code": "RevisionNotFound"}
        state["refs"][ref].update(files)
        oid = secrets.token_hex(20)
        self.commits.append({"repo_id": unquote(repo), "ref": ref, "create_pr": create_pr, "files": files,
                             "summary": header["summary"], "description": header.get("description", "")})
        repo_id = unquote(repo)
        return 200, {"commitUrl": f"{self.url}/{repo_id}/commit/{oid}", "commitOid": oid,
                     "pullRequestUrl": f"{self.url}/{repo_id}/discussions/{state['prs']}" if create_pr else None}, {}

    def _repo(self, repo):
        repo_id = unquote(repo)
        if repo_id not in self.repos:
            raise _Reply(404, {"error": "Repository not found"}, {"X-Error-Code": "RepoNotFound"})
        return self.repos[repo_id]

    # -- HTTP plumbing ------------------------------------------------------------------------------------------

    def _handler(self):
        hub = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):  # quiet
                pass

            def _body(self) -> bytes:
                if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
                    data = bytearray()
                    while True:
                        size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                        if size == 0:
                            while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                                pass
                            return bytes(data)
                        data += self.rfile.read(size)
                        self.rfile.readline()
                length = int(self.headers.get("Content-Length") or 0)
                return self.rfile.read(length) if length else b""

            def _reply(self, status: int, body, headers: dict):
                raw = isinstance(body, bytes)  # a file's bytes (resolve), else a JSON answer
                data = body if raw else json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/octet-stream" if raw else "application/json")
                self.send_header("Content-Length", str(len(data)))
                for k, v in headers.items():
                    self.send_header(k, v)
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(data)

            def _dispatch(self):
                url = urlsplit(self.path)
                body = self._body()
                req = {"method": self.command, "path": url.path, "query": parse_qs(url.query), "body": body,
                       "authorization": self.headers.get("Authorization"), "json": None}
                content_type = self.headers.get("Content-Type") or ""
                if body and "json" in content_type and "ndjson" not in content_type:
                    req["json"] = json.loads(body)
                for method, pattern, route in ROUTES:
                    match = pattern.match(url.path)
                    if method == self.command and match:
                        break
                else:
                    with hub.lock:
                        hub.unhandled.append(f"{self.command} {url.path}")
                        hub.requests.append({**req, "route": None})
                    return self._reply(404, {"error": "not served by the stand-in"}, {})
                with hub.lock:
                    hub.requests.append({**req, "route": route})
                    try:
                        # Presigned storage URLs carry no Hub token, like S3's; every Hub route checks it.
                        repo = match.groupdict().get("repo")
                        public_read = route in READ_ROUTES and repo is not None and not hub.repos.get(
                            unquote(repo), {}).get("private", False)
                        if route not in ("lfs_upload", "agent_harnesses") and not public_read:
                            token = (req["authorization"] or "").removeprefix("Bearer ")
                            if token not in hub.tokens:
                                raise _Reply(401, {"error": "Invalid credentials in Authorization header"}, {})
                        if route in hub.fail:
                            raise _Reply(hub.fail[route], {"error": f"stand-in refuses {route}"}, {})
                        status, out, headers = getattr(hub, route)(req, **match.groupdict())
                    except _Reply as reply:
                        status, out, headers = reply.args
                self._reply(status, out, headers)

            do_GET = do_POST = do_PUT = do_HEAD = do_DELETE = _dispatch

        return Handler


class _Reply(Exception):
    pass
