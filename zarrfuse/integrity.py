"""``zarrfuse verify SOURCE``: decode every stored chunk with zarr, report the ones that fail.

Stored chunks are the listed keys that decode strictly as chunk keys of the array's encoding
and lie in its grid (shards, if sharded); temp files and other keys are skipped. A
``concat-parts`` chunk is listed once, so a missing or mis-sized part fails with the reason.
Each is fetched through zarr's store and decoded by the array's whole codec chain
(checksums, every inner chunk of a shard) with the decoder the mount's write check uses
(``api.chunk_decoding``), which measures it first: a decompression bomb is a finding, never
allocated. A chunk of the right length whose codecs carry no checksum cannot be told from a
good one. For a group, every array below it is checked.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from typing import Any

from tqdm import tqdm
from zarr.abc.store import Store
from zarr.storage import StorePath

from zarrfuse.api.arrays import open_array, open_store_path, read_node_metadata
from zarrfuse.api.chunk_decoding import SyncChunkDecoder
from zarrfuse.api.nodes import V2_NAMES, V3_NAME
from zarrfuse.errors import ZarrFuseError
from zarrfuse.extensions.chunk_keys import decode_chunk_key, encode_chunk_key, parse_encoding
from zarrfuse.progress import progress_bar, restart
from zarrfuse.storage import backend_for
from zarrfuse.zarr_compat import default_buffer_prototype, sync

__all__ = ["Failure", "Report", "find_arrays", "main", "stored_chunks", "verify"]


@dataclass(frozen=True)
class Failure:
    """One chunk (or array) that did not decode, and why."""

    where: str
    reason: str

    def __str__(self) -> str:
        return f"FAILED {self.where}: {self.reason}"


@dataclass
class Report:
    arrays: int = 0
    chunks: int = 0
    failures: list[Failure] = field(default_factory=list)


def _join(*parts: str) -> str:
    return "/".join(p.strip("/") for p in parts if p.strip("/"))


def _reason(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def find_arrays(store_path: StorePath) -> Iterator[tuple[str, dict[str, Any] | None, str | None]]:
    """``(path, metadata, error)`` of the array at ``store_path`` or of every array below the
    group there; ``error`` names a child that could not be read."""
    metadata = sync(read_node_metadata(store_path))
    if metadata["node_type"] == "array":
        yield store_path.path, metadata, None
        return
    store = store_path.store
    prefix = f"{store_path.path}/" if store_path.path else ""

    async def names() -> list[str]:
        return sorted([n async for n in store.list_dir(prefix)])

    for name in sync(names()):
        if name in (V3_NAME, *V2_NAMES):
            continue
        child = StorePath(store, _join(store_path.path, name))
        if not any(sync(store.exists(f"{child.path}/{doc}"))
                   for doc in (V3_NAME, ".zarray", ".zgroup")):
            continue
        try:
            yield from find_arrays(child)
        except ZarrFuseError as e:
            yield child.path, None, str(e)


def stored_chunks(store: Store, path: str, metadata: dict[str, Any]) -> list[tuple[int, ...]]:
    """Grid coordinates of the chunks (shards) stored for the array at ``path``, sorted."""
    encoding = parse_encoding(metadata.get("chunk_key_encoding", "default"))
    shape = tuple(metadata["shape"])
    chunk_shape = tuple(metadata["chunk_grid"]["configuration"]["chunk_shape"])
    grid = tuple(math.ceil(s / c) if c else 0 for s, c in zip(shape, chunk_shape, strict=True))
    prefix = f"{path}/" if path else ""

    async def keys() -> list[str]:
        return [k async for k in store.list_prefix(prefix)]

    found = set()
    for key in sync(keys()):
        relative = key[len(prefix) :]
        if relative in (V3_NAME, *V2_NAMES):
            continue
        try:
            coords = decode_chunk_key(encoding, relative, len(shape))
        except ValueError:
            continue  # not a chunk key: a temp file, a part file, a stray key
        if all(c < n for c, n in zip(coords, grid, strict=True)):
            found.add(coords)
    return sorted(found)


def verify(
    source: str | StorePath,
    *,
    storage_options: dict[str, Any] | None = None,
    jobs: int = 8,
    progress: tqdm | None = None,
) -> Report:
    """Decode every stored chunk under ``source``; a Report of what failed.

    Raises SourceError/ConfigurationError if ``source`` itself cannot be opened.
    """
    report = Report()
    progress = progress if progress is not None else progress_bar(enabled=False)
    root = source if isinstance(source, StorePath) else sync(
        open_store_path(source, mode="r", storage_options=storage_options))

    def found(failure: Failure) -> None:
        report.failures.append(failure)
        if not progress.disable:  # shown as it comes, above the bar; else sorted at the end
            progress.write(str(failure))

    try:
        work: list[tuple[str, StorePath, SyncChunkDecoder]] = []
        progress.set_description_str("listing chunks")
        for path, metadata, error in find_arrays(root):
            shown = path[len(root.path) :].strip("/") if root.path else path
            if metadata is None:
                found(Failure(shown or ".", error or "unreadable"))
                continue
            report.arrays += 1
            try:
                array = open_array(StorePath(root.store, path))
                decoder = SyncChunkDecoder.for_stored_objects(array.metadata)
                encoding = parse_encoding(metadata.get("chunk_key_encoding", "default"))
                coords_list = stored_chunks(array.store_path.store, path, metadata)
            except Exception as e:  # noqa: BLE001  (an unreadable array is a finding, too)
                found(Failure(shown or ".", _reason(e)))
                continue
            for coords in coords_list:
                key = _join(shown, encode_chunk_key(encoding, coords))
                stored = array.store_path / array.metadata.encode_chunk_key(coords)
                work.append((key, stored, decoder))
            progress.update(len(coords_list))
        report.chunks = len(work)
        restart(progress, len(work), "verifying")

        def check(item: tuple[str, StorePath, SyncChunkDecoder]) -> Failure | None:
            key, stored, decoder = item
            try:
                value = sync(stored.get(prototype=default_buffer_prototype()))
                if value is not None:  # None: removed since the listing
                    decoder.decode(value.to_bytes())
            except Exception as e:  # noqa: BLE001
                return Failure(key, _reason(e))
            return None

        with ThreadPoolExecutor(max_workers=jobs, thread_name_prefix="zarrfuse-verify") as pool:
            futures = [pool.submit(check, item) for item in work]
            for future in as_completed(futures):
                failure = future.result()
                if failure is not None:
                    found(failure)
                progress.update()
        progress.refresh()  # the last count, drawn once before the bar is erased
    finally:
        root.store.close()
    report.failures.sort(key=lambda f: f.where)
    return report


def repair(source: str, *, storage_options: dict[str, Any] | None = None) -> tuple[int, int]:
    """Finish or undo the multi-part commits a crashed writable mount left, as the next
    writable mount would: (rolled forward, rolled back)."""
    store_path = sync(open_store_path(source, mode="r+", storage_options=storage_options))
    backend = backend_for(store_path.store, path=store_path.path)
    try:
        return backend.recover()
    finally:
        backend.close()


def main(
    source: str, *, storage_options: dict[str, Any] | None = None, jobs: int = 8,
    repair_commits: bool = False,
) -> int:
    """The ``zarrfuse verify`` command: 0 if every chunk decodes, 1 otherwise."""
    if repair_commits:
        forward, back = repair(source, storage_options=storage_options)
        print(f"interrupted commits: {forward} finished, {back} undone")
    with progress_bar(unit="chunk", description="listing chunks") as progress:
        shown_live = not progress.disable
        report = verify(source, storage_options=storage_options, jobs=jobs, progress=progress)
    if not shown_live:
        for failure in report.failures:
            print(failure)
    arrays = f"{report.arrays} array{'s' if report.arrays != 1 else ''}"
    print(f"verified {report.chunks} chunks of {arrays}: {len(report.failures)} failed")
    return 1 if report.failures else 0
