"""Multi-part commits on an object store (S3) that a crash leaves old or new, never mixed.

An object store replaces one object atomically (a PUT or a server-side copy) but has no
rename and no multi-object transaction, so a chunk whose parts are replaced one PUT after
another is torn by a daemon killed between two. So a multi-part commit is journalled in
objects under ``.zarrfuse-commits/`` beside the mounted array or group:

1. every part's new bytes are PUT to a temp object ``.zarrfuse-commits/TX/N``;
2. ``TX.commit`` is PUT, naming each temp and its key: the point of no return;
3. the server copies each temp over its key; then the temps and the record are deleted
   (one bulk DELETE).

Temps live under the journal's prefix, not beside their keys, so one LIST finds those a
crash left (no record of intent is needed, and chunk listings never see a temp).
:meth:`ObjectJournal.recover` (a writable mount's start, ``zarrfuse verify --repair``)
rolls a transaction with a ``commit`` record forward (copies the temps still there over
their keys: every chunk new) and one without it back (deletes its temps: every chunk old).
A multi-part commit of N parts costs 2N+1 PUT-class requests and one bulk DELETE, against N
without the journal. A PUT or copy is durable once the store answers it, so ``fsync`` adds
nothing here. Recovery assumes no other writable mount is committing to the same store at
that moment (it would undo that mount's unfinished commit).
"""

from __future__ import annotations

import json
import logging
import time
import uuid
from collections.abc import Sequence
from typing import Protocol

__all__ = ["JOURNAL_DIR", "ObjectJournal", "Objects"]

log = logging.getLogger(__name__)

JOURNAL_DIR = ".zarrfuse-commits"
"""The records' prefix, as on local stores: no object is left under it between commits,
so listings show nothing there."""


class Objects(Protocol):
    """What the journal needs of an object store (keys relative to the store's root)."""

    def write(self, key: str, pieces: Sequence[memoryview], *, durable: bool = False) -> int: ...

    def copy(self, source: str, key: str) -> None: ...

    def delete_many(self, keys: Sequence[str]) -> None: ...

    def read_all(self, key: str) -> bytes | None: ...

    def list_names(self, prefix: str) -> set[str]: ...

    def list_subdirs(self, prefix: str) -> list[str]: ...


class ObjectJournal:
    """The journal of one object store."""

    def __init__(self, objects: Objects, name: str, path: str = "") -> None:
        self._objects = objects
        self._name = name
        """The store, as log lines name it."""
        self._dir = f"{path.strip('/')}/{JOURNAL_DIR}".lstrip("/")
        """The journal's prefix: beside the mounted array or group, so that recovering one
        mount never touches another array's commits in the same bucket."""

    def commit(self, parts: Sequence[tuple[str, Sequence[memoryview]]]) -> list[int]:
        """Replace every ``(key, pieces)``; the new times (the time of the copy: a copy's
        answer carries no ``LastModified``)."""
        tx = uuid.uuid4().hex
        copies = [(f"{self._dir}/{tx}/{i}", key) for i, (key, _) in enumerate(parts)]
        try:
            for (temp, _), (_, pieces) in zip(copies, parts, strict=True):
                self._objects.write(temp, pieces)
            self._record(tx, copies)
        except BaseException:
            try:
                self._forget(tx, [temp for temp, _ in copies])
            except OSError as e:  # the store is failing: the next writable mount undoes it
                log.warning("%s: could not clean up commit %s: %s", self._name, tx, e)
            raise
        self._copy_all(copies)
        mtime = time.time_ns()
        self._forget(tx, [temp for temp, _ in copies])
        return [mtime] * len(parts)

    def recover(self) -> tuple[int, int]:
        """Finish what a crash interrupted: (transactions rolled forward, rolled back)."""
        records = {n.split(".", 1)[0] for n in self._objects.list_names(self._dir)}
        forward = back = 0
        for tx in sorted(records | set(self._objects.list_subdirs(self._dir))):
            left = sorted(f"{self._dir}/{tx}/{n}" for n in self._objects.list_names(
                f"{self._dir}/{tx}"))
            committed = self._read_record(tx) if tx in records else None
            if committed is not None:
                self._copy_all([(temp, key) for temp, key in committed if temp in left])
                forward += 1
            else:
                back += 1
            self._forget(tx, left)
        if forward or back:
            log.warning("%s: finished %d commit(s) a crash interrupted and undid %d unfinished "
                        "one(s): every chunk is its old or its new value", self._name,
                        forward, back)
        return forward, back

    # --- steps -------------------------------------------------------------------------------

    def _record(self, tx: str, copies: Sequence[tuple[str, str]]) -> None:
        data = json.dumps([list(c) for c in copies]).encode()
        self._objects.write(f"{self._dir}/{tx}.commit", [memoryview(data)])

    def _read_record(self, tx: str) -> list[tuple[str, str]] | None:
        data = self._objects.read_all(f"{self._dir}/{tx}.commit")
        if data is None:
            return None
        try:
            return [(str(a), str(b)) for a, b in json.loads(data)]
        except (ValueError, TypeError):
            log.warning("%s: unreadable commit record %s: undone", self._name, tx)
            return None

    def _copy_all(self, copies: Sequence[tuple[str, str]]) -> None:
        for temp, key in copies:
            self._objects.copy(temp, key)

    def _forget(self, tx: str, temps: Sequence[str]) -> None:
        """Delete the temps and the record, in one request. Whatever part of it a crash
        leaves is harmless: temps without their record are undone (their copies, if made,
        stay), a record without its temps is finished with nothing left to copy."""
        self._objects.delete_many([*temps, f"{self._dir}/{tx}.commit"])
