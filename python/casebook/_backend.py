"""Where the client works: a casebook server over HTTP (standard library ``urllib``), or the
store here through the installed ``casebook`` command. Resolved as the command resolves it."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sysconfig
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional, Sequence, Union

from .errors import AuthError, BadRequest, CommandError, Error, NotFound, ServerError, Unreachable

#: Seconds a request may take before it is given up.
TIMEOUT = 60.0


def credentials_path() -> Optional[Path]:
    """Where ``casebook login`` saves the server and key: ``$XDG_CONFIG_HOME/casebook/credentials.json``,
    else ``~/.config/casebook/credentials.json`` (as the command reads it)."""
    base = os.environ.get("XDG_CONFIG_HOME") or ""
    if base:
        return Path(base) / "casebook" / "credentials.json"
    home = os.environ.get("HOME") or ""
    if home:
        return Path(home) / ".config" / "casebook" / "credentials.json"
    return None


def saved_credentials() -> Optional[Dict[str, str]]:
    """What ``casebook login`` saved (``url`` and ``token``), if anything readable."""
    path = credentials_path()
    if path is None:
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if isinstance(data, dict) and isinstance(data.get("url"), str) and isinstance(data.get("token"), str):
        return {"url": data["url"], "token": data["token"]}
    return None


def binary() -> str:
    """The ``casebook`` command: ``CASEBOOK_BIN``, else the one installed beside this Python (the
    wheel's), else the first on ``PATH``."""
    named = os.environ.get("CASEBOOK_BIN")
    if named:
        return named
    scripts = sysconfig.get_path("scripts")
    for name in ("casebook", "casebook.exe"):
        candidate = Path(scripts) / name
        if candidate.is_file():
            return str(candidate)
    found = shutil.which("casebook")
    if found:
        return found
    raise Error("the `casebook` command is not installed here: `pip install casebook` puts it beside Python")


def quote(segment: str) -> str:
    """One path segment of a URL (a dataset name, a reference, a run id)."""
    return urllib.parse.quote(segment, safe="")


class Server:
    """A casebook server, on behalf of one API key (and so of one project)."""

    def __init__(self, url: str, token: str) -> None:
        self.url = url.rstrip("/")
        self.token = token
        projects = self.get("/api/v1/projects")
        if not isinstance(projects, list) or not projects or "name" not in projects[0]:
            raise Error(f"the server at {self.url} gave no project for this key")
        self.project: str = projects[0]["name"]

    def dataset_path(self, name: str, rest: str = "") -> str:
        return f"/api/v1/projects/{quote(self.project)}/datasets/{quote(name)}{rest}"

    def get(self, path: str, query: Optional[Sequence[tuple]] = None) -> Any:
        """GETs ``path`` and reads its JSON answer; an error answer raises a :class:`ServerError`."""
        url = self.url + path
        if query:
            url += "?" + urllib.parse.urlencode([(k, v) for k, v in query if v is not None])
        request = urllib.request.Request(url, headers={"Authorization": f"Bearer {self.token}", "Accept": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=TIMEOUT) as response:
                body = response.read()
        except urllib.error.HTTPError as err:
            raise self._refused(err) from None
        except (urllib.error.URLError, OSError) as err:
            reason = getattr(err, "reason", err)
            raise Unreachable(self.url, str(reason)) from None
        try:
            return json.loads(body)
        except ValueError:
            raise Error(f"the server at {self.url} answered with a body that is not JSON") from None

    def _refused(self, err: urllib.error.HTTPError) -> ServerError:
        status = err.code
        try:
            text = err.read().decode("utf-8", "replace")
        except OSError:
            text = ""
        code, message, request_id = "", text.strip()[:200] or (err.reason or "no reason given"), ""
        try:
            envelope = json.loads(text)["error"]
            code = str(envelope.get("code", ""))
            message = str(envelope.get("message", message))
            request_id = str(envelope.get("request_id", ""))
        except (ValueError, KeyError, TypeError, AttributeError):
            pass
        kind = {401: AuthError, 403: AuthError, 404: NotFound, 400: BadRequest}.get(status, ServerError)
        return kind(self.url, status, code, message, request_id)

    def env(self) -> Dict[str, str]:
        """The environment that points the ``casebook`` command at this server."""
        env = dict(os.environ)
        env.pop("CASEBOOK_STORE", None)
        env["CASEBOOK_URL"] = self.url
        env["CASEBOOK_TOKEN"] = self.token
        return env

    def describe(self) -> str:
        return f"the server at {self.url} (project `{self.project}`)"


@dataclass
class Local:
    """The store here (``store``, else ``CASEBOOK_STORE``, else the nearest ``.casebook/``), through the command."""

    store: Optional[str] = None

    def args(self) -> List[str]:
        return ["--store", self.store] if self.store else []

    def env(self) -> Dict[str, str]:
        env = dict(os.environ)
        # A server named in the environment is not where a local call works.
        env.pop("CASEBOOK_URL", None)
        return env

    def describe(self) -> str:
        return f"the store {self.store}" if self.store else "the store here"


Backend = Union[Server, Local]


def command(backend: Backend, args: Sequence[str], stdin: Optional[str] = None) -> str:
    """Runs ``casebook ARGS`` where ``backend`` is and returns its standard output; a failure raises
    a :class:`CommandError` with what it said."""
    extra = backend.args() if isinstance(backend, Local) else []
    argv = [binary(), *args, *extra]
    done = subprocess.run(argv, input=stdin, capture_output=True, text=True, env=backend.env())
    if done.returncode != 0:
        raise CommandError(args[0], done.stderr, done.returncode, backend.describe())
    return done.stdout


def lines(backend: Backend, args: Sequence[str]) -> Iterator[str]:
    """The lines ``casebook ARGS`` writes, as it writes them (a long export is never held whole)."""
    extra = backend.args() if isinstance(backend, Local) else []
    argv = [binary(), *args, *extra]
    process = subprocess.Popen(
        argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=backend.env()
    )
    assert process.stdout is not None and process.stderr is not None
    finished = False
    try:
        for line in process.stdout:
            if line.strip():
                yield line
        finished = True
    finally:
        if not finished:
            process.kill()
        stderr = process.stderr.read()
        code = process.wait()
        process.stdout.close()
        process.stderr.close()
    if code != 0:
        raise CommandError(args[0], stderr, code, backend.describe())


_cached: Dict[tuple, Server] = {}


def resolve(url: Optional[str] = None, token: Optional[str] = None, store: Optional[str] = None) -> Backend:
    """Where a call works, as the command decides: a store named (``store=``, ``CASEBOOK_STORE``)
    is that store; else a server named (``url=``, ``CASEBOOK_URL``, else the one ``casebook login``
    saved), with ``token=``, ``CASEBOOK_TOKEN`` or the saved key; else the store here."""
    if store is not None:
        return Local(str(store))
    if url is None and os.environ.get("CASEBOOK_STORE"):
        return Local(os.environ["CASEBOOK_STORE"])
    saved = saved_credentials()
    url = url or os.environ.get("CASEBOOK_URL") or (saved["url"] if saved else None)
    if not url:
        return Local(None)
    token = token or os.environ.get("CASEBOOK_TOKEN") or (saved["token"] if saved else None)
    if not token:
        raise Error(f"no API key for {url}: set CASEBOOK_TOKEN, or run `casebook login {url}`")
    key = (url, token)
    if key not in _cached:
        _cached[key] = Server(url, token)
    return _cached[key]
