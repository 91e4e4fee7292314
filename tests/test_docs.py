"""The documentation site stays true: its code runs, its --help texts are current, every
command has a section, and every page is in the navigation (`make docs-check`
builds the site strictly).

Which blocks run, and how their output is checked: tests/doc_blocks.py.
"""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest
from doc_blocks import Block, blocks, matches, run_block

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
PAGES = sorted(DOCS.glob("*.md"))
RUNNABLE = [b for page in PAGES for b in blocks(page, ROOT) if b.runnable]


def gen_cli():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location("gen_cli", DOCS / "gen_cli.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("block", RUNNABLE, ids=[b.name for b in RUNNABLE])
def test_python_blocks_run(
    block: Block, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run_block(block, tmp_path, capsys)


def test_cli_help_is_current() -> None:
    module = gen_cli()
    page = (DOCS / "cli.md").read_text(encoding="utf-8")
    stale = module.stale_blocks(page, module.help_texts())
    assert not stale, f"docs/cli.md is out of date for {stale}: run python docs/gen_cli.py"


def test_every_cli_command_is_documented() -> None:
    _, commands = gen_cli().parser_and_commands()
    page = (DOCS / "cli.md").read_text(encoding="utf-8")
    for name in commands:
        assert re.search(rf"^## `rechunk {re.escape(name)}", page, re.M), name


def test_every_page_is_in_the_nav() -> None:
    config = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    for page in PAGES:
        assert re.search(rf":\s*{re.escape(page.name)}\s*$", config, re.M), page.name


def test_blocks_are_marked() -> None:
    """Every fence names its language, so that nothing meant to run is silently shown."""
    for page in [ROOT / "README.md", *PAGES]:
        unmarked = [b.name for b in blocks(page, ROOT) if not b.info]
        assert not unmarked, unmarked


def test_expected_output_is_compared_line_by_line() -> None:
    assert matches("a  \nb\nc\n", "a\nb\nc")
    assert matches("a\nb\nc\nd\n", "a\n...\nd\n")
    assert matches("a\n", "a\n...\n")
    assert not matches("a\nb\n", "a\nc\n")
    assert not matches("a\nb\n", "a\n")
