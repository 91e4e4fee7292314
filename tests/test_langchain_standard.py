"""LangChain's own standard test suites (``langchain-tests``) run against CachedEmbeddings.

``EmbeddingsUnitTests`` constructs the class from ``embedding_model_params`` alone
(no ``model_id``: the identity is derived from the wrapped model). The integration
suite embeds for real with all-MiniLM-L6-v2 through a plain LangChain ``Embeddings``,
cached in an SQLite file, as a user would wire it.
"""

from __future__ import annotations

import functools
import tempfile
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("langchain_tests")
pytest.importorskip("pytest_asyncio")

from langchain_core.embeddings import DeterministicFakeEmbedding, Embeddings
from langchain_tests.integration_tests import EmbeddingsIntegrationTests
from langchain_tests.unit_tests import EmbeddingsUnitTests

import rechunk
from rechunk.adapters.langchain import CachedEmbeddings


class MiniLMEmbeddings(Embeddings):
    """all-MiniLM-L6-v2 (the packaged weights, offline) as a LangChain Embeddings."""

    def __init__(self) -> None:
        from rechunk.integrations.uri import default_embedder

        self.embedder = default_embedder()
        self.model = self.embedder.model_id

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return self.embedder.embed(texts).tolist()  # type: ignore[no-any-return]

    def embed_query(self, text: str) -> list[float]:
        return self.embed_documents([text])[0]


@functools.cache
def _minilm() -> MiniLMEmbeddings:
    return MiniLMEmbeddings()


@functools.cache
def _cache_path() -> Path:
    return Path(tempfile.mkdtemp(prefix="rechunk-standard-")) / "vectors.sqlite"


class TestCachedEmbeddingsUnit(EmbeddingsUnitTests):
    @property
    def embeddings_class(self) -> type[CachedEmbeddings]:
        return CachedEmbeddings

    @property
    def embedding_model_params(self) -> dict[str, Any]:
        return {"underlying": DeterministicFakeEmbedding(size=16), "cache": rechunk.MemoryCache()}


class TestCachedEmbeddingsIntegration(EmbeddingsIntegrationTests):
    @property
    def embeddings_class(self) -> type[CachedEmbeddings]:
        return CachedEmbeddings

    @property
    def embedding_model_params(self) -> dict[str, Any]:
        return {
            "underlying": _minilm(),
            "cache": rechunk.SQLiteCache(_cache_path()),
            "cache_queries": True,
        }


def test_the_derived_identity_needs_no_model_id() -> None:
    fake = DeterministicFakeEmbedding(size=16)
    cached = CachedEmbeddings(fake, rechunk.MemoryCache())
    assert cached.model_id == (
        "langchain:langchain_core.embeddings.fake.DeterministicFakeEmbedding(size=16)"
    )
    assert CachedEmbeddings(DeterministicFakeEmbedding(size=8), rechunk.MemoryCache()).model_id != (
        cached.model_id
    )


def test_the_derived_identity_keeps_no_secret_in_headers_queries_or_urls() -> None:
    """langchain_community's own classes, configured as users configure them: a bearer
    token in ``headers``, a key in ``default_query`` and in the URL's query. None reaches
    the model id, which the cache and every chunk's metadata store."""
    community = pytest.importorskip("langchain_community.embeddings")
    ollama = community.OllamaEmbeddings(
        model="nomic-embed-text",
        base_url="http://127.0.0.1:11434/?api_key=URL-SECRET",
        headers={"Authorization": "Bearer HEADER-SECRET"},
    )
    model_id = CachedEmbeddings(ollama, rechunk.MemoryCache()).model_id
    assert "SECRET" not in model_id, model_id
    assert "model=nomic-embed-text" in model_id and "http://127.0.0.1:11434/" in model_id
    def openai(deployment: str, key: str = "a", lower: bool = True) -> Any:
        return community.OpenAIEmbeddings(
            model="text-embedding-3-small",
            openai_api_key="sk-KEY-SECRET",
            openai_api_base=f"https://emb.example/v1?deployment={deployment}&sig=URL-SECRET",
            default_headers={
                "X-Client": "Bearer HEADER-SECRET",
                "x-portkey-virtual-key": f"VIRTUAL-SECRET-{key}",  # picks a provider's model
            },
            default_query={"api-key": "QUERY-SECRET", "api-version": "2024-02-01"},
            model_kwargs={"user": "u1", "tokenizer_kwargs": {"do_lower_case": lower}},
        )

    def identity(model: Any) -> str:
        return CachedEmbeddings(model, rechunk.MemoryCache()).model_id

    model_id = identity(openai("a"))
    assert "SECRET" not in model_id, model_id
    assert "text-embedding-3-small" in model_id and '"user": "u1"' in model_id
    assert "deployment=a" in model_id and "2024-02-01" in model_id
    assert model_id == identity(openai("a"))  # digests are stable
    # whatever picks the model keeps two identities apart, a secret one too: never one
    # model's vectors reused for another's
    others = [openai("b"), openai("a", key="b"), openai("a", lower=False)]
    assert len({model_id, *map(identity, others)}) == 4
    # a plain (not SecretStr) key at the top level: a digest too, never the key itself,
    # and a key that picks the deployment still tells two apart
    class KeyedEmbeddings(DeterministicFakeEmbedding):
        api_key: str = ""

    ids = {identity(KeyedEmbeddings(size=4, api_key=f"PLAIN-SECRET-{k}")) for k in "ab"}
    assert len(ids) == 2 and not any("PLAIN-SECRET" in i for i in ids)
