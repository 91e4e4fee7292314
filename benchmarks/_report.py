"""Write one benchmark's results into its own section of docs/benchmarks.md.

Each benchmark script owns the text between ``<!-- NAME:start -->`` and
``<!-- NAME:end -->``; re-running it replaces that section and leaves the other
benchmarks' sections alone.
"""

from __future__ import annotations

import json
import platform
import re
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs" / "benchmarks.md"
REVISIONS = ROOT.parent / "shared" / "revisions" / "dev.jsonl"
HEADER = (
    "# Benchmarks\n\n"
    "Every number on this page is written by a script in `benchmarks/`; re-run the\n"
    "script named in a section to reproduce it (`python benchmarks/NAME.py`).\n"
)


def machine() -> str:
    import os

    return f"{platform.machine()}, {os.cpu_count()} cores, Python {sys.version.split()[0]}"


def load_revisions(path: Path = REVISIONS) -> list[dict[str, Any]]:
    if not path.exists():
        raise SystemExit(f"revision pairs not found at {path} (the shared/ folder is absent)")
    with path.open(encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


def write_section(name: str, markdown: str, path: Path = DOCS) -> None:
    start, end = f"<!-- {name}:start -->", f"<!-- {name}:end -->"
    block = f"{start}\n{markdown.rstrip()}\n{end}"
    text = path.read_text(encoding="utf-8") if path.exists() else HEADER
    pattern = re.compile(re.escape(start) + r".*?" + re.escape(end), re.S)
    if pattern.search(text):
        text = pattern.sub(lambda _: block, text)
    else:
        text = text.rstrip() + "\n\n" + block + "\n"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
