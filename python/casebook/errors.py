"""The exceptions the client raises: every one is a :class:`casebook.Error`."""

from __future__ import annotations

from typing import Optional


class Error(Exception):
    """Anything casebook refused or could not do; the message says what and what to do."""


class ServerError(Error):
    """The server answered with an error.

    Attributes name the server (``url``), the HTTP ``status``, the server's stable ``code``
    (``not-found``, ``bad-request``…) and its ``request_id`` for its logs.
    """

    def __init__(self, url: str, status: int, code: str, message: str, request_id: str = "") -> None:
        self.url = url
        self.status = status
        self.code = code
        self.reason = message
        self.request_id = request_id
        super().__init__(f"the server at {url} answered {status} ({code or 'error'}): {message}")


class AuthError(ServerError):
    """The server refused the API key (401) or its rights (403)."""

    def __init__(self, url: str, status: int, code: str, message: str, request_id: str = "") -> None:
        super().__init__(url, status, code, message, request_id)
        self.args = (
            f"the server at {url} refused the key ({message}): set CASEBOOK_TOKEN to a key of "
            "`casebook keys create`, or run `casebook login`",
        )


class NotFound(ServerError):
    """What was asked for (a dataset, a version, a run) is not there (404)."""


class BadRequest(ServerError):
    """The server refused the request as given (400): a bad filter, a bad reference…"""


class Unreachable(Error):
    """No answer from the server: it is down, or the address is wrong."""

    def __init__(self, url: str, why: str) -> None:
        self.url = url
        super().__init__(
            f"cannot reach the server at {url}: {why}; is `casebook serve` running there? "
            "(CASEBOOK_URL or `casebook login URL` names it)"
        )


class CommandError(Error):
    """The ``casebook`` command (the local store's side, and runs) failed; ``stderr`` is what it said."""

    def __init__(self, command: str, stderr: str, code: Optional[int] = None, where: str = "") -> None:
        self.command = command
        self.where = where
        self.stderr = stderr
        self.code = code
        lines = [_said(line) for line in stderr.strip().splitlines() if line.strip()]
        text = "\n".join(lines) if lines else f"exit status {code}"
        if text.startswith("error: "):
            text = text[len("error: ") :]
        on = f" on {where}" if where else ""
        super().__init__(f"`casebook {command}`{on} failed: {text}")


def _said(line: str) -> str:
    """A line of the command's standard error: its ``message`` when it is a JSON diagnostic."""
    if line.startswith("{"):
        try:
            import json

            said = json.loads(line)
            if isinstance(said, dict) and isinstance(said.get("message"), str):
                return str(said["message"])
        except ValueError:
            pass
    return line


class RecordError(Error):
    """A result that ``Run.log`` could not record (an unknown case, a score out of 0..1…); the run goes on."""


class MissingDependency(Error):
    """An optional package a call needs is not installed."""

    def __init__(self, package: str, call: str) -> None:
        self.package = package
        super().__init__(f"{call} needs the `{package}` package: `pip install {package}`")
