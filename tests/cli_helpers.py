"""Running the CLI in-process from a test."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from rechunk.cli import main


def run_json(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, Any]:
    """``rechunk ARGS --json``: the exit code and the parsed report (None when nothing was
    printed)."""
    code = main([*args, "--json"])
    out = capsys.readouterr().out
    return code, json.loads(out) if out.strip() else None


GUIDE = Path(__file__).resolve().parents[1] / "examples" / "docs" / "sync-guide.md"
INSERTED = "A paragraph inserted by a later revision."


def guide_paragraphs() -> list[str]:
    """The prose paragraphs of the project's example guide (``examples/docs/sync-guide.md``)."""
    text = GUIDE.read_text(encoding="utf-8")
    return [p.strip() for p in text.split("\n\n") if p.strip()[:1].isalpha()]


def sync_an_insert(
    capsys: pytest.CaptureFixture[str],
    folder: str,
    name: str,
    write: Callable[[list[str]], bytes],
    at: int = 6,
) -> dict[str, Any]:
    """Write ``folder/name`` from the guide's paragraphs, sync ``folder`` (every file in it
    new, read, none skipped), write the file again with :data:`INSERTED` after paragraph
    ``at`` and sync again: that sync's row of the file, checked to be the one changed."""
    paragraphs = guide_paragraphs()
    path = Path(folder) / name
    path.write_bytes(write(paragraphs))
    code, report = run_json(capsys, "sync", folder)
    files = sum(1 for _ in Path(folder).iterdir())
    assert code == 0 and report["documents"]["new"] == files, report
    assert report["unsupported_files"] == {} and report["skipped_files"] == [], report
    path.write_bytes(write([*paragraphs[:at], INSERTED, *paragraphs[at:]]))
    code, report = run_json(capsys, "sync", folder)
    (row,) = [d for d in report["per_document"] if d["status"] == "changed"]
    assert code == 0 and row["doc_id"] == name, report
    return dict(row)
