"""The bytes of a file being written: appends (``cp``) kept as FUSE's pieces and stored with
one ``writev``, no copy; any other write, truncate or read folds them into one bytearray."""

from __future__ import annotations

__all__ = ["WriteBuffer"]


class WriteBuffer:
    """A growable byte string that is cheap to append to and to hand out as pieces."""

    def __init__(self, initial: bytes | bytearray = b"") -> None:
        self._pieces: list[bytes | bytearray] = [initial] if initial else []
        self._size = len(initial)

    def __len__(self) -> int:
        return self._size

    def _whole(self) -> bytearray:
        if len(self._pieces) == 1 and isinstance(self._pieces[0], bytearray):
            return self._pieces[0]
        whole = bytearray().join(self._pieces)
        self._pieces = [whole]
        return whole

    def write(self, offset: int, data: bytes) -> None:
        if offset == self._size:
            self._pieces.append(data)
        else:
            whole = self._whole()
            if offset > len(whole):
                whole.extend(bytes(offset - len(whole)))
            whole[offset : offset + len(data)] = data
        self._size = max(self._size, offset + len(data))

    def truncate(self, size: int) -> None:
        whole = self._whole()
        if size < len(whole):
            del whole[size:]
        else:
            whole.extend(bytes(size - len(whole)))
        self._size = size

    def read(self, offset: int, length: int) -> bytes:
        if len(self._pieces) == 1:
            return bytes(self._pieces[0][offset : offset + length])
        return bytes(self._whole()[offset : offset + length])

    def read_into(self, offset: int, out: memoryview) -> int:
        """Copy the bytes from ``offset`` into ``out``; how many there were."""
        piece = self.read(offset, len(out))
        out[: len(piece)] = piece
        return len(piece)

    def pieces(self) -> list[memoryview]:
        """The content as read-only views; valid until the next change to the buffer."""
        return [memoryview(p).toreadonly() for p in self._pieces]
