"""Hand-computed contract tests for R_c and the edit fraction, plus the no-edit control."""

from __future__ import annotations

from typing import Any

import pytest

from rechunk import (
    CDCChunker,
    Chunk,
    ConfigError,
    FixedChunker,
    RecursiveChunker,
    edit_band,
    edit_fraction,
    recompute_fraction,
)
from rechunk.chunking.measure import atoms


def chunks(*items: tuple[str, int]) -> list[Chunk]:
    """Chunks from (text, tokens); offsets do not matter to R_c."""
    out, pos = [], 0
    for text, tokens in items:
        out.append(Chunk(pos, pos + len(text), text, tokens))
        pos += len(text)
    return out


OLD = chunks(("A", 10), ("B", 20), ("C", 30))


# -- R_c ------------------------------------------------------------------------------------

@pytest.mark.parametrize(
    ("new", "expected"),
    [
        (OLD, 0.0),                                                   # no edit
        (chunks(("A", 10), ("X", 5), ("B", 20), ("C", 30)), 5 / 65),   # insertion
        (chunks(("A", 10), ("C", 30)), 0.0),                          # deletion costs nothing
        (chunks(("A", 10), ("B2", 25), ("C", 30)), 25 / 65),          # replacement
        (chunks(("C", 30), ("A", 10), ("B", 20)), 0.0),               # move: same inputs
        (chunks(("A", 10), ("A", 10), ("B", 20), ("C", 30)), 0.0),    # repeat of old text
        (chunks(("N", 8), ("N", 8), ("A", 10)), 8 / 18),              # new duplicate counted once
        (chunks(("X", 40)), 1.0),                                     # total rewrite
        ([], 0.0),                                                    # new version empty
        (chunks(("A ", 10), ("B", 20), ("C", 30)), 10 / 60),          # bytes differ: new input
        (chunks(("AB", 30), ("C", 30)), 0.5),                         # merged chunks are new
    ],
)
def test_recompute_fraction_hand_computed(new: list[Chunk], expected: float) -> None:
    assert recompute_fraction(OLD, new) == pytest.approx(expected)


def test_recompute_fraction_from_empty_old_is_one() -> None:
    assert recompute_fraction([], OLD) == 1.0


def test_recompute_fraction_zero_token_inputs() -> None:
    assert recompute_fraction([], chunks(("x", 0))) == 0.0


def test_recompute_fraction_on_real_chunker_insert() -> None:
    text = "\n\n".join(f"Paragraph {i}: " + "words " * 30 for i in range(20))
    chunker = RecursiveChunker(target_tokens=50)
    old, new = chunker.chunk(text), chunker.chunk("New opening paragraph.\n\n" + text)
    assert 0 < recompute_fraction(old, new) < 0.2
    assert recompute_fraction(old, old) == 0.0


def test_whitespace_only_change_costs_nothing() -> None:
    text = "First paragraph here.\n\nSecond one follows.\n\nThird closes."
    spaced = text.replace("\n\n", "\n   \n\n").replace(" here", "  here") + "\n\n"
    for chunker in (FixedChunker(), RecursiveChunker(), CDCChunker()):
        assert recompute_fraction(chunker.chunk(text), chunker.chunk(spaced)) in (0.0, 1.0)
    # the recursive chunker keeps paragraphs, whose inputs differ only in inner spaces
    assert recompute_fraction(FixedChunker().chunk(text), FixedChunker().chunk(text + "\n\n")) == 0.0


def test_no_edit_control_on_every_real_pair(revisions: list[dict[str, Any]]) -> None:
    for chunker in (FixedChunker(), RecursiveChunker(), CDCChunker()):
        for pair in revisions:
            old = chunker.chunk(pair["old"])
            assert recompute_fraction(old, chunker.chunk(pair["old"])) == 0.0, pair["id"]


# -- edit fraction --------------------------------------------------------------------------

@pytest.mark.parametrize(
    ("old", "new", "expected"),
    [
        ("a b c", "a b c", 0.0),
        ("a b c", "a x c", 2 / 6),           # replacement: 1 removed + 1 added
        ("a b c", "a b c d", 1 / 7),         # insertion
        ("a b c d", "a b", 2 / 6),           # deletion
        ("", "", 0.0),                       # two empty texts
        ("", "a b", 1.0),                    # everything added
        ("a  b\n\nc", "a b c", 0.0),         # whitespace is not an atom
        ("hello, world", "hello world", 1 / 5),  # punctuation is its own atom
        ("中文字", "中文学", 2 / 6),           # CJK: single characters
        ("abc中文", "abc 中文", 0.0),          # Latin word then CJK characters
        ("b c a", "a b c", 2 / 6),           # move = delete + insert
    ],
)
def test_edit_fraction_hand_computed(old: str, new: str, expected: float) -> None:
    assert edit_fraction(old, new) == pytest.approx(expected)


def test_atoms() -> None:
    assert atoms("Hello, 世界! x_y2") == ["Hello", ",", "世", "界", "!", "x_y2"]


def test_edit_fraction_matches_the_study(revisions: list[dict[str, Any]]) -> None:
    for pair in revisions:
        assert edit_fraction(pair["old"], pair["new"]) == pytest.approx(
            pair["edit_fraction"], abs=1e-6
        ), pair["id"]
        assert edit_band(edit_fraction(pair["old"], pair["new"])) == pair["band"]


@pytest.mark.parametrize(
    ("fraction", "band"),
    [(0.0, "small"), (0.05, "small"), (0.0501, "medium"), (0.2, "medium"), (0.5, "large"),
     (0.51, "extreme"), (1.0, "extreme")],
)
def test_edit_band(fraction: float, band: str) -> None:
    assert edit_band(fraction) == band


@pytest.mark.parametrize("bad", [-0.1, 1.5, True, "0.1"])
def test_edit_band_rejects(bad: Any) -> None:
    with pytest.raises(ConfigError):
        edit_band(bad)
