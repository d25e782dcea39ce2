"""A real `casebook serve` on 127.0.0.1:0 (over SQLite, and over the test command's PostgreSQL
when `CASEBOOK_TEST_POSTGRES` is set), with an API key, for the client's tests; and a local
store. The `casebook` command is the one the wheel installed beside this Python."""

from __future__ import annotations

import json
import os
import subprocess
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, Iterator, List

import pytest

import casebook
from casebook import _backend

# Rows in the shape of the native casebook JSONL files of the corpus (id, input, expected,
# labels, metadata), made up here.
CASES: List[Dict[str, object]] = [
    {"id": f"c{i}", "input": f"question {i}", "expected": {"output": f"answer {i}"},
     "labels": ["billing"] if i % 2 == 0 else ["shipping"], "metadata": {"n": i}}
    for i in range(5)
]


@dataclass
class Server:
    url: str
    token: str
    project: str
    home: Path

    def env(self) -> Dict[str, str]:
        env = dict(os.environ)
        env.pop("CASEBOOK_STORE", None)
        env.update(CASEBOOK_URL=self.url, CASEBOOK_TOKEN=self.token, HOME=str(self.home), NO_COLOR="1")
        return env

    def cli(self, *args: str, check: bool = True) -> subprocess.CompletedProcess:
        done = subprocess.run([_backend.binary(), *args], capture_output=True, text=True, env=self.env())
        if check and done.returncode != 0:
            raise AssertionError(f"casebook {' '.join(args)}: {done.stderr}")
        return done


def _backends() -> List[str]:
    return ["sqlite", "postgres"] if os.environ.get("CASEBOOK_TEST_POSTGRES") else ["sqlite"]


@pytest.fixture(params=_backends())
def server(request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Server]:
    folder = tmp_path / "server"
    folder.mkdir()
    env = dict(os.environ, NO_COLOR="1")
    env.pop("CASEBOOK_URL", None)
    if request.param == "postgres":
        # A database of its own, which `casebook init` creates.
        base = os.environ["CASEBOOK_TEST_POSTGRES"].rsplit("/", 1)[0]
        env["CASEBOOK_STORE"] = f"{base}/py_{uuid.uuid4().hex[:12]}"
    else:
        env.pop("CASEBOOK_STORE", None)
    subprocess.run([_backend.binary(), "init"], cwd=folder, env=env, check=True, capture_output=True)
    project = f"p{uuid.uuid4().hex[:10]}"
    token = subprocess.run(
        [_backend.binary(), "keys", "create", "--project", project, "--scope", "write"],
        cwd=folder, env=env, check=True, capture_output=True, text=True,
    ).stdout.strip()
    process = subprocess.Popen(
        [_backend.binary(), "serve", "--listen", "127.0.0.1:0"],
        cwd=folder, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
    )
    assert process.stdout is not None
    first = process.stdout.readline().strip()
    url = json.loads(first)["listening"] if first.startswith("{") else first
    assert url.startswith("http://127.0.0.1:"), first
    home = tmp_path / "home"
    home.mkdir()
    # The client's calls read the server from the environment, as a user's would.
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("XDG_CONFIG_HOME", raising=False)
    monkeypatch.delenv("CASEBOOK_STORE", raising=False)
    monkeypatch.setenv("CASEBOOK_URL", url)
    monkeypatch.setenv("CASEBOOK_TOKEN", token)
    try:
        yield Server(url, token, project, home)
    finally:
        process.kill()
        process.wait()


@pytest.fixture
def store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A local store, and no server in the environment."""
    folder = tmp_path / "local"
    folder.mkdir()
    monkeypatch.delenv("CASEBOOK_URL", raising=False)
    monkeypatch.delenv("CASEBOOK_TOKEN", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("XDG_CONFIG_HOME", raising=False)
    subprocess.run([_backend.binary(), "init"], cwd=folder, check=True, capture_output=True)
    path = folder / ".casebook"
    monkeypatch.setenv("CASEBOOK_STORE", str(path))
    return path
