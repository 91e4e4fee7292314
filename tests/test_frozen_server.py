"""A frozen Chroma server (SIGSTOP) fails a sync in bounded time with a message that says
what was waiting; a server that restarts during publishing is retried, not given up on."""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from chroma_server import HOST, chroma_cli, free_port, make_client, running_chroma, stop_process
from concurrency_helpers import TableEmbedder, version_text

from rechunk import Document, StoreTimeoutError, StoreUnavailableError, policy_for, sync
from rechunk.cli import main

pytestmark = pytest.mark.skipif(not hasattr(signal, "SIGSTOP"), reason="needs SIGSTOP")


@pytest.fixture(scope="module")
def embedder(minilm: Any) -> TableEmbedder:
    chunker = policy_for(TableEmbedder(minilm.model_id, minilm.dimension, {}), "recursive")
    texts = sorted({c.text for v in (1, 2) for c in chunker.chunk(version_text(v))})
    table = dict(zip(texts, np.asarray(minilm.embed(texts), dtype=np.float32)))
    return TableEmbedder(minilm.model_id, minilm.dimension, table)


def test_a_frozen_server_fails_in_bounded_time(
    tmp_path: Path, embedder: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    import rechunk.adapters.chroma as chroma

    monkeypatch.setattr(chroma, "REQUEST_SECONDS", 2.0)
    chunker = policy_for(embedder, "recursive")
    with running_chroma(tmp_path / "data") as server:
        store = chroma.ChromaStore(chroma.http_client(HOST, server.port), "frozen")
        store.ensure_collection(embedder.dimension)
        sync([Document("d", version_text(1))], store, chunker=chunker, embedder=embedder)
        os.kill(server.process.pid, signal.SIGSTOP)
        try:
            started = time.monotonic()
            with pytest.raises(StoreTimeoutError) as caught:
                sync([Document("d", version_text(2))], store, chunker=chunker,
                     embedder=embedder)
            waited = time.monotonic() - started
            message = str(caught.value)
            assert "cannot reach Chroma to " in message and "collection" in message
            assert "did not answer within 2 s (frozen or overloaded?)" in message
            assert isinstance(caught.value, StoreUnavailableError)
            assert waited < 2 * 2.0 + 5  # one request's limit (no retry of a timeout), not 300 s
        finally:
            os.kill(server.process.pid, signal.SIGCONT)
        # thawed, the same sync converges
        report = sync([Document("d", version_text(2))], store, chunker=chunker,
                      embedder=embedder)
        assert report.stale_check == "passed"


def test_the_cli_says_what_waited_on_a_frozen_server(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import rechunk.adapters.uri as uri

    monkeypatch.setattr(uri, "PROBE_SECONDS", 1.0)
    monkeypatch.chdir(tmp_path)
    with running_chroma(tmp_path / "data") as server:
        os.kill(server.process.pid, signal.SIGSTOP)
        try:
            started = time.monotonic()
            assert main(["status", "--store", f"chroma+http://{HOST}:{server.port}"]) == 3
            assert time.monotonic() - started < 8
        finally:
            os.kill(server.process.pid, signal.SIGCONT)
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and "did not answer within 1 s" in err[0]


def _start(path: Path, port: int) -> subprocess.Popen[bytes]:
    process = subprocess.Popen(
        [str(chroma_cli()), "run", "--path", str(path), "--host", HOST, "--port", str(port)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    deadline = time.monotonic() + 30
    while True:
        try:
            make_client(port).heartbeat()
            return process
        except Exception:
            if time.monotonic() > deadline or process.poll() is not None:
                stop_process(process)
                raise
            time.sleep(0.1)


def test_publishing_retries_while_the_server_restarts(
    tmp_path: Path, embedder: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from rechunk.adapters.chroma import ChromaStore, http_client
    from rechunk.sync import publishing

    # the default 4 attempts wait 7 s in all; a loaded machine (a whole suite on 2 cores)
    # took longer than that to start Chroma again, and the test is of the retry, not its budget
    monkeypatch.setattr(publishing, "PUBLISH_ATTEMPTS", 6)
    path, port = tmp_path / "data", free_port()
    servers = [_start(path, port)]
    chunker = policy_for(embedder, "recursive")

    class RestartsOnFirstWrite(ChromaStore):
        """The server goes down just before the first write and is back 1.5 s later."""

        restarted = False
        restarter: threading.Thread | None = None

        def write(self, points: Any, **kwargs: Any) -> None:
            if not RestartsOnFirstWrite.restarted:
                RestartsOnFirstWrite.restarted = True
                stop_process(servers[0])

                def later() -> None:
                    time.sleep(1.5)
                    servers.append(_start(path, port))

                thread = threading.Thread(target=later, daemon=True)
                RestartsOnFirstWrite.restarter = thread
                thread.start()
            super().write(points, **kwargs)

    try:
        store = RestartsOnFirstWrite(http_client(HOST, port), f"c{uuid.uuid4().hex[:8]}")
        store.ensure_collection(embedder.dimension)
        report = sync([Document("d", version_text(1))], store, chunker=chunker,
                      embedder=embedder)
        # the server may answer the retried write before _start has seen it answer
        assert RestartsOnFirstWrite.restarter is not None
        RestartsOnFirstWrite.restarter.join(timeout=60)
        assert RestartsOnFirstWrite.restarted and len(servers) == 2
        assert report.stale_check == "passed" and report.documents["new"] == 1
    finally:
        # after a failed sync the restarter may still start a server: wait, then stop it
        if RestartsOnFirstWrite.restarter is not None:
            RestartsOnFirstWrite.restarter.join(timeout=60)
        for process in servers:
            stop_process(process)


def test_a_lock_left_by_a_release_the_server_missed_does_not_hold_back_this_process(
    tmp_path: Path,
) -> None:
    """A writer whose server died before it released the lock (``rechunk watch`` when its
    Chroma server is killed mid-batch) takes the lock again at once after the restart:
    the record it could not delete is its own, not a live holder's for 60 s."""
    from rechunk.adapters.chroma import ChromaStore, http_client

    path, port = tmp_path / "data", free_port()
    servers = [_start(path, port)]
    try:
        store = ChromaStore(http_client(HOST, port), f"c{uuid.uuid4().hex[:8]}")
        store.ensure_collection(4)
        with store.writer_lock(wait=5):
            stop_process(servers[0])  # the release's delete fails: its record stays
        servers.append(_start(path, port))
        locks = make_client(port).get_collection("rechunk-writer-locks")
        assert locks.count() == 1  # the record the release could not delete
        with store.writer_lock(wait=1):  # the record would hold it for 60 s: this raised
            pass
    finally:
        for process in servers:
            stop_process(process)
