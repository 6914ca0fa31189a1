"""Progress of a long call: the caller's callback, a progress bar on stderr, both or none."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TypeVar

from tqdm import tqdm

T = TypeVar("T")


@contextmanager
def reporting(
    callback: Callable[[T], None] | None, *, show: bool, desc: str, unit: str
) -> Iterator[Callable[[T], None] | None]:
    """What the operation calls once per item done: `callback`, and with `show` a bar's
    update (the bar `ingest` draws)."""
    if not show:
        yield callback
        return
    with tqdm(unit=unit, desc=desc, file=sys.stderr) as bar:

        def notify(item: T) -> None:
            bar.update()
            if callback is not None:
                callback(item)

        yield notify
