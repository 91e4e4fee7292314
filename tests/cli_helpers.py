"""Running the CLI in-process from a test."""

from __future__ import annotations

import json
from typing import Any

import pytest

from rechunk.cli import main


def run_json(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, Any]:
    """``rechunk ARGS --json``: the exit code and the parsed report (None when nothing was
    printed)."""
    code = main([*args, "--json"])
    out = capsys.readouterr().out
    return code, json.loads(out) if out.strip() else None
