"""Shelves of a small store room: what each holds and what is running low."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Shelf:
    """One shelf: a label and the count of each item on it."""

    label: str
    counts: dict[str, int] = field(default_factory=dict)

    def stock(self, item: str, count: int) -> None:
        if count < 0:
            raise ValueError("a count is never negative")
        self.counts[item] = self.counts.get(item, 0) + count

    def take(self, item: str, count: int = 1) -> int:
        left = self.counts.get(item, 0) - count
        if left < 0:
            raise LookupError(f"only {self.counts.get(item, 0)} of {item} left")
        self.counts[item] = left
        return left


def running_low(shelves: list[Shelf], below: int = 3) -> list[tuple[str, str]]:
    """(shelf, item) for every item with fewer than ``below`` left."""
    return [(s.label, item) for s in shelves for item, n in s.counts.items() if n < below]
