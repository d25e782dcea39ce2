"""Datasets read a page at a time, ``push`` and ``pull``, and runs from the user's own loop."""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any, Dict, Iterable, Iterator, List, Mapping, Optional, Set, Tuple, Type, Union

from . import _backend
from ._backend import Backend, Local, Server
from .errors import CommandError, Error, MissingDependency, RecordError

#: Cases one request of a server's pages asks for.
PAGE_SIZE = 500


@dataclass(frozen=True)
class Version:
    """A pinned version of a dataset: its ``number`` (``v3``), its content ``id`` and its size."""

    dataset: str
    number: int
    id: str
    cases: int

    def __str__(self) -> str:
        return f"{self.dataset}@v{self.number}"


@dataclass
class Case:
    """One case of a dataset, as native casebook JSON (``data``) with its usual fields at hand."""

    id: str
    input: Any
    expected: Optional[Dict[str, Any]]
    labels: List[str]
    metadata: Dict[str, Any]
    data: Dict[str, Any] = field(repr=False)
    #: The version the case was read from (``support@v3``).
    version: Optional[Version] = field(default=None, repr=False, compare=False)

    @classmethod
    def of(cls, data: Dict[str, Any], version: Optional[Version] = None) -> "Case":
        return cls(
            id=str(data.get("id", "")),
            input=data.get("input"),
            expected=data.get("expected"),
            labels=list(data.get("labels") or []),
            metadata=dict(data.get("metadata") or {}),
            data=data,
            version=version,
        )


def _split(spec: str) -> Tuple[str, str]:
    name, _, reference = spec.rpartition("@")
    if not name:
        return spec, "latest"
    return name, reference or "latest"


class Dataset:
    """A dataset version (pinned when made) and the cases ``where`` selects, read a page at a time.

    ``for case in ds`` walks the cases in the version's order; ``len(ds)`` counts them;
    ``ds.to_pandas()`` and ``ds.to_hf()`` make a table of them.
    """

    def __init__(self, spec: str, where: Optional[str], backend: Backend, page_size: int = PAGE_SIZE) -> None:
        self.name, reference = _split(spec)
        self.where = where
        self.page_size = page_size
        self._backend = backend
        if isinstance(backend, Server):
            v = backend.get(backend.dataset_path(self.name, f"/versions/{_backend.quote(reference)}"))
        else:
            v = json.loads(_backend.command(backend, ["show", f"{self.name}@{reference}", "--format", "json"]))
        self.version = Version(self.name, int(v["number"]), str(v["id"]), int(v["cases"]))
        self._count: Optional[int] = None
        if where is not None:
            # A bad filter is refused here, where it was given, not in the middle of a loop.
            self._count = self._counted()

    def _counted(self) -> int:
        backend = self._backend
        if isinstance(backend, Server):
            path = backend.dataset_path(self.name, f"/versions/v{self.version.number}/count")
            return int(backend.get(path, [("where", self.where)])["count"])
        args = ["cases", str(self.version), "--count", "--format", "json"]
        if self.where is not None:
            args += ["--where", self.where]
        return int(json.loads(_backend.command(backend, args))["count"])

    def __len__(self) -> int:
        if self._count is None:
            self._count = self.version.cases if self.where is None else self._counted()
        return self._count

    def pages(self) -> Iterator[List[Case]]:
        """The selected cases, a page at a time (a server's pages by cursor; the store's in chunks)."""
        backend = self._backend
        if isinstance(backend, Server):
            path = backend.dataset_path(self.name, f"/versions/v{self.version.number}/cases")
            cursor: Optional[str] = None
            while True:
                page = backend.get(path, [("limit", self.page_size), ("where", self.where), ("cursor", cursor)])
                yield [Case.of(c, self.version) for c in page["cases"]]
                cursor = page.get("next_cursor")
                if not cursor:
                    return
        args = ["export", str(self.version), "--to", "casebook", "--quiet"]
        if self.where is not None:
            args += ["--where", self.where]
        chunk: List[Case] = []
        for line in _backend.lines(backend, args):
            chunk.append(Case.of(json.loads(line), self.version))
            if len(chunk) >= self.page_size:
                yield chunk
                chunk = []
        if chunk:
            yield chunk

    def __iter__(self) -> Iterator[Case]:
        for page in self.pages():
            yield from page

    def rows(self) -> Iterator[Dict[str, Any]]:
        """One flat row per case: ``id``, ``input``, ``expected``, ``labels``, ``metadata``."""
        for case in self:
            yield {"id": case.id, "input": case.input, "expected": case.expected, "labels": case.labels, "metadata": case.metadata}

    def to_pandas(self) -> Any:
        """The cases as a ``pandas.DataFrame``, one row per case (needs ``pandas``)."""
        try:
            import pandas
        except ImportError:
            raise MissingDependency("pandas", "Dataset.to_pandas()") from None
        return pandas.DataFrame(list(self.rows()), columns=["id", "input", "expected", "labels", "metadata"])

    def to_hf(self) -> Any:
        """The cases as a Hugging Face ``datasets.Dataset`` (needs ``datasets``). Nested values
        (inputs that are conversations, expectations, metadata) are JSON text, as their shapes
        differ from case to case."""
        try:
            import datasets
        except ImportError:
            raise MissingDependency("datasets", "Dataset.to_hf()") from None

        def plain(value: Any) -> Any:
            return value if isinstance(value, str) or value is None else json.dumps(value)

        columns: Dict[str, List[Any]] = {"id": [], "input": [], "expected": [], "labels": [], "metadata": []}
        for row in self.rows():
            columns["id"].append(row["id"])
            columns["input"].append(plain(row["input"]))
            columns["expected"].append(plain(row["expected"]))
            columns["labels"].append(row["labels"])
            columns["metadata"].append(json.dumps(row["metadata"]))
        return datasets.Dataset.from_dict(columns)

    def __repr__(self) -> str:
        where = f", where={self.where!r}" if self.where is not None else ""
        return f"<casebook.Dataset {self.version} ({self.version.id[:12]}){where}>"


def _write_cases(cases: Iterable[Union[Case, Mapping[str, Any]]], folder: str, name: str) -> str:
    path = os.path.join(folder, f"{name.replace('/', '_')}.jsonl")
    with open(path, "w", encoding="utf-8") as out:
        for case in cases:
            data = case.data if isinstance(case, Case) else dict(case)
            out.write(json.dumps(data, ensure_ascii=False) + "\n")
    return path


def push(
    name: str,
    path_or_cases: Union[str, "os.PathLike[str]", Iterable[Union[Case, Mapping[str, Any]]]],
    message: Optional[str] = None,
    backend: Optional[Backend] = None,
) -> Version:
    """Makes a file's cases (or the cases given, as dicts or :class:`Case`) the next version of
    dataset ``name``, on the server (``casebook push``) or in the store (``casebook import``)."""
    backend = backend or _backend.resolve()
    with tempfile.TemporaryDirectory(prefix="casebook-push-") as folder:
        if isinstance(path_or_cases, (str, os.PathLike)):
            path = os.fspath(path_or_cases)
        else:
            path = _write_cases(path_or_cases, folder, name)
        if isinstance(backend, Server):
            args = ["push", path, "--dataset", name, "--format", "json", "--quiet"]
        else:
            args = ["import", path, "--dataset", name, "--format", "json", "--quiet"]
        if message is not None:
            args += ["--message", message]
        answer = json.loads(_backend.command(backend, args))
    v = answer.get("version", answer)
    return Version(name, int(v["number"]), str(v["id"]), int(v["cases"]))


def pull(spec: str, path: Union[str, "os.PathLike[str]"], format: Optional[str] = None, backend: Optional[Backend] = None) -> Path:
    """Writes version ``spec`` (``NAME@REF``) of a dataset to the file ``path`` (its format by
    ``format``, else the dataset's own, as ``casebook pull`` and ``export`` choose); returns the path."""
    backend = backend or _backend.resolve()
    path = os.fspath(path)
    if isinstance(backend, Server):
        args = ["pull", "--dataset", spec, "--output", path, "--quiet"]
    else:
        args = ["export", spec, "--output", path, "--to", format or "casebook", "--quiet", "--overwrite"]
    if format is not None and isinstance(backend, Server):
        args += ["--to", format]
    _backend.command(backend, args)
    return Path(path)


@dataclass
class Summary:
    """What a finished run found (the run's summary, as ``casebook results --format json`` prints it)."""

    run_id: str
    results: int
    passed: int
    failed: int
    errors: int
    pass_rate: Optional[float]
    threshold_met: bool
    data: Dict[str, Any] = field(repr=False)


class Run:
    """A run being recorded from the user's own loop: ``with casebook.run(...) as run:`` then
    ``run.log(case, output=..., scores=...)`` per case.

    Results are kept as ``casebook run`` keeps them (in the store, or on the server): a run id,
    the dataset version and its content id, one result per case run. The run is finished when the
    ``with`` block ends normally; if it raises (or the process dies), the results logged so far
    are kept whole and the run is left unfinished, which ``resume=True`` goes on with.
    """

    def __init__(
        self,
        dataset: str,
        name: str,
        resume: bool = False,
        threshold: float = 1.0,
        backend: Optional[Backend] = None,
    ) -> None:
        self.name = name
        self._backend = backend or _backend.resolve()
        args = ["record", dataset, "--experiment", name, "--threshold", str(threshold)]
        if resume:
            args.append("--resume")
        if isinstance(self._backend, Local):
            args += self._backend.args()
        self._stderr = tempfile.TemporaryFile(mode="w+", encoding="utf-8")
        self._process = subprocess.Popen(
            [_backend.binary(), *args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
            text=True,
            env=self._backend.env(),
        )
        first = self._read()
        if first is None:
            raise self._failed()
        self.id: str = first["run_id"]
        self.version = Version(_split(dataset)[0], int(first["version"]), str(first["version_id"]), int(first["cases"]))
        #: The (case id, run number) pairs the run has results of (those of a resumed run, then each logged).
        self.done: Set[Tuple[str, int]] = {(c, int(r)) for c, r in first.get("done", [])}
        #: Where the run is kept, as the command says it.
        self.kept: str = first.get("kept", "")
        self.summary: Optional[Summary] = None

    def _read(self) -> Optional[Dict[str, Any]]:
        assert self._process.stdout is not None
        line = self._process.stdout.readline()
        return json.loads(line) if line else None

    def _failed(self) -> CommandError:
        code = self._process.wait()
        self._stderr.seek(0)
        return CommandError("record", self._stderr.read(), code, self._backend.describe())

    def log(
        self,
        case: Union[Case, str],
        output: Any = None,
        scores: Optional[Mapping[str, Union[float, bool]]] = None,
        trajectory: Optional[List[Dict[str, Any]]] = None,
        error: Optional[str] = None,
        passed: Optional[bool] = None,
        run: int = 0,
        millis: int = 0,
    ) -> None:
        """Records one result: the ``case`` (or its id), the agent's ``output``, ``scores`` by
        name (0..1, or ``True``/``False``; a number passes at 0.5 or more), its ``trajectory``
        (steps as casebook records them: ``{"type": "message", "role", "content"}``,
        ``{"type": "tool_call", "name", "arguments", "result"}``…), or the ``error`` that stopped
        it. ``passed`` overrides the verdict of the scores; ``run`` numbers repeats of a case.
        A result the run cannot take raises :class:`RecordError` and is not kept."""
        if self._process.stdin is None or self._process.stdin.closed:
            raise RecordError(f"run {getattr(self, 'id', '')} is closed: log results inside its `with` block")
        case_id = case.id if isinstance(case, Case) else str(case)
        line: Dict[str, Any] = {"case": case_id, "run": run, "output": output, "millis": millis}
        if scores:
            line["scores"] = dict(scores)
        if trajectory:
            line["trajectory"] = trajectory
        if error is not None:
            line["error"] = str(error)
        if passed is not None:
            line["pass"] = bool(passed)
        try:
            text = json.dumps(line, ensure_ascii=False, allow_nan=False)
        except (TypeError, ValueError) as err:
            raise RecordError(f"the result of case `{case_id}` is not JSON: {err}") from None
        try:
            self._process.stdin.write(text + "\n")
            self._process.stdin.flush()
        except BrokenPipeError:
            raise self._failed() from None
        reply = self._read()
        if reply is None:
            raise self._failed()
        if "error" in reply:
            raise RecordError(f"run {self.id}: {reply['error']}")
        self.done.add((case_id, run))

    def finish(self) -> Summary:
        """Finishes the run (the ``with`` block does) and returns its summary."""
        assert self._process.stdin is not None
        self._process.stdin.write('{"finish": true}\n')
        self._process.stdin.close()
        data = self._read()
        if data is None or self._process.wait() != 0:
            raise self._failed()
        totals = data.get("totals", {})
        self.summary = Summary(
            run_id=self.id,
            results=int(totals.get("results", 0)),
            passed=int(totals.get("passed", 0)),
            failed=int(totals.get("failed", 0)),
            errors=int(totals.get("errors", 0)),
            pass_rate=totals.get("pass_rate"),
            threshold_met=bool(data.get("threshold_met")),
            data=data,
        )
        self._stderr.close()
        return self.summary

    def abandon(self) -> None:
        """Stops without finishing: what was logged is kept, the run stays unfinished."""
        if self._process.stdin is not None and not self._process.stdin.closed:
            self._process.stdin.close()
        self._process.wait()
        self._stderr.close()

    def __enter__(self) -> "Run":
        return self

    def __exit__(
        self,
        kind: Optional[Type[BaseException]],
        value: Optional[BaseException],
        traceback: Optional[TracebackType],
    ) -> None:
        if kind is None:
            self.finish()
        else:
            self.abandon()

    def __repr__(self) -> str:
        return f"<casebook.Run {self.id} `{self.name}` of {self.version}>"
