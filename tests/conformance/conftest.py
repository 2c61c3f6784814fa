"""Session fixtures of the conformance tier: data written once, the plugin-free venv built
once, and one read-only mount per data set and layout, shared by every test that reads it."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager, ExitStack
from pathlib import Path

import pytest

from tests.conformance.plain_zarr import PlainZarr, build_plain_venv
from tests.conformance.readers import ReadFunction, read_functions
from tests.conformance.writers import WRITERS, DataSet
from tests.mounting import mounted

LAYOUT_ARGS = {
    "fanout": [],  # the default view: what every mount shows today
    "source": ["--layout", "source"],  # the array's own keys and documents (lead, issue 15)
}


class DataSets:
    """Each data set written on first use, once per session."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.written: dict[str, DataSet] = {}

    def __getitem__(self, name: str) -> DataSet:
        if name not in self.written:
            self.written[name] = WRITERS[name](self.root / name)
        return self.written[name]


class Mounts:
    """One read-only mount per (data set, layout), made on first use and kept to the end of
    the session. A mount that fails fails every test that asks for it, with its stderr."""

    def __init__(self, root: Path, datasets: DataSets, stack: ExitStack) -> None:
        self.root, self.datasets, self.stack = root, datasets, stack
        self.live: dict[tuple[str, str], Path] = {}
        self.failed: dict[tuple[str, str], str] = {}

    def prepare(self, keys: set[tuple[str, str]]) -> None:
        """Mount these at once, a few at a time: a mount's start is mostly waiting (seconds
        on a loaded machine, little CPU), so they overlap well."""
        todo = sorted(k for k in keys if k not in self.live and k not in self.failed)
        for name, _ in todo:
            self.datasets[name]  # written here, in this thread, before the mounts start
        with ThreadPoolExecutor(max_workers=6) as pool:
            entered = list(zip(todo, pool.map(self._enter, todo), strict=True))
        for key, (context, mnt, error) in entered:
            if context is not None:
                self.stack.push(context.__exit__)
                self.live[key] = mnt
            else:
                self.failed[key] = error

    def _enter(self, key: tuple[str, str]) -> tuple[AbstractContextManager | None, Path, str]:
        name, layout = key
        context = mounted(self.datasets[name].root, self.root / f"{name}-{layout}",
                          "--read-only", *LAYOUT_ARGS[layout])
        try:
            return context, context.__enter__(), ""
        except (AssertionError, pytest.fail.Exception) as e:  # it unmounted itself
            return None, Path(), str(e)

    def __call__(self, name: str, layout: str) -> Path:
        key = (name, layout)
        self.prepare({key})
        if key in self.failed:
            pytest.fail(f"mounting {name} with layout {layout} failed: {self.failed[key]}")
        return self.live[key]


@pytest.fixture(scope="session")
def datasets(tmp_path_factory: pytest.TempPathFactory) -> DataSets:
    return DataSets(tmp_path_factory.mktemp("written"))


@pytest.fixture(scope="session")
def plain_python() -> Path:
    """The plugin-free venv's interpreter; the build time (cold) goes to stderr."""
    python, seconds = build_plain_venv()
    if seconds:
        print(f"built the plugin-free zarr venv in {seconds:.1f} s", file=sys.stderr)
    return python


@pytest.fixture(scope="session")
def read_with(plain_python: Path) -> Iterator[dict[str, ReadFunction]]:
    """Each reader's read function by name (the plain zarr process lives for the session)."""
    server = PlainZarr(plain_python)
    try:
        yield read_functions(server)
    finally:
        server.close()


@pytest.fixture(scope="session")
def mounts(tmp_path_factory: pytest.TempPathFactory, datasets: DataSets) -> Iterator[Mounts]:
    with ExitStack() as stack:
        yield Mounts(tmp_path_factory.mktemp("mnt"), datasets, stack)
