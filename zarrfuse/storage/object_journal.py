"""Multi-part commits on an object store (S3) that a crash leaves old or new, never mixed:
temps PUT under ``.zarrfuse-commits/``, a commit record, then server-side copies over the
keys. How it works and why: docs/writing.md, "Journals".
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
import uuid
from collections.abc import Iterator, Sequence
from typing import Protocol

from zarrfuse.storage.base import Stat
from zarrfuse.storage.commit_finishing import Finishing
from zarrfuse.storage.store_requests import StoreRequests

__all__ = ["JOURNAL_DIR", "STALE_AFTER", "ObjectJournal", "Objects"]

log = logging.getLogger(__name__)

JOURNAL_DIR = ".zarrfuse-commits"
"""The records' prefix, as on local stores; empty between commits."""

STALE_AFTER = 600.0
"""Seconds after its newest object an uncommitted transaction counts as a dead mount's."""


class Objects(Protocol):
    """What the journal needs of an object store (keys relative to the store's root); the
    ``_async`` ones run on ``requests``' loop."""

    requests: StoreRequests

    def write(
        self,
        key: str,
        pieces: Sequence[memoryview],
        *,
        durable: bool = False,
        deadline: float | None = None,
        commit: str | None = None,
    ) -> int: ...

    async def copy_async(self, source: str, key: str) -> None: ...

    async def delete_many_async(self, keys: Sequence[str]) -> None: ...

    async def read_all_async(self, key: str) -> bytes | None: ...

    def read_all(self, key: str) -> bytes | None: ...

    def list_names(self, prefix: str) -> set[str]: ...

    def list_stats(self, prefix: str) -> dict[str, Stat]: ...

    def list_dir(self, prefix: str) -> tuple[dict[str, Stat], list[str]]: ...

    def list_subdirs(self, prefix: str) -> list[str]: ...


class ObjectJournal:
    """The journal of one object store."""

    def __init__(
        self, objects: Objects, name: str, path: str = "", stale_after: float = STALE_AFTER
    ) -> None:
        self._objects = objects
        self._stale_after = stale_after
        self._name = name
        """The store, as log lines name it."""
        self.finishing = Finishing(name, objects.requests)
        """Committed transactions whose copies are still being made (``deadline``)."""
        self._dir = f"{path.strip('/')}/{JOURNAL_DIR}".lstrip("/")
        """The journal's prefix: beside the mounted array or group, so that recovering one
        mount never touches another array's commits in the same bucket."""

    def commit(
        self, parts: Sequence[tuple[str, Sequence[memoryview]]], deadline: float | None = None
    ) -> list[int]:
        """Replace every ``(key, pieces)``; the new times (the copy's: its answer has none).
        ``deadline``: when temps and record must be stored (signed PUTs: a failure reported
        is the truth); once the record is stored, copies not made by then go on in the
        background (``commit_finishing``)."""
        self.finishing.settle([key for key, _ in parts], deadline)
        tx = uuid.uuid4().hex
        copies = [(f"{self._dir}/{tx}/{i}", key) for i, (key, _) in enumerate(parts)]
        try:
            for (temp, _), (_, pieces) in zip(copies, parts, strict=True):
                self._objects.write(temp, pieces, deadline=deadline, commit=tx)
            self._record(tx, copies, deadline)
        except BaseException:
            temps = [temp for temp, _ in copies]
            if deadline is None:
                self._objects.requests.run(self._clean_up(tx, temps))
            else:  # the answer is due now; what is left changes no chunk meanwhile
                self._objects.requests.start(f"clean-up of commit {tx}",
                                             lambda: self._clean_up(tx, temps))
            raise
        if deadline is None:
            self._objects.requests.run(self._finish(tx, copies))
        else:  # committed: never EIO from here on, and the answer is due by the deadline
            sizes = [sum(p.nbytes for p in pieces) for _, pieces in parts]
            shown = {key: (temp, size) for (temp, key), size in zip(copies, sizes, strict=True)}
            self.finishing.run(tx, shown, lambda: self._finish(tx, copies), deadline)
        return [time.time_ns()] * len(parts)

    async def _finish(self, tx: str, copies: Sequence[tuple[str, str]]) -> None:
        """Copy a committed transaction's temps over their keys, then delete it."""
        try:
            await self._copy_all(copies)
        except FileNotFoundError:  # a temp is gone: another mount's recovery finished it?
            if not await self._record_gone(tx):
                raise
            log.info("%s: commit %s was finished by another mount's recovery", self._name, tx)
            return
        await self._delete_all(tx, [temp for temp, _ in copies])

    def recover(self) -> tuple[int, int]:
        """Finish what a crash interrupted: (rolled forward, rolled back); young ones alone."""
        forward = back = young = 0
        run = self._objects.requests.run
        for tx, committed, left, is_young in self._transactions():
            if committed is not None:
                run(self._copy_all([(temp, key) for temp, key in committed if temp in left],
                                   gone_ok=True))
                forward += 1
            elif is_young:
                young += 1
                continue
            else:
                back += 1
            run(self._delete_all(tx, sorted(left)))
        if forward or back:
            log.warning("%s: finished %d commit(s) a crash interrupted and undid %d unfinished "
                        "one(s): every chunk is its old or its new value", self._name,
                        forward, back)
        if young:
            log.info("%s: %d uncommitted transaction(s) younger than %g s left to the mount "
                     "making them (they change no chunk)", self._name, young, self._stale_after)
        return forward, back

    def finished_view(self) -> tuple[dict[str, tuple[str, Stat]], int]:
        """Without changing anything: the temp (and stat) that replaces each committed part,
        and how many transactions are unfinished."""
        finished: dict[str, tuple[str, Stat]] = {}
        transactions = list(self._transactions())
        for _, committed, temps, _ in transactions:
            for temp, key in committed or []:
                found = temps.get(temp)
                if found is not None:  # else copied before the crash
                    finished[key] = (temp, found)
        return finished, len(transactions)

    def _transactions(
        self,
    ) -> Iterator[tuple[str, list[tuple[str, str]] | None, dict[str, Stat], bool]]:
        """Each transaction in the journal: (id, its record if committed, its temps' keys and
        stats, whether its newest object is younger than the stale age)."""
        records, subdirs = self._objects.list_dir(self._dir)  # one LIST: a mount's cost
        now = time.time_ns()
        for tx in sorted({n.split(".", 1)[0] for n in records} | set(subdirs)):
            temps = self._objects.list_stats(f"{self._dir}/{tx}")
            times = [st.mtime_ns for st in temps.values()]
            if f"{tx}.commit" in records:
                times.append(records[f"{tx}.commit"].mtime_ns)
            young = bool(times) and now - max(times) < self._stale_after * 1e9
            committed = self._read_record(tx) if f"{tx}.commit" in records else None
            yield tx, committed, {f"{self._dir}/{tx}/{n}": st for n, st in temps.items()}, young

    # --- steps -------------------------------------------------------------------------------

    def _record(
        self, tx: str, copies: Sequence[tuple[str, str]], deadline: float | None = None
    ) -> None:
        data = json.dumps([list(c) for c in copies]).encode()
        self._objects.write(f"{self._dir}/{tx}.commit", [memoryview(data)], deadline=deadline)

    def _read_record(self, tx: str) -> list[tuple[str, str]] | None:
        data = self._objects.read_all(f"{self._dir}/{tx}.commit")
        if data is None:
            return None
        try:
            return [(str(a), str(b)) for a, b in json.loads(data)]
        except (ValueError, TypeError):
            log.warning("%s: unreadable commit record %s: undone", self._name, tx)
            return None

    async def _clean_up(self, tx: str, temps: Sequence[str]) -> None:
        """Undo a commit that failed before its record was stored."""
        try:
            await self._delete_all(tx, temps)
        except OSError as e:  # the store is failing: the next writable mount undoes it
            log.warning("%s: could not clean up commit %s: %s", self._name, tx, e)

    async def _record_gone(self, tx: str) -> bool:
        """Whether ``tx``'s record is gone, asked a few times over a second: recovery deletes
        the temps and the record in one request, the temps first."""
        for wait in (0.0, 0.25, 0.75):
            await asyncio.sleep(wait)
            if await self._objects.read_all_async(f"{self._dir}/{tx}.commit") is None:
                return True
        return False

    async def _copy_all(self, copies: Sequence[tuple[str, str]], gone_ok: bool = False) -> None:
        """Copy each temp over its key; ``gone_ok``: a temp its owner copied and deleted
        meanwhile is skipped (recovery racing a live owner)."""
        for temp, key in copies:
            try:
                await self._objects.copy_async(temp, key)
            except FileNotFoundError:
                if not gone_ok:
                    raise

    async def _delete_all(self, tx: str, temps: Sequence[str]) -> None:
        """Delete the temps and the record in one request (temps first: any part is harmless)."""
        await self._objects.delete_many_async([*temps, f"{self._dir}/{tx}.commit"])
