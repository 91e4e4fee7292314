from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

settings.register_profile(
    "ci",
    derandomize=True,
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.differing_executors],
)
settings.register_profile(
    "dev",
    max_examples=200,
    deadline=None,
    suppress_health_check=[HealthCheck.differing_executors],
)
settings.load_profile("ci" if os.environ.get("CI") else os.environ.get("HYPOTHESIS_PROFILE", "ci"))

ROOT = Path(__file__).resolve().parent.parent
REVISIONS = ROOT.parent / "shared" / "revisions" / "dev.jsonl"


def _load_revisions() -> list[dict[str, Any]]:
    with REVISIONS.open(encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


@pytest.fixture(scope="session")
def revisions() -> list[dict[str, Any]]:
    """The real revision pairs of ../shared/revisions/dev.jsonl (skips when absent)."""
    if not REVISIONS.exists():
        pytest.skip(f"real revision pairs not available: {REVISIONS} is absent")
    return _load_revisions()


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "revisions: reads ../shared/revisions")


# The slowest test files, slowest first (seconds each took in a 3-worker `make test` on 2
# cores, 2026-12-07): `make test` hands whole files to its workers in collection order, and
# a long file handed out last kept one worker busy alone for minutes at the end.
SLOWEST_FIRST = (
    "test_ray.py",  # 304
    "test_sync.py",  # 175
    "test_examples.py",  # 160
    "test_cli.py",  # 137
    "test_openai_embedder.py",  # 93
    "test_watch.py",  # 86
    "test_cache_crash.py",  # 72
    "test_llamaindex.py",  # 69
)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """``@pytest.mark.requires("pkg")`` skips a test whose optional package is absent; the
    files of ``SLOWEST_FIRST`` run first (the order inside a file and of the others kept)."""
    import importlib.util

    for item in items:
        for mark in item.iter_markers("requires"):
            for pkg in mark.args:
                if importlib.util.find_spec(pkg) is None:
                    item.add_marker(
                        pytest.mark.skip(reason=f"optional package {pkg} not installed")
                    )
    rank = {name: i for i, name in enumerate(SLOWEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))


@pytest.fixture(scope="session")
def minilm():  # type: ignore[no-untyped-def]
    """The real default embedder (all-MiniLM-L6-v2, offline), loaded once per session: the
    one ``rechunk sync`` uses, ONNX Runtime where it runs (a test process then imports no
    torch or sentence-transformers, about 20 s of CPU each here), else torch."""
    from rechunk.integrations.uri import default_embedder

    return default_embedder()


@pytest.fixture(scope="session")
def minilm_torch():  # type: ignore[no-untyped-def]
    """The same model on torch (sentence-transformers): the reference the ONNX backend is
    checked against."""
    from rechunk.integrations.sentence_transformers import SentenceTransformerEmbedder

    return SentenceTransformerEmbedder()


@pytest.fixture
def chroma_client(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    """A persistent Chroma client under ``tmp_path`` whose default embedding function fails.

    An end-to-end test must embed through rechunk's classes only; Chroma would
    otherwise quietly embed with its own ONNX MiniLM.
    """
    chromadb = pytest.importorskip("chromadb")
    from chromadb.utils.embedding_functions import DefaultEmbeddingFunction
    from chromadb.utils.embedding_functions.onnx_mini_lm_l6_v2 import ONNXMiniLM_L6_V2

    def forbidden(self: Any, input: Any) -> Any:  # the signature Chroma checks
        raise AssertionError("Chroma's default embedding function ran")

    monkeypatch.setattr(DefaultEmbeddingFunction, "__call__", forbidden)
    monkeypatch.setattr(ONNXMiniLM_L6_V2, "__call__", forbidden)
    return chromadb.PersistentClient(
        path=str(tmp_path / "chroma"), settings=chromadb.Settings(anonymized_telemetry=False)
    )
