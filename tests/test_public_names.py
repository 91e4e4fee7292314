"""Public names do not move: every module path and name users could import before the core
was split into rooms (tests/golden/public_names.json, taken from the layout before) still
imports, and an old module path gives the same module object as its new one."""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
from pathlib import Path

import pytest

PUBLIC = json.loads(
    (Path(__file__).parent / "golden" / "public_names.json").read_text(encoding="utf-8")
)


@pytest.mark.parametrize("module", sorted(PUBLIC))
def test_module_and_its_names_still_import(module: str) -> None:
    loaded = importlib.import_module(module)
    missing = [name for name in PUBLIC[module] if not hasattr(loaded, name)]
    assert not missing, f"{module} lost {missing}"


def test_an_old_path_is_the_module_at_its_new_path() -> None:
    from rechunk import _moved

    for old, new in _moved.MOVED.items():
        assert importlib.import_module(old) is importlib.import_module(new), old
        assert importlib.import_module(new).__spec__.name == new  # its own spec, kept


def test_an_old_path_imports_first_in_a_fresh_process(tmp_path: Path) -> None:
    """``from rechunk.cache import SQLiteCache`` as the very first import of a program."""
    code = (
        "from rechunk.cache import SQLiteCache\n"
        "from rechunk.reuse.cache import SQLiteCache as again\n"
        "import rechunk.tokens, rechunk.chunking.tokens\n"
        "assert SQLiteCache is again and rechunk.tokens is rechunk.chunking.tokens\n"
    )
    subprocess.run([sys.executable, "-c", code], cwd=tmp_path, check=True)
