"""``Bounded``: a dict that forgets its least recently stored entries beyond a size (caches kept
by long-lived processes: the judging service sees suites without end)."""

from __future__ import annotations

from collections import OrderedDict
from typing import TypeVar

K, V = TypeVar("K"), TypeVar("V")


class Bounded(OrderedDict[K, V]):
    def __init__(self, size: int):
        super().__init__()
        self.size = size

    def __setitem__(self, key: K, value: V) -> None:
        super().__setitem__(key, value)
        self.move_to_end(key)
        while len(self) > self.size:
            self.popitem(last=False)
