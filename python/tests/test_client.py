"""The Python client against a real server (SQLite and PostgreSQL) and a local store: datasets
read by pages, push and pull, runs from the user's loop as `casebook results` shows them, and
errors as `casebook.Error`s that name the server and its reason."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

import casebook
from casebook import _backend

from conftest import CASES, Server


def test_a_pushed_dataset_is_read_back_by_pages_pinned_and_filtered(server: Server) -> None:
    pushed = casebook.push("support", CASES, message="five cases")
    assert (pushed.number, pushed.cases) == (1, 5)
    ds = casebook.dataset("support@latest", page_size=2)
    assert ds.version == casebook.Version("support", 1, pushed.id, 5)
    # Three pages of 2, 2 and 1 by cursor, in the version's order.
    assert [len(p) for p in ds.pages()] == [2, 2, 1]
    assert [c.id for c in ds] == ["c0", "c1", "c2", "c3", "c4"]
    assert len(ds) == 5
    first = next(iter(ds))
    assert (first.input, first.expected, first.labels, first.metadata) == (
        "question 0", {"output": "answer 0"}, ["billing"], {"n": 0})
    billing = casebook.dataset("support", where='labels contains "billing"')
    assert [c.id for c in billing] == ["c0", "c2", "c4"] and len(billing) == 3
    # A version pinned stays what it was when the next one comes.
    casebook.push("support", CASES[:2], message="fewer")
    assert len(ds) == 5 and [c.id for c in ds][-1] == "c4"
    assert casebook.dataset("support").version.number == 2


def test_pull_writes_the_version_to_a_file(server: Server, tmp_path: Path) -> None:
    casebook.push("support", CASES)
    out = casebook.pull("support@v1", tmp_path / "support.jsonl")
    ids = [json.loads(line)["id"] for line in out.read_text().splitlines()]
    assert ids == ["c0", "c1", "c2", "c3", "c4"]


def test_a_run_from_a_loop_is_a_casebook_run(server: Server) -> None:
    version = casebook.push("support", CASES)
    with casebook.run("support@v1", name="my-agent") as run:
        for case in casebook.dataset("support@v1"):
            run.log(case, output=case.input.upper(), scores={"exact": case.id != "c3"},
                    trajectory=[{"type": "message", "role": "assistant", "content": "hi"}])
    assert run.summary is not None
    assert (run.summary.results, run.summary.passed, run.summary.failed) == (5, 4, 1)
    shown = json.loads(server.cli("results", run.id, "--format", "json").stdout)
    assert shown["meta"]["run_id"] == run.id
    assert shown["meta"]["dataset"] == "support@v1"
    assert shown["meta"]["dataset_version_id"] == version.id
    assert shown["totals"]["failed"] == 1
    # Per-case results, the failing case named, as `casebook run`'s are.
    lines = [json.loads(l) for l in server.cli("results", run.id, "--format", "jsonl").stdout.splitlines()]
    assert sorted(r["case_id"] for r in lines) == ["c0", "c1", "c2", "c3", "c4"]
    assert [r["case_id"] for r in lines if r.get("pass") is False] == ["c3"]
    # A second run compares with the first, case by case.
    with casebook.run("support@v1", name="my-agent-2") as second:
        for case in casebook.dataset("support@v1"):
            second.log(case, output="x", scores={"exact": True})
    compared = server.cli("compare", run.id, second.id).stdout
    assert "c3" in compared


def test_a_crash_leaves_the_run_unfinished_and_resumable(server: Server) -> None:
    casebook.push("support", CASES)
    with pytest.raises(RuntimeError):
        with casebook.run("support", name="flaky") as run:
            run.log("c0", output="a", scores={"exact": 1.0})
            run.log("c1", output="b", scores={"exact": 0.2})
            raise RuntimeError("the agent fell over")
    listed = [json.loads(l) for l in server.cli("results", "--list", "--format", "json").stdout.splitlines()]
    assert [(r["id"], r["finished"]) for r in listed] == [(run.id, None)]
    with casebook.run("support", name="flaky", resume=True) as again:
        assert again.id == run.id
        assert again.done == {("c0", 0), ("c1", 0)}
        for case in casebook.dataset("support"):
            if (case.id, 0) not in again.done:
                again.log(case, output="ok", scores={"exact": 1.0})
    assert again.summary is not None
    assert (again.summary.results, again.summary.passed, again.summary.failed) == (5, 4, 1)


def test_errors_name_the_server_and_its_reason(server: Server, monkeypatch: pytest.MonkeyPatch) -> None:
    casebook.push("support", CASES)
    with pytest.raises(casebook.NotFound) as missing:
        casebook.dataset("nothing-here")
    assert server.url in str(missing.value) and "nothing-here" in str(missing.value)
    with pytest.raises(casebook.BadRequest) as bad:
        casebook.dataset("support", where="labels ==")
    assert server.url in str(bad.value) and "found the end of the filter" in str(bad.value)
    with casebook.run("support", name="typos") as run:
        with pytest.raises(casebook.RecordError, match="no case `nope`"):
            run.log("nope", output="x")
        with pytest.raises(casebook.RecordError, match="from 0 to 1"):
            run.log("c0", output="x", scores={"exact": 7})
        run.log("c0", output="x", scores={"exact": 1})
    assert run.summary is not None and run.summary.results == 1
    # A pushed version is refused to a key that cannot write: the command's error, naming the server.
    monkeypatch.setenv("CASEBOOK_TOKEN", "cb_wrong")
    with pytest.raises(casebook.AuthError) as refused:
        casebook.dataset("support")
    assert server.url in str(refused.value) and "refused the key" in str(refused.value)
    with pytest.raises(casebook.AuthError):
        casebook.push("support", CASES)
    monkeypatch.setenv("CASEBOOK_TOKEN", server.token)
    with pytest.raises(casebook.CommandError) as unknown:
        casebook.run("nothing-here", name="x")
    assert server.url in str(unknown.value) and "nothing-here" in str(unknown.value)
    monkeypatch.setenv("CASEBOOK_TOKEN", "cb_wrong")
    monkeypatch.setenv("CASEBOOK_URL", "http://127.0.0.1:9")
    with pytest.raises(casebook.Unreachable, match="127.0.0.1:9"):
        casebook.dataset("support")


def test_the_key_casebook_login_saved_is_used(server: Server, monkeypatch: pytest.MonkeyPatch) -> None:
    casebook.push("support", CASES)
    monkeypatch.delenv("CASEBOOK_URL")
    monkeypatch.delenv("CASEBOOK_TOKEN")
    # What `casebook login` writes (the file the command reads).
    saved = server.home / ".config" / "casebook" / "credentials.json"
    saved.parent.mkdir(parents=True)
    saved.write_text(json.dumps({"url": server.url, "token": server.token}))
    assert len(casebook.dataset("support")) == 5


def test_tables_need_their_package(server: Server) -> None:
    casebook.push("support", CASES)
    ds = casebook.dataset("support", where='labels contains "billing"')
    try:
        import pandas  # noqa: F401
    except ImportError:
        with pytest.raises(casebook.MissingDependency, match="pip install pandas"):
            ds.to_pandas()
    else:
        frame = ds.to_pandas()
        assert list(frame["id"]) == ["c0", "c2", "c4"]
    try:
        import datasets  # noqa: F401
    except ImportError:
        with pytest.raises(casebook.MissingDependency, match="pip install datasets"):
            ds.to_hf()
    else:
        assert ds.to_hf()["id"] == ["c0", "c2", "c4"]


def test_the_local_store_without_a_server(store: Path, tmp_path: Path) -> None:
    pushed = casebook.push("support", CASES, message="local")
    assert (pushed.number, pushed.cases) == (1, 5)
    ds = casebook.dataset("support@v1", where='labels contains "shipping"', page_size=1)
    assert ds.version.id == pushed.id
    assert [len(p) for p in ds.pages()] == [1, 1]
    assert [c.id for c in ds] == ["c1", "c3"] and len(ds) == 2
    with casebook.run("support@v1", name="local-loop") as run:
        for case in ds:
            run.log(case, output="x", passed=case.id == "c1")
    assert run.summary is not None and (run.summary.passed, run.summary.failed) == (1, 1)
    shown = subprocess.run([_backend.binary(), "results", run.id, "--format", "json"], capture_output=True, text=True, check=True)
    assert json.loads(shown.stdout)["meta"]["dataset_version_id"] == pushed.id
    out = casebook.pull("support@v1", tmp_path / "out.jsonl")
    assert len(out.read_text().splitlines()) == 5
    with pytest.raises(casebook.CommandError, match="no dataset named `nope`"):
        casebook.dataset("nope")
    with pytest.raises(casebook.CommandError, match="invalid `--where`"):
        casebook.dataset("support", where="labels ==")


def test_to_hf_is_a_datasets_dataset_with_the_cases_columns_and_types(server: Server) -> None:
    datasets = pytest.importorskip("datasets", reason="scripts/test.sh installs `datasets` into the wheel's environment")
    conversation = [{"role": "user", "content": "où est ma commande ?"}, {"role": "assistant", "content": "en route"}]
    cases = CASES[:2] + [
        # Shapes that differ from case to case: a conversation, no expectations, nested metadata.
        {"id": "chat", "input": conversation, "labels": [], "metadata": {"tags": ["a", 2, None]}},
    ]
    casebook.push("support", cases)
    hf = casebook.dataset("support").to_hf()
    assert isinstance(hf, datasets.Dataset)
    assert hf.num_rows == 3
    assert hf.column_names == ["id", "input", "expected", "labels", "metadata"]
    features = hf.features
    assert {name: features[name].dtype for name in ("id", "input", "expected", "metadata")} == {
        "id": "string", "input": "string", "expected": "string", "metadata": "string"}
    # A list of strings, read as one by Hugging Face (`List` in datasets 4, `Sequence` before).
    assert getattr(features["labels"], "feature", None) == datasets.Value("string"), features["labels"]
    assert hf["id"] == ["c0", "c1", "chat"]
    assert hf[0]["input"] == "question 0" and json.loads(hf[0]["expected"]) == {"output": "answer 0"}
    assert hf[0]["labels"] == ["billing"] and json.loads(hf[0]["metadata"]) == {"n": 0}
    # Nested values are JSON text, whole.
    assert json.loads(hf[2]["input"]) == conversation
    assert hf[2]["expected"] is None and hf[2]["labels"] == []
    assert json.loads(hf[2]["metadata"]) == {"tags": ["a", 2, None]}
    # The filter applies as to pages.
    assert casebook.dataset("support", where='labels contains "billing"').to_hf()["id"] == ["c0"]
