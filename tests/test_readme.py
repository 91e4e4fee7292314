"""The README stays true: its code runs and prints what it shows, and CI runs its commands.

Which blocks run, and how their output is checked: tests/doc_blocks.py.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from doc_blocks import Block, blocks, run_block

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text(encoding="utf-8")
RUNNABLE = [b for b in blocks(ROOT / "README.md", ROOT) if b.runnable]


@pytest.mark.parametrize("block", RUNNABLE, ids=[b.name for b in RUNNABLE])
def test_python_blocks_run(
    block: Block, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run_block(block, tmp_path, capsys)


def test_first_commands_are_demo_and_test() -> None:
    first = re.findall(r"```sh\n(.*?)```", README, re.S)[0].splitlines()
    assert first[0].startswith("make demo") and first[1].startswith("make test")
    ci = (ROOT / ".ci" / "run").read_text()
    assert re.search(r"^make test$", ci, re.M)


def test_readme_is_short() -> None:
    assert len(README.splitlines()) <= 220, "README.md is a pitch: move detail into docs/"


def test_links_lead_somewhere() -> None:
    for target in re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", README):
        if "://" not in target:
            assert (ROOT / target).exists(), target
