"""The README stays true: its code runs, its commands exist, CI runs its test command."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from rechunk.cli import build_parser

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text(encoding="utf-8")


def blocks(language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", README, re.S)


@pytest.mark.parametrize("index", range(len(blocks("python"))))
def test_python_blocks_run(index: int, capsys: pytest.CaptureFixture[str]) -> None:
    exec(compile(blocks("python")[index], f"README block {index}", "exec"), {})
    assert capsys.readouterr().out


def test_first_commands_are_demo_and_test() -> None:
    first = blocks("sh")[0].splitlines()
    assert first[0].startswith("make demo") and first[1].startswith("make test")
    ci = (ROOT / ".ci" / "run").read_text()
    assert re.search(r"^make test$", ci, re.M)


def test_every_cli_command_is_documented() -> None:
    parser = build_parser()
    commands = next(a for a in parser._actions if a.dest == "command").choices
    for name in commands:
        assert f"`rechunk {name}" in README, name
