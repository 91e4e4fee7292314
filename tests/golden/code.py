"""A shopping cart that keeps the order items were added in."""

from __future__ import annotations


class Cart:
    """Items and their prices."""

    def __init__(self) -> None:
        self.items: dict[str, float] = {}

    def add(self, name: str, price: float) -> None:
        """Add one item; adding a name again replaces its price."""
        if price < 0:
            raise ValueError(f"price of {name} is negative")
        self.items[name] = price

    def remove(self, name: str) -> None:
        """Remove an item; removing one that is not there is no error."""
        self.items.pop(name, None)

    def total(self) -> float:
        """The sum of every price."""
        return sum(self.items.values())


def receipt(cart: Cart) -> str:
    """One line per item, then the total."""
    lines = [f"{name:<20}{price:>8.2f}" for name, price in cart.items.items()]
    lines.append(f"{'total':<20}{cart.total():>8.2f}")
    return "\n".join(lines)
