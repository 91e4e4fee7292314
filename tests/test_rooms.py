"""The core's rooms depend on each other one way. Each room's docstring says what it may
import; this reads every import statement of the core (at the top of a module, inside a
function, under ``TYPE_CHECKING``) and checks it against those rules: the reuse room
imports no other room, chunking and the chunkers build on reuse, the sync builds on those
three, sources on the chunkers, live on any of them, and nothing in the core imports the
adapters, the integrations or the command line."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

CORE = Path(__file__).resolve().parents[1] / "core"

#: what each part of the core may import of ``rechunk`` besides itself: a room (a
#: subpackage) or a shared root module; ``rechunk/__init__.py`` (the public names) and
#: ``__main__.py`` (``python -m rechunk`` runs the command line) are the exceptions
MAY_IMPORT: dict[str, set[str]] = {
    "errors": set(),
    "_optional": {"errors"},
    "_moved": set(),
    "_heap": set(),
    "reuse": {"errors"},
    "document": {"errors", "reuse"},
    "chunking": {"errors", "_optional", "reuse", "chunkers"},
    "chunkers": {"errors", "_optional", "reuse", "chunking"},
    "sources": {"errors", "_optional", "document", "chunkers"},
    "sync": {"errors", "document", "reuse", "chunking", "chunkers"},
    "live": {
        "errors",
        "_optional",
        "_heap",
        "document",
        "reuse",
        "chunking",
        "chunkers",
        "sync",
        "sources",
    },
}
ROOMS = sorted(name for name in MAY_IMPORT if (CORE / name / "__init__.py").exists())
OUTSIDE = {"adapters", "integrations", "cli"}


def part_of(path: Path) -> str:
    """The part of the core a module belongs to: its room, or its own name at the root."""
    rel = path.relative_to(CORE)
    return rel.parts[0] if len(rel.parts) > 1 else rel.stem


def rechunk_imports(source: str) -> list[tuple[int, str]]:
    """``(line, module)`` of every import of a ``rechunk`` module in ``source``; ``from
    rechunk import x`` counts as an import of ``rechunk.x``."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module is not None:
            assert node.level == 0, "the core imports by absolute path"
            if node.module == "rechunk":
                found += [(node.lineno, f"rechunk.{alias.name}") for alias in node.names]
            else:
                found.append((node.lineno, node.module))
    return sorted((line, name) for line, name in found if name.split(".")[0] == "rechunk")


def modules() -> list[Path]:
    """Every module of the core but the package's own ``__init__`` and ``__main__``."""
    skip = {CORE / "__init__.py", CORE / "__main__.py"}
    return sorted(path for path in CORE.rglob("*.py") if path not in skip)


def test_the_checker_sees_imports_inside_functions_and_type_checking() -> None:
    source = (
        "from typing import TYPE_CHECKING\n"
        "from rechunk import errors\n"
        "if TYPE_CHECKING:\n"
        "    from rechunk.sync.store import VectorStore\n"
        "def f():\n"
        "    import rechunk.live.engine\n"
    )
    assert [name for _, name in rechunk_imports(source)] == [
        "rechunk.errors",
        "rechunk.sync.store",
        "rechunk.live.engine",
    ]


def test_every_part_of_the_core_says_what_it_may_import() -> None:
    """A new room (or root module) is added to MAY_IMPORT, and its docstring says what it
    holds and what it may import."""
    parts = {part_of(path) for path in modules()}
    assert parts <= set(MAY_IMPORT), f"not in MAY_IMPORT: {sorted(parts - set(MAY_IMPORT))}"
    for room in ROOMS:
        doc = ast.get_docstring(ast.parse((CORE / room / "__init__.py").read_text("utf-8")))
        assert doc and "may import" in doc, f"rechunk.{room}'s docstring names no imports"


@pytest.mark.parametrize("part", sorted(MAY_IMPORT))
def test_a_part_imports_only_what_it_may(part: str) -> None:
    wrong = []
    for path in modules():
        if part_of(path) != part:
            continue
        for line, name in rechunk_imports(path.read_text("utf-8")):
            target = name.split(".")[1] if "." in name else "rechunk"
            if target == part:
                continue
            if target in OUTSIDE:
                why = "the core never imports the adapters, the integrations or the CLI"
            elif target not in MAY_IMPORT:
                why = "an old module path or the package root: import the module where it lives"
            elif target not in MAY_IMPORT[part]:
                why = f"rechunk.{part} may import only {sorted(MAY_IMPORT[part])}"
            else:
                continue
            wrong.append(f"{path.relative_to(CORE.parent)}:{line}: {name} ({why})")
    assert not wrong, "\n".join(wrong)
