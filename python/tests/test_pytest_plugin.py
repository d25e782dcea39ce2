"""The pytest plugin: `@casebook.cases` parametrizes by case (ids are case ids), and
`--casebook-run NAME` keeps the session's outcomes as a run, the failing case named."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import casebook

from conftest import CASES, Server

TEST = '''
import casebook

@casebook.cases("support@v1", where='labels contains "billing"')
def test_answers(case):
    assert case.id != "c2", "wrong answer"
'''


def test_cases_parametrize_a_test_and_the_session_is_kept_as_a_run(server: Server, tmp_path: Path) -> None:
    casebook.push("support", CASES)
    (tmp_path / "test_agent.py").write_text(TEST)
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--casebook-run", "nightly", "-v", str(tmp_path / "test_agent.py")],
        cwd=tmp_path, capture_output=True, text=True, env=server.env(),
    )
    assert done.returncode == 1, done.stdout + done.stderr
    assert "test_answers[c0] PASSED" in done.stdout and "test_answers[c2] FAILED" in done.stdout
    assert "failing case `c2` of support@v1" in done.stdout
    assert "casebook: run r-" in done.stdout and "2 passed, 1 failed" in done.stdout
    shown = json.loads(server.cli("results", "--format", "json").stdout)
    assert shown["meta"]["experiment"] == "nightly" and shown["meta"]["dataset"] == "support@v1"
    assert (shown["totals"]["passed"], shown["totals"]["failed"]) == (2, 1)
