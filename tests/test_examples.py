"""Every example under examples/ runs offline and prints what its docstring promises."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"


def run_example(name: str) -> str:
    """Run ``examples/<name>`` in a fresh interpreter; its stdout (it must exit 0 within 300 s:
    a bound on a hang, not a speed target)."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    out = subprocess.run(
        [sys.executable, str(EXAMPLES / name)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, f"{name} failed:\n{out.stdout}\n{out.stderr}"
    return out.stdout


def revision_costs(output: str, name: str, unit: str) -> list[tuple[int, int, int]]:
    """``(items, embedded, tokens)`` per revision from lines like ``stock revision 2: 7 chunks, ...``."""
    pattern = rf"^\s+{name}\s+revision \d: +(\d+) {unit}, embedded +(\d+) \( *(\d+) tokens\)"
    return [tuple(map(int, m)) for m in re.findall(pattern, output, flags=re.M)]  # type: ignore[misc]


@pytest.mark.slow
def test_langchain_swap() -> None:
    output = run_example("langchain_swap.py")
    stock = revision_costs(output, "stock", "chunks")
    rechunk = revision_costs(output, "rechunk", "chunks")
    assert len(stock) == len(rechunk) == 2, output
    assert rechunk[0][0] == rechunk[0][1]  # revision 1: every chunk is new
    assert rechunk[1][1] < stock[1][1] and rechunk[1][2] < stock[1][2], output
    assert rechunk[1][1] < rechunk[1][0]  # revision 2: only some chunks embedded
    assert "from revision 2 only: True" in output


@pytest.mark.slow
def test_llamaindex_pipeline() -> None:
    output = run_example("llamaindex_pipeline.py")
    stock = revision_costs(output, "stock", "nodes")
    rechunk = revision_costs(output, "rechunk", "nodes")
    assert len(stock) == len(rechunk) == 2, output
    assert stock[1][0] == stock[1][1]  # upserts: the changed document is embedded whole
    assert rechunk[1][1] < rechunk[1][0] and rechunk[1][2] < stock[1][2], output
    hits, misses = map(int, re.search(r"cache: (\d+) hits, (\d+) misses", output).groups())  # type: ignore[union-attr]
    assert hits == rechunk[1][0] - rechunk[1][1] and misses == rechunk[0][1] + rechunk[1][1]
    assert "from revision 2 only: True" in output


@pytest.mark.slow
def test_qdrant_sync() -> None:
    output = run_example("qdrant_sync.py")
    assert output.count("stale check passed") == 4, output
    embedded = [int(n) for n in re.findall(r"embedded (\d+) inputs", output)]
    assert len(embedded) == 4 and embedded[0] > embedded[1] > 0
    assert embedded[2:] == [0, 0]  # the second layout is written from the cache
    langchain_hit = output.split("LangChain QdrantVectorStore on guide-langchain:\n")[
        1
    ].splitlines()[0]
    llamaindex_hit = output.split("LlamaIndex QdrantVectorStore on guide-llamaindex:\n")[
        1
    ].splitlines()[0]
    assert "chunking-guide.md chars" in langchain_hit and "cannot read" not in langchain_hit
    assert langchain_hit == llamaindex_hit  # same chunk, same offsets, same revision
    assert "LangChain on guide-llamaindex: cannot read it" in output
    assert "LlamaIndex on guide-langchain: cannot read it" in output


@pytest.mark.slow
def test_mixed_folder() -> None:
    """Every kind of file syncs in one command, and an edit of each kind re-embeds a few
    inputs: the paragraph inserted in three formats is one input, embedded once."""
    output = run_example("mixed_folder.py")
    first, second = output.split("(edited:")
    assert "17 new, 0 changed" in first and "unsupported   .png 1" in first
    assert "code: dockerfile 1, go 1, python 1, rust 1, typescript 1, yaml 1" in first
    assert "0 new, 4 changed, 13 unchanged" in second
    embedded = int(re.search(r"inputs +(\d+) embedded", second).group(1))  # type: ignore[union-attr]
    assert 0 < embedded <= 4, second
