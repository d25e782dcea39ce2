"""The pytest plugin (entry point ``pytest11``): ``--casebook-run NAME`` keeps the outcomes of the
tests that ``@casebook.cases`` parametrizes as a casebook run, one per dataset version, and a
failing case's id is named in its failure."""

from __future__ import annotations

from typing import Any, Dict, Generator, Optional

import pytest

from ._client import Case, Run
from .errors import Error


def pytest_addoption(parser: Any) -> None:
    group = parser.getgroup("casebook")
    group.addoption(
        "--casebook-run",
        metavar="NAME",
        default=None,
        help="keep the outcomes of @casebook.cases tests as a casebook run named NAME",
    )


class _Recorder:
    """The runs of one session, one per dataset version."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.runs: Dict[str, Run] = {}

    def log(self, case: Case, nodeid: str, passed: Optional[bool], message: str, error: bool) -> None:
        assert case.version is not None
        key = str(case.version)
        if key not in self.runs:
            self.runs[key] = Run(key, self.name)
        run = self.runs[key]
        # A test run again for the same case (parametrized twice) is that case's next run.
        number = 0
        while (case.id, number) in run.done:
            number += 1
        if error:
            run.log(case, error=message or "the test raised", run=number)
        else:
            run.log(case, output={"test": nodeid, "message": message} if message else {"test": nodeid}, passed=passed, run=number)


def _case_of(item: Any) -> Optional[Case]:
    callspec = getattr(item, "callspec", None)
    if callspec is None:
        return None
    case = callspec.params.get("case")
    return case if isinstance(case, Case) and case.version is not None else None


def pytest_configure(config: Any) -> None:
    name = config.getoption("--casebook-run")
    config._casebook = _Recorder(name) if name else None


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: Any, call: Any) -> Generator[None, Any, None]:
    outcome = yield
    report = outcome.get_result()
    case = _case_of(item)
    if case is None:
        return
    if report.failed and hasattr(report.longrepr, "addsection"):
        report.longrepr.addsection("casebook", f"failing case `{case.id}` of {case.version} ({case.version.id[:12]})")
    recorder: Optional[_Recorder] = item.config._casebook
    if recorder is None:
        return
    # The call's outcome, or a setup that failed (then the test never ran on the case).
    if report.when == "call" or (report.when == "setup" and report.failed):
        if report.skipped:
            return
        error = report.failed and (call.excinfo is None or not call.excinfo.errisinstance(AssertionError))
        message = ""
        if report.failed and call.excinfo is not None:
            message = call.excinfo.exconly()
        try:
            recorder.log(case, item.nodeid, report.passed, message, bool(error))
        except Error as err:
            item.config.issue_config_time_warning(pytest.PytestWarning(f"casebook: {err}"), stacklevel=2)


def pytest_sessionfinish(session: Any, exitstatus: int) -> None:
    recorder: Optional[_Recorder] = session.config._casebook
    if recorder is None:
        return
    interrupted = exitstatus == pytest.ExitCode.INTERRUPTED
    for run in recorder.runs.values():
        if interrupted:
            run.abandon()
        else:
            run.finish()


def pytest_terminal_summary(terminalreporter: Any) -> None:
    recorder: Optional[_Recorder] = terminalreporter.config._casebook
    if recorder is None:
        return
    for key, run in recorder.runs.items():
        if run.summary is not None:
            s = run.summary
            terminalreporter.write_line(
                f"casebook: run {run.id} `{recorder.name}` of {key} kept in {run.kept}: "
                f"{s.passed} passed, {s.failed} failed, {s.errors} errors"
            )
        else:
            terminalreporter.write_line(f"casebook: run {run.id} `{recorder.name}` of {key} left unfinished")
