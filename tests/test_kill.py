"""kill -9 in the middle of publishing into a real Chroma server; a re-run converges."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from chroma_server import running_chroma
from sync_helpers import snapshot

from rechunk import CachedEmbedder, Document, SQLiteCache, policy_for, sync
from rechunk.adapters.chroma import ChromaStore

N_DOCS = 40


def corpus(version: int) -> list[Document]:
    docs = []
    for i in range(N_DOCS):
        lead = f"Entry {i} of the field notes, revision {version}." if i % 2 else f"Entry {i}."
        body = f"{lead}\n\nObservation {i}: the river level was {i % 17} marks at dawn."
        docs.append(Document(f"notes/{i:03}.md", body))
    return docs


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    with running_chroma(tmp_path_factory.mktemp("kill-chroma") / "data") as running:
        yield running


@pytest.fixture(scope="module")
def warm_cache(tmp_path_factory: pytest.TempPathFactory, minilm: Any) -> Path:
    """A cache holding every input of both versions, so the killed process needs no model."""
    path = tmp_path_factory.mktemp("kill-cache") / "cache.sqlite"
    chunker = policy_for(minilm, "recursive")
    texts = {c.text for v in (1, 2) for d in corpus(v) for c in chunker.chunk(d.text)}
    CachedEmbedder(minilm, SQLiteCache(path)).embed(sorted(texts))
    return path


CHILD = textwrap.dedent(
    """
    import sys
    sys.path.insert(0, {tests!r})
    from rechunk import SQLiteCache, policy_for, sync
    from rechunk.adapters.chroma import ChromaStore, http_client
    from rechunk.integrations.uri import default_embedder
    from test_kill import corpus

    embedder = default_embedder()
    store = ChromaStore(http_client("127.0.0.1", {port}), {collection!r}, batch_size=4)

    def progress(stage, done, total):
        if stage == "publish":
            print("PUBLISH", done, flush=True)

    sync(corpus(2), store, chunker=policy_for(embedder, "recursive"), embedder=embedder,
         cache=SQLiteCache({cache!r}), progress=progress)
    print("DONE", flush=True)
    """
)


@pytest.mark.parametrize("kill_after", [1, 25])
def test_kill_during_publish_converges(server: Any, warm_cache: Path, minilm: Any,
                                       kill_after: int) -> None:
    chunker = policy_for(minilm, "recursive")
    cache = SQLiteCache(warm_cache)
    reference = ChromaStore(server.client, f"ref{uuid.uuid4().hex[:6]}")
    reference.ensure_collection(minilm.dimension)
    sync(corpus(2), reference, chunker=chunker, embedder=minilm, cache=cache)

    name = f"live{uuid.uuid4().hex[:6]}"
    store = ChromaStore(server.client, name)
    store.ensure_collection(minilm.dimension)
    sync(corpus(1), store, chunker=chunker, embedder=minilm, cache=cache)

    script = CHILD.format(tests=str(Path(__file__).parent), port=server.port, collection=name,
                          cache=str(warm_cache))
    child = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    assert child.stdout is not None
    killed = False
    deadline = time.monotonic() + 120
    for line in child.stdout:
        if line.startswith("PUBLISH") and int(line.split()[1]) >= kill_after:
            os.kill(child.pid, signal.SIGKILL)
            killed = True
            break
        if time.monotonic() > deadline:
            break
    child.wait(timeout=30)
    assert killed, child.stderr.read() if child.stderr else "child ended before the kill"
    assert child.returncode == -signal.SIGKILL

    report = sync(corpus(2), store, chunker=chunker, embedder=minilm, cache=cache)
    assert report.stale_check == "passed"
    assert report.inputs["embedded"] == 0
    assert snapshot(store) == snapshot(reference)
