"""`with` for anything that has a `close()`: the Index, and the retrievers over it."""

from __future__ import annotations

from types import TracebackType
from typing import Self


class ClosesOnExit:
    """`with x:` returns x and calls `x.close()` at the end, however the block ends."""

    def close(self) -> None:
        raise NotImplementedError

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()
