"""The code blocks of README.md and docs/*.md that the tests run.

The convention (docs/contributing.md says it too):

* a block opened with exactly ```` ```python ```` runs, each in a fresh namespace, in
  a scratch folder, and must print something;
* a ```` ```text ```` block right after it (nothing but blank lines between) is its
  expected output, compared line by line with trailing spaces ignored; a line ``...``
  there stands for any number of lines;
* ```` ```py ````, ```` ```python title="..." ```` and every other fence are shown,
  never run (sketches that need your own model, server or files).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

import pytest

FENCE = re.compile(r"^```([^\n]*)\n(.*?)^```[ \t]*$", re.S | re.M)


@dataclass(frozen=True)
class Block:
    source: str  # the file, relative to the repository
    line: int  # where the fence opens (1-based)
    info: str  # what follows the fence: "python", "py", "text", 'python title="x"'...
    code: str
    expected: str | None  # the text block right after a runnable block, if any

    @property
    def runnable(self) -> bool:
        return self.info == "python"

    @property
    def name(self) -> str:
        return f"{self.source}:{self.line}"


def blocks(path: Path, root: Path) -> list[Block]:
    """Every fenced block of ``path`` in order."""
    text = path.read_text(encoding="utf-8")
    found = list(FENCE.finditer(text))
    result = []
    for index, match in enumerate(found):
        info = match.group(1).strip()
        expected = None
        if info == "python" and index + 1 < len(found):
            after = found[index + 1]
            between = text[match.end() : after.start()]
            if after.group(1).strip() == "text" and not between.strip():
                expected = after.group(2)
        line = text.count("\n", 0, match.start()) + 1
        result.append(
            Block(str(path.relative_to(root)), line, info, match.group(2), expected)
        )
    return result


def matches(output: str, expected: str) -> bool:
    """Whether ``output`` is ``expected``, a line ``...`` standing for any lines."""
    pattern = ""
    for line in expected.rstrip("\n").split("\n"):
        if line.strip() == "...":
            pattern += r"(?:[^\n]*\n)*?"
        else:
            pattern += re.escape(line.rstrip()) + r"[ \t]*\n"
    lines = "".join(line.rstrip() + "\n" for line in output.rstrip("\n").split("\n"))
    return re.fullmatch(pattern, lines) is not None


def run_block(block: Block, folder: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Run ``block`` in ``folder``; it must print, and print what its text block shows."""
    cwd = Path.cwd()
    os.chdir(folder)
    try:
        exec(compile(block.code, block.name, "exec"), {"__name__": "__main__"})
    finally:
        os.chdir(cwd)
    out = capsys.readouterr().out
    assert out, f"{block.name} printed nothing"
    if block.expected is not None:
        assert matches(out, block.expected), (
            f"{block.name} printed\n{out}\nwhere the page shows\n{block.expected}"
        )
