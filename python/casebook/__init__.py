"""casebook from Python: datasets read a page at a time, ``push``/``pull``, runs recorded from
your own loop, and a pytest plugin.

The same calls work against a casebook server (``CASEBOOK_URL`` with ``CASEBOOK_TOKEN``, or what
``casebook login`` saved) or the store here (``CASEBOOK_STORE``, else the nearest ``.casebook/``),
through the ``casebook`` command this package installs::

    import casebook

    ds = casebook.dataset("support@prod", where='labels contains "billing"')
    print(ds.version.number, ds.version.id, len(ds))
    with casebook.run("support@prod", name="my-agent") as run:
        for case in ds:
            run.log(case, output=my_agent(case.input), scores={"exact": 1.0})
"""

from __future__ import annotations

from typing import Any, Callable, Optional, TypeVar

from . import _backend
from ._client import PAGE_SIZE, Case, Dataset, Run, Summary, Version, pull, push
from .errors import (
    AuthError,
    BadRequest,
    CommandError,
    Error,
    MissingDependency,
    NotFound,
    RecordError,
    ServerError,
    Unreachable,
)

try:
    from importlib.metadata import PackageNotFoundError, version as _version

    __version__ = _version("casebook")
except Exception:  # pragma: no cover - an uninstalled source tree
    __version__ = "0+unknown"

__all__ = [
    "AuthError",
    "BadRequest",
    "Case",
    "CommandError",
    "Dataset",
    "Error",
    "MissingDependency",
    "NotFound",
    "RecordError",
    "Run",
    "ServerError",
    "Summary",
    "Unreachable",
    "Version",
    "cases",
    "dataset",
    "pull",
    "push",
    "run",
]

F = TypeVar("F", bound=Callable[..., Any])


def dataset(
    spec: str,
    where: Optional[str] = None,
    *,
    url: Optional[str] = None,
    token: Optional[str] = None,
    store: Optional[str] = None,
    page_size: int = PAGE_SIZE,
) -> Dataset:
    """The version ``spec`` (``NAME@REF``: ``support@prod``, ``support@v3``; ``NAME`` alone is the
    latest) of a dataset, pinned now, with the cases the filter ``where`` selects (``casebook help
    filter``). A missing dataset or a bad filter raises a :class:`casebook.Error` here."""
    return Dataset(spec, where, _backend.resolve(url, token, store), page_size)


def run(
    spec: str,
    name: str,
    *,
    resume: bool = False,
    threshold: float = 1.0,
    url: Optional[str] = None,
    token: Optional[str] = None,
    store: Optional[str] = None,
) -> Run:
    """A run named ``name`` of dataset version ``spec``, recorded as ``casebook run`` records its
    runs; use it as ``with casebook.run(...) as run:``. ``resume=True`` goes on with the latest
    unfinished run of that name and version (``run.done`` has what it holds)."""
    return Run(spec, name, resume=resume, threshold=threshold, backend=_backend.resolve(url, token, store))


def cases(spec: str, where: Optional[str] = None, **options: Any) -> Callable[[F], F]:
    """A pytest decorator: runs the test once per case of ``spec`` that ``where`` selects, the case
    given as the test's ``case`` argument and its id as the test id. With ``pytest
    --casebook-run NAME`` the outcomes are kept as a run of that version."""
    import pytest

    ds = dataset(spec, where, **options)
    selected = list(ds)
    return pytest.mark.parametrize("case", selected, ids=[c.id for c in selected])  # type: ignore[no-any-return]
