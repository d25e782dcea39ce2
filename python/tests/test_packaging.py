"""The wheel as users run it: ``uvx`` (uv's ``tool run``) from the wheel file, offline and with a
cache of its own, and ``python -m casebook`` in the environment the wheel was installed into."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import casebook

#: The bundled example every run validates (letta's JSON lines: 4 cases).
EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "letta" / "support.jsonl"


def _wheel() -> Path:
    named = os.environ.get("CASEBOOK_TEST_WHEEL")
    if not named:
        pytest.skip("CASEBOOK_TEST_WHEEL names no wheel: scripts/test.sh builds one and sets it")
    return Path(named)


def _uvx() -> str:
    beside = Path(sys.executable).parent / "uvx"
    found = str(beside) if beside.is_file() else shutil.which("uvx")
    if not found:
        raise AssertionError("no `uvx` here: scripts/test.sh installs uv into the wheel's test environment")
    return found


def test_uvx_runs_the_wheels_command_offline_from_a_fresh_cache(tmp_path: Path) -> None:
    wheel = _wheel()
    env = dict(os.environ)
    for name in ("CASEBOOK_STORE", "CASEBOOK_URL", "CASEBOOK_TOKEN", "VIRTUAL_ENV", "UV_INDEX_URL"):
        env.pop(name, None)
    # Nothing cached, nothing downloaded: the wheel has no dependencies and Python is this one.
    env.update(UV_CACHE_DIR=str(tmp_path / "cache"), UV_TOOL_DIR=str(tmp_path / "tools"),
               UV_PYTHON_DOWNLOADS="never", UV_NO_CONFIG="1", NO_COLOR="1")
    run = [_uvx(), "--offline", "--python", sys.executable, "--from", str(wheel), "casebook"]
    done = subprocess.run([*run, "validate", str(EXAMPLE)], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert "4 cases" in done.stdout + done.stderr, done.stdout + done.stderr
    version = subprocess.run([*run, "--version"], cwd=tmp_path, env=env, capture_output=True, text=True, check=True)
    # The wheel's own command, of the version the package says.
    assert version.stdout.split() == ["casebook", casebook.__version__], version.stdout
    # A file with an error is the command's exit 1, through uvx.
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": "a", "input": "x"}\n{"id": "a", "input": "y"}\n')
    done = subprocess.run([*run, "validate", str(bad)], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert done.returncode == 1 and "bad.jsonl:2" in done.stdout + done.stderr, done.stdout + done.stderr


def test_python_m_casebook_is_the_command(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "casebook", "--version"], capture_output=True, text=True, check=True)
    assert done.stdout.split() == ["casebook", casebook.__version__]
    done = subprocess.run([sys.executable, "-m", "casebook", "validate", str(EXAMPLE)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    # The command's exit status and error pass through: a missing file is a usage error, 2.
    done = subprocess.run([sys.executable, "-m", "casebook", "validate", "missing.jsonl"], cwd=tmp_path,
                          capture_output=True, text=True)
    assert done.returncode == 2 and "missing.jsonl" in done.stderr, done.stderr
