"""The helper process that chunks a sync's next batch while the sync publishes: it makes
the chunks the chunker makes, and whatever goes wrong with it is left to the caller."""

from __future__ import annotations

import importlib
import logging
import pickle
import signal
import tempfile
from pathlib import Path
from typing import Any

import pytest

from rechunk import StructuredChunker

ahead = importlib.import_module("rechunk.sync.ahead")

TEXTS = [
    f"# Part {i}\n\n"
    + "\n\n".join(
        f"Paragraph {j} of part {i} says what the helper must chunk as the sync would. "
        * (1 + (i + j) % 5)
        for j in range(4 + i % 3)
    )
    for i in range(ahead.MIN_DOCUMENTS + 4)
]


@pytest.fixture(scope="module")
def chunker() -> StructuredChunker:
    return StructuredChunker()


@pytest.fixture(autouse=True)
def two_cores(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The helper runs where it would on CI (2 cores), its folder under ``tmp_path``."""
    monkeypatch.setattr(ahead, "cores", lambda: 2)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))


def test_the_helper_makes_the_chunks_the_chunker_makes(chunker: Any, tmp_path: Path) -> None:
    helper = ahead.ChunkAhead(chunker)
    try:
        assert helper.submit(TEXTS)
        assert helper.collect() == [chunker.chunk(t) for t in TEXTS]
        assert helper.submit(TEXTS[::-1])  # one process serves every request
        assert helper.collect() == [chunker.chunk(t) for t in TEXTS[::-1]]
        process = helper.process
        assert process is not None and process.poll() is None
        assert [p.name for p in next(tmp_path.glob("rechunk-ahead-*")).iterdir()] == [
            "chunker.pickle"  # each request's file is removed once read
        ]
    finally:
        helper.close()
    assert process.returncode == 0
    assert list(tmp_path.glob("rechunk-ahead-*")) == []


def test_a_helper_that_dies_is_not_asked_again(chunker: Any, tmp_path: Path,
                                               caplog: pytest.LogCaptureFixture) -> None:
    helper = ahead.ChunkAhead(chunker)
    assert helper.submit(TEXTS)
    process = helper.process
    process.kill()
    with caplog.at_level(logging.WARNING, "rechunk.sync"):
        assert helper.collect() is None
    assert "chunking helper gave no answer" in caplog.text
    assert process.poll() is not None and helper.process is None
    assert not helper.submit(TEXTS)
    helper.close()
    assert list(tmp_path.glob("rechunk-ahead-*")) == []


def test_a_chunker_error_is_left_to_the_caller(chunker: Any,
                                              caplog: pytest.LogCaptureFixture) -> None:
    helper = ahead.ChunkAhead(chunker)
    with caplog.at_level(logging.WARNING, "rechunk.sync"):
        assert helper.submit([*TEXTS, "a NUL \x00 byte"])
        assert helper.collect() is None
    assert "could not chunk them (InputError)" in caplog.text  # the sync raises it whole
    assert not helper.submit(TEXTS)
    helper.close()


def test_a_request_nobody_will_collect_ends_the_helper_at_once(chunker: Any,
                                                               tmp_path: Path) -> None:
    helper = ahead.ChunkAhead(chunker)
    assert helper.submit(TEXTS * 50)  # what a sync that raised meanwhile leaves in flight
    process = helper.process
    helper.close()
    assert process.returncode == -signal.SIGKILL
    assert list(tmp_path.glob("rechunk-ahead-*")) == []


def test_the_chunker_sent_leaves_its_memo_behind() -> None:
    """A long-lived process's chunker remembers up to a million words' token counts; the
    copy the helper gets does not carry them, and chunks the same."""
    chunker = StructuredChunker()
    empty = len(pickle.dumps(chunker))
    texts = [" ".join(f"w{i}x{j}" for j in range(2000)) for i in range(20)]
    seen = [chunker.chunk(text) for text in texts]
    assert len(pickle.dumps(chunker)) == empty
    copy = pickle.loads(pickle.dumps(chunker))
    assert [copy.chunk(text) for text in texts] == seen


class _OwnChunker:
    """A caller's own chunker: it may hold state a copy in another process would lack."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.policy_id = inner.policy_id

    def chunk(self, text: str) -> Any:
        return self.inner.chunk(text)


def test_what_the_helper_does_not_take(chunker: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    few = ahead.ChunkAhead(chunker)
    assert not few.submit(TEXTS[: ahead.MIN_DOCUMENTS - 1]) and few.process is None
    assert not ahead.ChunkAhead(_OwnChunker(chunker)).submit(TEXTS)
    monkeypatch.setattr(ahead, "cores", lambda: 1)
    assert not ahead.ChunkAhead(chunker).submit(TEXTS)
