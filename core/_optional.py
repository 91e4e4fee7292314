"""Import optional third-party packages lazily, with an error that names the extra."""

from __future__ import annotations

import importlib
from types import ModuleType

from rechunk.errors import MissingDependencyError


def require(module: str, extra: str, package: str | None = None) -> ModuleType:
    """Import ``module`` or raise :class:`MissingDependencyError` naming ``rechunk[extra]``."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        missing = package or module.split(".")[0]
        raise MissingDependencyError(missing, extra) from exc
