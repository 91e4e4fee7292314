"""The changed bytes behind the amplification figure: difflib's answer where the part that
differs is small, in near-linear time where it is not."""

from __future__ import annotations

import difflib
from collections.abc import Sequence
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

import rechunk.chunking.measure as measure
from rechunk.chunking.measure import atoms, changed_blocks
from rechunk.sync.planning import _changed_bytes


def difflib_changed_bytes(old_texts: Sequence[str], new_texts: Sequence[str]) -> int:
    """The quadratic reference: difflib over every line (whitespace collapsed), then over
    the atoms of each changed block (what _changed_bytes computed before it was made
    near-linear)."""
    old_lines = "\n".join(old_texts).split("\n")
    new_lines = "\n".join(new_texts).split("\n")
    lines = difflib.SequenceMatcher(
        None,
        [" ".join(line.split()) for line in old_lines],
        [" ".join(line.split()) for line in new_lines],
        autojunk=False,
    )
    changed = 0
    for tag, i1, i2, j1, j2 in lines.get_opcodes():
        if tag == "equal":
            continue
        before, after = atoms("\n".join(old_lines[i1:i2])), atoms("\n".join(new_lines[j1:j2]))
        inner = difflib.SequenceMatcher(None, before, after, autojunk=False)
        for kind, a1, a2, b1, b2 in inner.get_opcodes():
            if kind != "equal":
                changed += len("".join(before[a1:a2]).encode("utf-8"))
                changed += len("".join(after[b1:b2]).encode("utf-8"))
    return changed


@pytest.mark.revisions
def test_identical_to_difflib_on_every_dev_revision(revisions: list[dict[str, Any]]) -> None:
    for pair in revisions:
        for split in ("\n\n", "\n\n\n\n\n"):  # paragraphs as inputs, and whole texts
            old, new = pair["old"].split(split), pair["new"].split(split)
            assert _changed_bytes(old, new) == difflib_changed_bytes(old, new), pair["id"]


def apply(a: Sequence[Any], b: Sequence[Any], blocks: list[tuple[int, int, int, int]]) -> list[Any]:
    """``a`` with every block replaced by its part of ``b``, checking the blocks' order and
    that the unchanged stretches pair equal items."""
    out: list[Any] = []
    i = j = 0
    for i1, i2, j1, j2 in blocks:
        assert i <= i1 <= i2 and j <= j1 <= j2 and (i1 < i2 or j1 < j2)
        assert i1 - i == j1 - j and list(a[i:i1]) == list(b[j:j1])
        out.extend(a[i:i1])
        out.extend(b[j1:j2])
        i, j = i2, j2
    assert len(a) - i == len(b) - j and list(a[i:]) == list(b[j:])
    return out + list(a[i:])


items = st.lists(st.sampled_from("abcdefgh") | st.integers(0, 40), max_size=60)


@given(items, items)
def test_small_diffs_are_difflibs_opcodes(a: list[Any], b: list[Any]) -> None:
    blocks = changed_blocks(a, b)
    assert apply(a, b, blocks) == b
    matcher = difflib.SequenceMatcher(None, a, b, autojunk=False)
    changed = sum(x2 - x1 + y2 - y1 for t, x1, x2, y1, y2 in matcher.get_opcodes() if t != "equal")
    assert sum(i2 - i1 + j2 - j1 for i1, i2, j1, j2 in blocks) == changed


@given(items, items, st.integers(0, 30))
def test_large_diffs_are_split_at_anchors_and_stay_valid(
    a: list[Any], b: list[Any], cells: int
) -> None:
    old = measure.DIFF_CELLS
    measure.DIFF_CELLS = cells  # force the anchored path on small inputs
    try:
        blocks = changed_blocks(a, b)
    finally:
        measure.DIFF_CELLS = old
    assert apply(a, b, blocks) == b


def test_one_edit_in_a_large_repetitive_text_is_fast_and_exact() -> None:
    paragraph = "A paragraph that repeats, with words that repeat too."
    lines = [f"# Part {i}" if i % 50 == 0 else (paragraph if i % 2 else "") for i in range(200_000)]
    edited = list(lines)
    edited[100_001] = paragraph.replace("repeats", "changed once")
    edited[150_001] = ""
    removed = len("repeats") + len("".join(atoms(paragraph)))
    assert _changed_bytes(lines, edited) == removed + len("changed") + len("once")


def test_a_reindented_file_changed_no_byte() -> None:
    """A CI user reindented a Java class from 4 spaces to 2: the line diff paired blocks of
    other lines (the braces matched), and the words inside counted as 1,744 changed
    bytes, though not one word changed."""
    body = [f"int f{i}(int x) {{\n    return x + {i};\n}}\n" for i in range(40)]
    old = "class A {\n" + "".join("    " + line for text in body for line in text.splitlines(True))
    new = "class A {\n" + "".join("  " + line for text in body for line in text.splitlines(True))
    assert _changed_bytes([old + "}\n"], [new + "}\n"]) == 0
    assert _changed_bytes([old], [new.replace("return x + 7;", "return x + 8;")]) == 2


@given(st.lists(st.sampled_from(["a", "bb", "{", "}", "c d"]), max_size=30), st.randoms())
def test_whitespace_is_no_edit(words: list[str], rnd: Any) -> None:
    spaced = [" " * rnd.randint(0, 3) + w + " " * rnd.randint(0, 2) for w in words]
    assert _changed_bytes(["\n".join(words)], ["\n".join(spaced)]) == 0


def test_a_reindented_document_leaves_the_amplification_of_the_others_alone() -> None:
    """The review's repro: a reindent (0 changed bytes, its inputs re-embedded) beside a
    20-byte edit made the sync's amplification 117.6, where the edit alone gave 30.0."""
    from rechunk.sync.report import DocumentReport, SyncReport, changed_totals

    def doc(changed: int, reindexed: int) -> DocumentReport:
        return DocumentReport(
            "d", "changed", tokens_total=100, recompute_fraction=0.5,
            changed_bytes=changed, reindexed_bytes=reindexed,
        )  # fmt: skip

    report = SyncReport("c", "p", "m", "upsert-then-delete")
    changed_totals(report, [doc(20, 600), doc(0, 1752)])
    assert report.reindex_amplification == 30.0
    alone = SyncReport("c", "p", "m", "upsert-then-delete")
    changed_totals(alone, [doc(0, 1752)])
    assert alone.reindex_amplification is None  # no edit to divide by
