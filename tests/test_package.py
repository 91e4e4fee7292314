"""Packaging: the folder layout maps onto one importable package, with no heavy imports."""

from __future__ import annotations

import json
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
HEAVY = ("langchain", "langchain_core", "langchain_text_splitters", "llama_index",
         "qdrant_client", "chromadb", "torch", "sentence_transformers", "transformers")
FOLDERS = {"core": "rechunk", "adapters": "rechunk.adapters", "integrations": "rechunk.integrations",
           "cli": "rechunk.cli"}


def test_import_loads_no_framework(tmp_path: Path) -> None:
    code = (
        "import json, sys\n"
        "import rechunk, rechunk.adapters, rechunk.integrations\n"
        "rechunk.FixedChunker().chunk('warm up the tokenizer too')\n"
        "print(json.dumps(sorted(sys.modules)))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True,
                         text=True, check=True)
    loaded = {m.split(".")[0] for m in json.loads(out.stdout)}
    assert not loaded & set(HEAVY), sorted(loaded & set(HEAVY))


def expected_packages() -> set[str]:
    packages = set()
    for folder, package in FOLDERS.items():
        for init in (ROOT / folder).rglob("__init__.py"):
            rel = init.parent.relative_to(ROOT / folder)
            packages.add(".".join([package, *rel.parts]) if rel.parts else package)
    return packages


@pytest.mark.slow
def test_wheel_holds_every_subpackage(tmp_path: Path) -> None:
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
         "-w", str(tmp_path), str(ROOT)],
        check=True, capture_output=True,
    )
    wheel = next(tmp_path.glob("rechunk-*.whl"))
    names = zipfile.ZipFile(wheel).namelist()
    in_wheel = {
        name.rsplit("/", 1)[0].replace("/", ".") for name in names if name.endswith("__init__.py")
    }
    assert in_wheel == expected_packages()
    assert "rechunk/py.typed" in names
    assert not any(name.startswith(("core/", "tests/", "adapters/", "cli/")) for name in names)


def test_the_core_imports_no_adapter_or_integration() -> None:
    """The core is the package root; what composes it with stores and embedders (the
    command line) lives outside it."""
    import re

    for path in (ROOT / "core").rglob("*.py"):
        if path.name == "__main__.py":  # `python -m rechunk` runs the command line
            continue
        text = path.read_text(encoding="utf-8")
        found = re.findall(r"^\s*(?:from|import) rechunk\.(?:adapters|integrations|cli)\b", text, re.M)
        assert not found, (path, found)


def test_public_names() -> None:
    import rechunk

    for name in rechunk.__all__:
        assert hasattr(rechunk, name), name
    for name in ("FixedChunker", "RecursiveChunker", "CDCChunker", "Chunk", "recompute_fraction",
                 "edit_fraction", "edit_band", "RechunkError", "ConfigError",
                 "MissingDependencyError"):
        assert name in rechunk.__all__
