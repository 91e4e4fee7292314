"""The command line, run for real: sync, status, query, bench, exit codes, signals, locks."""

from __future__ import annotations

import http.server
import importlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from cli_helpers import run_json

from rechunk.cli import main
from rechunk.errors import ConfigError, InputError
from rechunk.sources.files import read_documents

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "examples" / "docs"


def cli(*args: str, cwd: Path, **kwargs: Any) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "rechunk.cli", *args], cwd=cwd, text=True,
                          capture_output=True, **kwargs)


@pytest.fixture
def workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    shutil.copytree(DOCS, tmp_path / "docs")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_sync_edit_resync(workdir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, first = run_json(capsys, "sync", "docs")
    assert code == 0
    assert first["documents"]["new"] == len(list(DOCS.glob("*.md")))
    assert first["inputs"]["embedded"] == first["chunks"]["added"] > 0
    assert first["stale_check"] == "passed"
    # reading the files is a stage of its own: a no-op sync of a big share spends its
    # time there, and the stages summed to a fraction of the run
    assert list(first["seconds"]) == ["read", "chunk", "plan", "embed", "publish", "verify"]
    assert first["seconds"]["read"] > 0

    guide = workdir / "docs" / "sync-guide.md"
    guide.write_text(guide.read_text() + "\n\nA closing paragraph added later.\n")
    code, second = run_json(capsys, "sync", "docs")
    assert code == 0
    assert second["documents"]["changed"] == 1 and second["documents"]["unchanged"] == 3
    assert 0 < second["inputs"]["embedded"] < first["inputs"]["embedded"]

    code, status = run_json(capsys, "status")
    assert status["documents"] == 4 and status["stale_check"] == "passed"
    assert len(status["policies"]) == 1 and len(status["models"]) == 1

    # unquoted words are one query (the README's example, as a shell passes it)
    code, hits = run_json(capsys, "query", "what", "happens", "when", "a", "sync", "crashes?",
                          "-k", "3")
    assert code == 0 and len(hits) == 3
    assert {"doc_id", "start", "end", "score", "excerpt"} <= set(hits[0])


def test_dry_run_prune_and_skipped_files(workdir: Path,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    code, plan = run_json(capsys, "sync", "docs", "--dry-run")
    assert code == 0 and plan["dry_run"] and plan["chunks"]["added"] > 0
    assert main(["sync", "docs", "--dry-run"]) == 0  # nothing embedded, and it says so
    text = capsys.readouterr().out
    assert f"inputs        {plan['inputs']['embedded']} to embed," in text
    assert " embedded," not in text and "to embed of" in text
    assert not (workdir / ".rechunk" / "qdrant").exists() or not any(
        (workdir / ".rechunk" / "qdrant").iterdir()
    )
    code, first = run_json(capsys, "sync", "docs")
    chunks_of = {d["doc_id"]: d["chunks"] for d in first["per_document"]}
    assert main(["sync", "docs", "--dry-run"]) == 0  # a plan with nothing in it says so
    assert "plan: nothing to change\n" in capsys.readouterr().out
    (workdir / "docs" / "reuse-cache.md").unlink()
    (workdir / "docs" / "broken.md").write_bytes(b"caf\xe9\n")
    code, kept = run_json(capsys, "sync", "docs")
    assert code == 1  # a skipped file is a partial failure
    assert kept["skipped_files"][0]["doc_id"] == "broken.md"
    assert kept["chunks_not_given"] == chunks_of["reuse-cache.md"]
    assert kept["documents"]["deleted"] == 0
    code, pruned = run_json(capsys, "sync", "docs", "--prune")
    assert pruned["documents"]["deleted"] == 1 and pruned["chunks_not_given"] == 0
    code, status = run_json(capsys, "status")
    assert status["documents"] == 3


def test_noop_sync_loads_no_model(workdir: Path) -> None:
    assert cli("sync", "docs", cwd=workdir).returncode == 0
    probe = (
        "import json, sys\n"
        "from rechunk.cli import main\n"
        "code = main(['sync', 'docs', '--json'])\n"
        "heavy = [m for m in ('torch', 'sentence_transformers', 'transformers') if m in sys.modules]\n"
        "print('HEAVY=' + json.dumps(heavy), file=sys.stderr)\n"
        "raise SystemExit(code)\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], cwd=workdir, text=True,
                          capture_output=True)
    assert done.returncode == 0, done.stderr
    assert "HEAVY=[]" in done.stderr
    report = json.loads(done.stdout)
    assert report["documents"]["unchanged"] == 4 and report["model_loaded"] is False


def test_second_process_gets_store_in_use(workdir: Path) -> None:
    from qdrant_client import QdrantClient

    (workdir / ".rechunk" / "qdrant").mkdir(parents=True)
    holder = QdrantClient(path=str(workdir / ".rechunk" / "qdrant"))
    try:
        done = cli("status", cwd=workdir)
    finally:
        holder.close()
    assert done.returncode == 3
    assert "store is in use" in done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_signal_during_embedding_is_repaired_by_next_sync(tmp_path: Path,
                                                          sig: signal.Signals) -> None:
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    for i in range(16):
        body = "\n\n".join(f"Document {i}, paragraph {j}: " + " ".join(
            f"w{(i * 31 + j * 7 + k) % 997}" for k in range(50)) for j in range(8))
        (corpus / f"doc{i:02}.md").write_text(body)
    # a shell starts a background job with SIGINT ignored, and the child would inherit
    # that (Python then installs no KeyboardInterrupt handler): give it the default back
    process = subprocess.Popen([sys.executable, "-m", "rechunk.cli", "sync", "corpus"],
                               cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True,
                               preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    cache = tmp_path / ".rechunk" / "cache.sqlite"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and process.poll() is None:
        # interrupt once the first batch of vectors is in the cache
        if cache.exists() and _cached_entries(cache) > 0:
            break
        time.sleep(0.2)
    assert process.poll() is None, "the sync ended before it could be interrupted"
    process.send_signal(sig)
    _out, err = process.communicate(timeout=60)
    assert process.returncode == 130, err
    assert "interrupted" in err and "Traceback" not in err

    done = cli("sync", "corpus", "--json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["stale_check"] == "passed"
    assert report["inputs"]["from_cache"] > 0  # the interrupted run's work was kept
    status = json.loads(cli("status", "--json", cwd=tmp_path).stdout)
    assert status["documents"] == 16 and status["stale_check"] == "passed"


def _cached_entries(cache: Path) -> int:
    from rechunk import CacheError, SQLiteCache

    try:
        with SQLiteCache(cache, readonly=True) as reader:
            return reader.stats().entries
    except CacheError:  # still being created
        return 0


def test_exit_codes(workdir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["sync", "docs", "--store", "mysql://nope"]) == 2
    assert "unknown store URI" in capsys.readouterr().err
    assert main(["sync", "no-such-folder"]) == 2
    capsys.readouterr()
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    assert main(["status", "--store", f"chroma+http://127.0.0.1:{port}"]) == 3
    assert "cannot reach" in capsys.readouterr().err
    assert main(["status"]) == 3  # nothing synced yet: no collection
    with pytest.raises(SystemExit) as usage:
        main(["sync"])
    assert usage.value.code == 2
    assert main(["query", " "]) == 2
    assert "query text is empty" in capsys.readouterr().err
    for k in ("0", "-3"):  # not quietly one chunk
        assert main(["query", "crashes", "-k", k]) == 2
        assert "give a positive number of chunks" in capsys.readouterr().err
    # --debug works before or after the command: the whole traceback, the same exit code
    for args in (["--debug", "sync", "no-such-folder"], ["sync", "no-such-folder", "--debug"]):
        assert main(args) == 2
        err = capsys.readouterr().err
        assert err.startswith("Traceback") and "ConfigError: no such file" in err
    with pytest.raises(SystemExit) as version:
        main(["--version"])
    assert version.value.code == 0 and capsys.readouterr().out.startswith("rechunk ")
    module = subprocess.run([sys.executable, "-m", "rechunk", "--version"], text=True,
                            capture_output=True)
    assert module.returncode == 0 and module.stdout.startswith("rechunk ")


def test_servers_that_hang_or_answer_html_fail_in_one_line(
    workdir: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import socket
    import threading

    import rechunk.adapters.uri as uri

    monkeypatch.setattr(uri, "PROBE_SECONDS", 0.5)
    silent = socket.create_server(("127.0.0.1", 0))  # accepts, never answers
    html = http.server.ThreadingHTTPServer(("127.0.0.1", 0), HTMLEverywhere)
    threading.Thread(target=html.serve_forever, daemon=True).start()
    try:
        for scheme in ("qdrant+http", "chroma+http"):
            started = time.monotonic()
            store = f"{scheme}://127.0.0.1:{silent.getsockname()[1]}"
            assert main(["status", "--store", store]) == 3
            assert "did not answer within 0.5 s" in capsys.readouterr().err
            assert time.monotonic() - started < 10
            assert main(["status", "--store", f"{scheme}://127.0.0.1:{html.server_port}"]) == 3
            err = capsys.readouterr().err
            assert len(err.splitlines()) == 1 and err.startswith("rechunk: error: ")
    finally:
        html.shutdown()
        silent.close()
    assert main(["status", "--store", "qdrant+http://[::1"]) == 2  # not a URL
    assert "not a valid URL" in capsys.readouterr().err


class HTMLEverywhere(http.server.BaseHTTPRequestHandler):
    """A web server where a vector store was expected: an HTML page for every request."""

    def _page(self) -> None:
        body = b"<!DOCTYPE html>\n<html>\n<body>\n<p>Not a vector store</p>\n</body>\n</html>\n"
        self.send_response(404)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST = do_PUT = do_DELETE = _page

    def log_message(self, *args: Any) -> None:
        pass


def test_query_and_status_limits(workdir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["sync", "docs"]) == 0
    capsys.readouterr()
    assert main(["query", "caf\udce9"]) == 2  # a byte the terminal could not decode
    assert "not valid UTF-8" in capsys.readouterr().err
    assert main(["query", *["word"] * 300]) == 2
    assert "shorten it" in capsys.readouterr().err
    code, hits = run_json(capsys, "query", "sync", "-k", str(2**63 - 1))
    code, status = run_json(capsys, "status")
    assert code == 0 and len(hits) == status["chunks"] and status["other_points"] == 0
    from qdrant_client import QdrantClient, models

    client = QdrantClient(path=str(workdir / ".rechunk" / "qdrant"))
    target = client.get_aliases().aliases[0].collection_name if client.get_aliases().aliases \
        else "rechunk"
    client.upsert(target, [models.PointStruct(id=str(uuid.uuid4()), vector=[0.1] * 384,
                                              payload={"page_content": "x", "metadata": {}})])
    client.close()
    code, status = run_json(capsys, "status")
    assert status["other_points"] == 1
    assert main(["status"]) == 0
    assert "1 not written by rechunk" in capsys.readouterr().out


def test_readers_read_a_collection_in_the_layout_it_was_written_in(
    workdir: Path, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """status, query and eval without --layout follow the collection (the default is
    langchain); a --layout given that is not the collection's is refused (see
    test_layout_switch_is_refused)."""
    assert main(["sync", "docs", "--layout", "llamaindex"]) == 0
    capsys.readouterr()
    code, status = run_json(capsys, "status")
    assert code == 0 and status["documents"] == len(list(DOCS.glob("*.md")))
    assert status["other_points"] == 0 and status["stale_check"] == "passed"
    code, hits = run_json(capsys, "query", "what a sync does after a crash", "-k", "2")
    assert code == 0 and len(hits) == 2 and hits[0]["doc_id"].endswith(".md")
    queries = tmp_path / "queries.jsonl"
    queries.write_text(json.dumps({"query": "a crash", "doc_id": hits[0]["doc_id"]}) + "\n")
    code, evaluated = run_json(capsys, "eval", str(queries), "-k", "3")
    assert code == 0 and evaluated


def test_sync_in_the_llamaindex_layout_links_previous_and_next(workdir: Path) -> None:
    """Each document's points form one PREVIOUS/NEXT chain in ordinal order, as
    LlamaIndex readers expect of nodes (issue 17, item 8)."""
    from qdrant_client import QdrantClient

    assert main(["sync", "docs", "--layout", "llamaindex"]) == 0
    client = QdrantClient(path=str(workdir / ".rechunk" / "qdrant"))
    try:
        aliases = client.get_aliases().aliases
        name = aliases[0].collection_name if aliases else "rechunk"
        points = client.scroll(name, limit=10_000, with_payload=True)[0]
    finally:
        client.close()
    by_doc: dict[str, list[tuple[int, str, dict[str, Any]]]] = {}
    for p in points:
        payload = p.payload or {}
        node = json.loads(payload["_node_content"])
        by_doc.setdefault(payload["doc_id"], []).append(
            (payload["ordinal"], str(p.id), node["relationships"])
        )
    assert len(by_doc) == len(list(DOCS.glob("*.md")))
    for chain in by_doc.values():
        chain.sort()
        ids = [point_id for _, point_id, _ in chain]
        for i, (_, _, relations) in enumerate(chain):
            assert relations.get("2", {}).get("node_id") == (ids[i - 1] if i else None)
            assert relations.get("3", {}).get("node_id") == (ids[i + 1] if i + 1 < len(ids) else None)


@pytest.mark.parametrize("kind", ["qdrant", "chroma"])
def test_the_chunks_not_given_are_counted_without_reading_a_doc_id(
    kind: str, workdir: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A sync without --prune counts the chunks of the stored documents it was not given
    and says so, with no read of any doc_id (a read of the whole collection), also
    when a file was skipped."""
    from rechunk.adapters.chroma import ChromaStore
    from rechunk.adapters.qdrant import QdrantStore

    store = QdrantStore if kind == "qdrant" else ChromaStore
    where = ["--store", f"{kind}:{workdir / 'db'}"]
    code, first = run_json(capsys, "sync", "docs", *where)
    chunks_of = {d["doc_id"]: d["chunks"] for d in first["per_document"]}
    monkeypatch.setattr(store, "doc_ids", lambda self: pytest.fail("read every doc_id"))
    code, again = run_json(capsys, "sync", "docs", *where)
    assert code == 0 and again["chunks_not_given"] == 0
    (workdir / "docs" / "reuse-cache.md").unlink()
    (workdir / "docs" / "broken.md").write_bytes(b"caf\xe9\n")
    assert main(["sync", "docs", *where]) == 1
    out = capsys.readouterr().out
    said = " ".join(out.split())  # a file was skipped: its chunks are among them
    assert f"{chunks_of['reuse-cache.md']} chunks of documents this sync did not read" in said


def test_status_advises_a_server_past_the_embedded_size(
    workdir: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import rechunk.adapters.qdrant as adapter

    assert main(["sync", "docs"]) == 0
    capsys.readouterr()
    code, status = run_json(capsys, "status")
    assert code == 0 and status["warnings"] == []
    monkeypatch.setattr(adapter, "EMBEDDED_POINTS_ADVICE", status["chunks"] - 1)
    code, status = run_json(capsys, "status")
    assert code == 0 and "move the collection to a Qdrant server" in status["warnings"][0]
    assert main(["status"]) == 0
    assert "warning: embedded Qdrant holds" in capsys.readouterr().err


def test_a_byte_order_mark_is_not_text(tmp_path: Path) -> None:
    (tmp_path / "bom.md").write_bytes("\ufeff# Title\n\nBody.\n".encode())
    files = read_documents([str(tmp_path)], ["*.md"])
    assert [d.text for d in files.documents] == ["# Title\n\nBody.\n"]


def test_one_file_reached_twice_is_one_document(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    (docs / "sub").mkdir(parents=True)
    (docs / "a.md").write_text("alpha")
    (docs / "sub" / "b.md").write_text("beta")
    (docs / "link.md").symlink_to(docs / "sub" / "b.md")
    files = read_documents([docs, docs / "a.md", tmp_path / "docs"], ["*.md"])
    assert sorted(d.doc_id for d in files.documents) == ["a.md", "sub/b.md"]
    # a file named directly keeps the doc_id it has under a folder synced before
    alone = read_documents([docs / "sub" / "b.md"], ["*.md"], within=[docs])
    assert [d.doc_id for d in alone.documents] == ["sub/b.md"]


def test_unusable_names_and_patterns(tmp_path: Path) -> None:
    (tmp_path / "ok.md").write_text("fine")
    with open(os.path.join(os.fsencode(tmp_path), b"caf\xe9.md"), "wb") as f:
        f.write(b"text")  # a name that is not UTF-8: skipped, not fatal
    files = read_documents([tmp_path], ["*.md"])
    assert [d.doc_id for d in files.documents] == ["ok.md"]
    assert files.skipped[0][0] == "caf\\udce9.md"
    assert files.skipped[0][1].startswith("its path is not valid UTF-8")
    (tmp_path / "blank.md").write_text(" \n")
    assert read_documents([tmp_path], ["*.md"]).empty == ["blank.md"]
    for pattern in ("/tmp/*.md", ""):
        with pytest.raises(ConfigError, match="--glob"):
            read_documents([tmp_path], [pattern])


def test_sync_and_reindex_follow_gitignore(notes: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    (notes / ".gitignore").write_text("drafts/\n")
    (notes / "drafts").mkdir()
    (notes / "drafts" / "wip.md").write_text("# wip\n\nNot ready yet.\n")
    assert main(["sync", "notes"]) == 0
    out = capsys.readouterr().out
    assert "0 matching file(s) and 1 folder(s) excluded by .gitignore (--no-ignore" in out
    code, report = run_json(capsys, "sync", "notes", "--no-ignore")
    assert code == 0 and report["documents"]["new"] == 1 and report["ignored"] == []
    # without PATH, reindex reads each recorded folder as it was last synced
    code, result = run_json(capsys, "reindex", "--policy", "recursive")
    assert code == 0 and result["sync"]["documents"]["synced"] == 6
    assert main(["reindex", "--policy", "fixed", "--no-ignore"]) == 2
    assert "as it was synced" in capsys.readouterr().err
    # when every match is excluded, the warning says so, and nothing is written
    assert main(["sync", "notes", "--glob", "wip.md"]) == 0
    assert "excluded by .gitignore" in capsys.readouterr().err
    code, nothing = run_json(capsys, "sync", "notes", "--glob", "wip.md")
    assert code == 0 and nothing["nothing_matched"] and nothing["ignored"] == ["drafts/"]
    # a parser of the usual report finds its counts (a CI user's broke on their absence)
    assert nothing["documents"]["new"] == nothing["inputs"]["embedded"] == 0
    assert nothing["tokens_embedded"] == 0 and nothing["chunks"]["added"] == 0


def test_reindex_reads_roots_recorded_by_earlier_versions(
    notes: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Manifests written before .gitignore support map each root to its globs; those
    written before --include-generated say nothing of generated files; those written
    before store URIs had one spelling key the store as it was written."""
    assert main(["sync", "notes", "--glob", "alpha.md", "--glob", "beta.md"]) == 0
    manifest = Path(".rechunk") / "manifest.json"
    entry = json.loads(manifest.read_text())
    (key,) = entry
    assert key == f"qdrant:{os.path.realpath('.rechunk/qdrant')} rechunk"
    root = os.path.abspath(notes)
    how = {"globs": ["alpha.md", "beta.md"], "gitignore": True}
    assert entry[key]["roots"] == {
        root: {**how, "generated": False, "max_bytes": None, "format": None, "id_field": None,
               "encoding": None, "html_include": [], "html_exclude": []}
    }  # fmt: skip
    for older, written in ((["alpha.md", "beta.md"], key), (how, key),
                           (how, "qdrant:./.rechunk/qdrant/ rechunk")):  # fmt: skip
        manifest.write_text(json.dumps({written: {"roots": {root: older}}}))
        capsys.readouterr()
        code, result = run_json(capsys, "reindex", "--policy", "recursive")
        assert code == 0 and result["sync"]["documents"]["synced"] == 2
    # the store spelled another way is the same store: its entry is found, and a sync
    # records it under the one spelling
    code, result = run_json(capsys, "reindex", "--policy", "structured", "--store",
                            f"qdrant:{os.path.abspath('.rechunk/qdrant')}/")  # fmt: skip
    assert code == 0 and result["sync"]["documents"]["synced"] == 2
    assert main(["sync", "notes", "--glob", "alpha.md", "--store", "qdrant:.rechunk/qdrant/"]) == 0
    assert list(json.loads(manifest.read_text())) == [key]


def test_folders_recorded_under_two_spellings_of_a_store_are_merged(
    notes: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """An earlier version kept one manifest entry per spelling of the store: the first
    write after the upgrade kept one entry's folders and dropped the other's, and the
    doc_id check no longer knew that folder (a file of the first then replaced its
    document in silence)."""
    other = notes.parent / "other"
    other.mkdir()
    (other / "zeta.md").write_text("# zeta\n\nA note only this folder has.\n")
    assert main(["sync", "notes"]) == 0
    assert main(["sync", "other"]) == 0
    manifest = Path(".rechunk") / "manifest.json"
    ((key, entry),) = json.loads(manifest.read_text()).items()
    notes_root, other_root = os.path.abspath(notes), os.path.abspath(other)
    how = entry["roots"][notes_root]
    manifest.write_text(json.dumps({  # as an earlier version wrote them
        "qdrant:.rechunk/qdrant rechunk": {"roots": {notes_root: how}},
        "qdrant:./.rechunk/qdrant/ rechunk": {"roots": {other_root: how}},
    }))  # fmt: skip
    capsys.readouterr()
    assert main(["sync", "notes"]) == 0
    assert json.loads(manifest.read_text()) == {
        key: {"roots": {other_root: how, notes_root: how}}
    }
    (notes / "zeta.md").write_text("# Not zeta\n\nWould replace the other folder's.\n")
    assert main(["sync", "notes"]) == 2
    assert "would replace" in capsys.readouterr().err


def test_a_damaged_manifest_is_set_aside_not_overwritten(
    notes: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A truncated manifest was read as empty and rewritten with the one entry of the
    sync, losing every other collection's folders in silence."""
    assert main(["sync", "notes"]) == 0
    manifest = Path(".rechunk") / "manifest.json"
    damaged = manifest.read_text()[:-5]
    manifest.write_text(damaged)
    capsys.readouterr()
    with pytest.warns(UserWarning, match="is not JSON .*left as it is"):
        assert main(["sync", "notes", "--dry-run"]) == 0  # a dry run changes nothing
    assert manifest.read_text() == damaged
    with pytest.warns(UserWarning, match="is not JSON .*set aside as"):
        assert main(["sync", "notes"]) == 0
    (aside,) = Path(".rechunk").glob("manifest.json.damaged-*")
    assert aside.read_text() == damaged
    assert json.loads(manifest.read_text())  # written anew


def test_a_manifest_that_cannot_be_written_leaves_the_sync_done(
    notes: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The sync had published, then failed with exit 2 and no summary because the manifest
    could not be written (cron as another user). It is a warning now."""
    assert main(["sync", "notes"]) == 0
    (notes / "alpha.md").write_text("# alpha\n\nAn edit.\n")
    (Path(".rechunk") / f"manifest.json.{os.getpid()}.tmp").mkdir()  # cannot be written
    capsys.readouterr()
    with pytest.warns(UserWarning, match="cannot record the folders synced"):
        code, report = run_json(capsys, "sync", "notes")
    assert code == 0 and report["documents"]["changed"] == 1


def test_manifest_writers_at_once_keep_each_others_entries(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two processes recording folders at once: read, change and write under a lock, each
    through its own temporary file (a shared one lost entries and raised
    FileNotFoundError)."""
    monkeypatch.chdir(tmp_path)
    script = (
        "import sys\n"
        "from types import SimpleNamespace as N\n"
        "from rechunk.cli.manifest import record_roots\n"
        "from rechunk.sources import ParseOptions\n"
        "for i in range(60):\n"
        "    o = N(store='qdrant:.rechunk/qdrant', collection=f'{sys.argv[1]}{i}')\n"
        "    inputs = N(glob=['*'], no_ignore=False, include_generated=False,\n"
        "               max_file_bytes=None, format=None, parse=ParseOptions())\n"
        "    record_roots(o, inputs, ['/r'], replace=False)\n"
    )
    writers = [subprocess.Popen([sys.executable, "-c", script, name], cwd=tmp_path,
                                stderr=subprocess.PIPE, text=True) for name in "ab"]  # fmt: skip
    for writer in writers:
        assert writer.wait(timeout=120) == 0, writer.stderr.read()  # type: ignore[union-attr]
    entries = json.loads((tmp_path / ".rechunk" / "manifest.json").read_text())
    assert len(entries) == 120


@pytest.mark.skipif(shutil.which("setpriv") is None, reason="needs setpriv (util-linux)")
def test_a_folder_that_cannot_be_listed_is_skipped(tmp_path: Path) -> None:
    """rglob passes over a folder it cannot list in silence; its documents must count as
    skipped (kept by --prune), not as deleted. Root reads anything, so the check runs
    without the capabilities that let it."""
    (tmp_path / "locked").mkdir()
    (tmp_path / "locked" / "l.md").write_text("lemon")
    (tmp_path / "a.md").write_text("apple")
    (tmp_path / "locked").chmod(0)
    script = (
        "import json, sys; from rechunk.sources.files import read_documents; "
        "f = read_documents([sys.argv[1]], ['*.md']); "
        "print(json.dumps([[d.doc_id for d in f.documents], f.skipped, f.unlisted, "
        "f.covers('locked/l.md')]))"
    )
    drop = "-dac_override,-dac_read_search"
    run = subprocess.run(
        ["setpriv", f"--inh-caps={drop}", f"--bounding-set={drop}", sys.executable, "-c",
         script, str(tmp_path)], capture_output=True, text=True)
    (tmp_path / "locked").chmod(0o755)
    if run.returncode != 0 and "setpriv" in run.stderr:
        pytest.skip(f"setpriv cannot drop capabilities here: {run.stderr.strip()}")
    documents, skipped, unlisted, covered = json.loads(run.stdout)
    assert documents == ["a.md"] and unlisted == ["locked/"] and covered
    assert skipped[0][0] == "locked/" and "Permission denied" in skipped[0][1]


def test_bench_command(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    revisions = ROOT / "examples" / "revisions"
    corpus = tmp_path / "corpus.jsonl"
    row = {"id": "guide", "lang": "en",
           "old": (revisions / "chunking-guide.v1.md").read_text(),
           "new": (revisions / "chunking-guide.v2.md").read_text()}
    corpus.write_text(json.dumps(row) + "\n")
    chart = tmp_path / "chart.png"
    code = main(["bench", str(corpus), "--chunker", "cdc", "--chunker", "fixed", "--json",
                 "--plot", str(chart)])
    result = json.loads(capsys.readouterr().out)
    assert code == 0 and set(result["chunkers"]) == {"cdc", "fixed"}
    assert result["chunkers"]["cdc"]["control_max"] == 0.0
    assert chart.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert main(["bench", str(corpus), "--plot", str(tmp_path / "bands")]) == 0
    out = capsys.readouterr().out  # no suffix: the chart is bands.png, and says so
    assert "R_c, en\n" in out and f"chart written to {tmp_path / 'bands.png'}\n" in out
    assert max(len(line) for line in out.splitlines()) <= 100  # fits a terminal
    assert (tmp_path / "bands.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_bench_corpus_and_control(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from rechunk import Chunk
    from rechunk.chunking.bench import load_pairs, run_bench

    calls = iter(range(10**6))

    def unstable(text: str) -> list[Chunk]:  # cuts differently on every call
        return [Chunk(0, len(text), f"{text} #{next(calls)}", 3)]

    result = run_bench([{"id": "a", "lang": "en", "old": "x", "new": "x"}], {"u": unstable})
    assert result["chunkers"]["u"]["control_max"] == 1.0  # the old text chunked again
    # a pair with no edit is in no band (its R_c of 0 pulled the small edits' mean down)
    assert result["unchanged"] == 1 and result["chunkers"]["u"]["cells"]["en/small"]["n"] == 0
    # failures are counted in the table of their pair's language
    from rechunk.chunking.bench import format_table

    def fails_on_zh(text: str) -> list[Chunk]:
        if "\u4e2d" in text:
            raise ValueError("no")
        return [Chunk(0, len(text), text, 1)]

    table = format_table(run_bench([{"id": "e", "lang": "en", "old": "a b", "new": "a c"},
                                    {"id": "z", "lang": "zh", "old": "\u4e2d", "new": "x"}],
                                   {"f": fails_on_zh}))  # fmt: skip
    en, zh = table.split("R_c, zh")
    assert "failures" not in en and "failures: 1" in zh
    corpus = tmp_path / "c.jsonl"
    line = {"old": "a\u2028b", "new": "a\u2028c", "id": "p", "lang": "zh"}
    corpus.write_text(json.dumps(line, ensure_ascii=False) + "\n", encoding="utf-8")
    assert [p["new"] for p in load_pairs(corpus)] == ["a\u2028c"]  # not split at U+2028
    for bad, message in [({"id": "p"}, "also the id of line 1"), ({"lang": None}, "'lang'"),
                         ({"id": ["x"]}, "'id'")]:
        corpus.write_text(json.dumps(line) + "\n" + json.dumps({**line, **bad}) + "\n")
        with pytest.raises(InputError, match=message):
            load_pairs(corpus)
    corpus.write_text(json.dumps(line) + "\n")
    for plot in ("/", ".", str(tmp_path / "chart.xyz")):
        assert main(["bench", str(corpus), "--chunker", "fixed", "--plot", plot]) == 2
        assert "--plot" in capsys.readouterr().err


def test_every_command_has_help() -> None:
    for command in ("sync", "status", "query", "reindex", "measure", "bench"):
        done = subprocess.run([sys.executable, "-m", "rechunk.cli", command, "--help"],
                              text=True, capture_output=True, env={**os.environ})
        assert done.returncode == 0, command
        assert "usage: rechunk " + command in done.stdout


def test_reindex_command(workdir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["sync", "docs", "--policy", "recursive"]) == 0
    capsys.readouterr()
    for dry in ((), ("--dry-run",)):  # a dry run planned the change the sync refuses
        assert main(["sync", "docs", "--policy", "fixed", *dry]) == 2  # a reindex, not a sync
        err = capsys.readouterr().err
        assert "--policy recursive" in err and "rechunk reindex --policy fixed" in err
    code, result = run_json(capsys, "reindex", "--policy", "fixed")  # folders from the last sync
    assert code == 0 and result["switched"]
    assert result["collection"].startswith("rechunk__fixed-")
    code, status = run_json(capsys, "status")
    assert status["aliases"]["rechunk"] == result["collection"]
    assert list(status["policies"]) == [result["sync"]["policy"]]
    assert status["generations"] == sorted([result["previous"], result["collection"]])
    assert main(["status"]) == 0
    assert f"{result['collection']} (live)" in capsys.readouterr().out
    code, again = run_json(capsys, "sync", "docs", "--policy", "fixed")
    assert code == 0 and again["documents"]["unchanged"] == 4
    # without --policy a sync keeps to the policy the live generation was built with (a
    # cron job's plain `rechunk sync docs` failed after every reindex)
    code, plain = run_json(capsys, "sync", "docs")
    assert code == 0 and plain["documents"]["unchanged"] == 4
    assert plain["policy"] == result["sync"]["policy"]
    # back onto the recursive generation, built before a file went: its chunks are
    # deleted there, and the summary says so (it listed only what was added and kept)
    gone = sorted((workdir / "docs").glob("*.md"))[0]
    gone.unlink()
    assert main(["sync", "docs", "--prune"]) == 0
    capsys.readouterr()
    assert main(["reindex", "--policy", "recursive"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "deleted (1 document(s) gone since the generation was built)" in out


def test_reindex_on_chroma_says_what_to_switch(notes: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["sync", "notes", "--store", "chroma:st"]) == 0
    capsys.readouterr()
    assert main(["reindex", "--policy", "fixed", "--store", "chroma:st", "--drop-old"]) == 0
    out = capsys.readouterr().out
    assert "--collection rechunk__fixed-" in out
    assert "--drop-old    has no effect without aliases: rechunk was kept" in out
    assert "chunks        " in out  # what the generation kept shows beside what it added
    # the generation it names is one later commands can reindex without PATH: its folders
    # were recorded under its name
    generation = out.split("--collection ")[1].split()[0]
    # a sync of the generation it names keeps its policy (it took the default, and cut
    # every document again)
    code, again = run_json(capsys, "sync", "notes", "--store", "chroma:st", "--collection",
                           generation)  # fmt: skip
    assert code == 0 and again["policy"].startswith("fixed-")
    assert again["documents"]["unchanged"] == 5 and again["inputs"]["embedded"] == 0
    assert main(["reindex", "--policy", "cdc", "--store", "chroma:st",
                 "--collection", generation]) == 0  # fmt: skip
    # the cron line that still syncs the old name is told where readers went
    from rechunk.sync.generations import NewerGenerationWarning

    said = f"built from it \\('{generation}'\\).*\\(--collection {generation};"
    with pytest.warns(NewerGenerationWarning, match=said):
        assert main(["sync", "notes", "--store", "chroma:st"]) == 0
    # the generation's own sync: its nested generation is named the same way
    with pytest.warns(NewerGenerationWarning, match=f"--collection {generation}__cdc-"):
        assert main(["sync", "notes", "--store", "chroma:st", "--collection", generation]) == 0


def test_reports_carry_no_document_text(workdir: Path, capsys: pytest.CaptureFixture[str],
                                        caplog: pytest.LogCaptureFixture) -> None:
    import logging

    caplog.set_level(logging.DEBUG)
    assert main(["sync", "docs", "--json"]) == 0
    guide = workdir / "docs" / "sync-guide.md"
    guide.write_text(guide.read_text().replace("Every stage can fail", "Any stage may fail"))
    assert main(["sync", "docs", "--json"]) == 0
    assert main(["status", "--json"]) == 0
    out = capsys.readouterr().out + "\n".join(r.getMessage() for r in caplog.records)
    words = " ".join(p.read_text() for p in (workdir / "docs").glob("*.md")).split()
    phrases = {" ".join(words[i : i + 3]) for i in range(len(words) - 2)}
    assert not [p for p in phrases if p in out]


@pytest.fixture
def notes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Five short notes in tmp_path/notes, with tmp_path as the working folder."""
    folder = tmp_path / "notes"
    folder.mkdir()
    for name in ("alpha", "beta", "gamma", "delta", "eps"):
        (folder / f"{name}.md").write_text(
            f"# {name}\n\nThe note called {name} talks about {name} things.\n"
        )
    monkeypatch.chdir(tmp_path)
    return folder


def test_reindex_without_paths_never_drops_live_documents(
    notes: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["sync", "notes"]) == 0
    assert main(["sync", "notes/alpha.md"]) == 0  # a later sync of one file
    capsys.readouterr()
    code, result = run_json(capsys, "reindex", "--policy", "recursive")
    assert code == 0 and result["sync"]["documents"]["synced"] == 5
    (notes / "beta.md").unlink()
    assert main(["reindex", "--policy", "fixed"]) == 2
    assert "beta.md" in capsys.readouterr().err
    code, status = run_json(capsys, "status")
    assert status["documents"] == 5 and status["aliases"]["rechunk"] == result["collection"]
    code, pruned = run_json(capsys, "reindex", "--policy", "fixed", "--prune")
    assert code == 0 and pruned["sync"]["documents"]["synced"] == 4


@pytest.mark.parametrize(
    "args",
    [
        ["sync", "notes", "--cache", "notes/alpha.md/c.sqlite"],
        ["sync", "notes", "--store", "qdrant:notes/alpha.md/store"],
        ["sync", "notes", "--store", "qdrant:notes/alpha.md"],
        ["sync", "notes", "--store", "qdrant+https://host:notaport"],
        ["sync", "notes", "--store", "chroma:notes/alpha.md"],
        ["sync", "notes", "--store", "http://localhost:6333"],  # no such scheme
        ["reindex", "notes", "--policy", "fixed", "--store", "qdrant:notes/alpha.md"],
        ["sync", "notes", "--cache", "notes/alpha.md", "--store", "qdrant:st"],  # not a cache
        ["bench", "corpus.jsonl", "--plot", "notes/alpha.md/chart.png"],
    ],
)
def test_unusable_paths_are_config_errors_that_leave_nothing_behind(
    notes: Path, capsys: pytest.CaptureFixture[str], args: list[str]
) -> None:
    (notes.parent / "corpus.jsonl").write_text(json.dumps({"old": "a b", "new": "a c"}) + "\n")
    before = sorted(notes.parent.rglob("*"))
    assert main(args) == 2
    captured = capsys.readouterr()
    assert captured.out == ""  # bench stopped before running
    assert captured.err.startswith("rechunk: error: ") and captured.err.count("\n") == 1
    # the cache is opened (and checked) first, and removed again when the store fails
    assert sorted(notes.parent.rglob("*")) == before


@pytest.mark.parametrize("kind", ["qdrant", "chroma"])
def test_layout_switch_is_refused(notes: Path, capsys: pytest.CaptureFixture[str],
                                  kind: str) -> None:
    assert main(["sync", "notes", "--store", f"{kind}:lc"]) == 0
    assert main(["sync", "notes", "--store", f"{kind}:li", "--layout", "llamaindex"]) == 0
    capsys.readouterr()
    for store, wrong, right in ((f"{kind}:lc", "llamaindex", "langchain"),
                                (f"{kind}:li", "langchain", "llamaindex")):
        for command in (["sync", "notes"], ["status"], ["query", "alpha"]):
            assert main([*command, "--store", store, "--layout", wrong]) == 2
            assert f"pass --layout {right}" in capsys.readouterr().err
        code, status = run_json(capsys, "status", "--store", store, "--layout", right)
        assert code == 0 and status["documents"] == 5
    # without --layout a sync follows the collection's own, as status and query read it
    # (every cron line and watch had to repeat --layout llamaindex)
    (notes / "alpha.md").write_text("# alpha\n\nThe note called alpha, edited.\n")
    code, synced = run_json(capsys, "sync", "notes", "--store", f"{kind}:li")
    assert code == 0 and synced["documents"]["changed"] == 1, synced
    code, status = run_json(capsys, "status", "--store", f"{kind}:li", "--layout", "llamaindex")
    assert code == 0 and status["documents"] == 5 and status["stale_check"] == "passed"
    # a refused sync keeps no cache it had to create
    fresh = notes.parent / "fresh" / "cache.sqlite"
    assert main(["sync", "notes", "--store", f"{kind}:lc", "--layout", "llamaindex",
                 "--cache", str(fresh)]) == 2
    assert not fresh.parent.exists()


def test_prune_keeps_unreadable_files(notes: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["sync", "notes"]) == 0
    capsys.readouterr()
    (notes / "beta.md").write_bytes(b"caf\xe9\n")  # exists, but is skipped
    (notes / "gamma.md").unlink()
    code, report = run_json(capsys, "sync", "notes", "--prune")
    assert code == 1
    assert report["documents"]["deleted"] == 1  # gamma.md only
    assert report["documents"]["skipped"] == len(report["skipped_files"]) == 1
    code, status = run_json(capsys, "status")
    assert sorted(status["revisions"]) == ["alpha.md", "beta.md", "delta.md", "eps.md"]
    assert main(["sync", "notes"]) == 1
    out = capsys.readouterr().out
    assert "1 skipped" in out and " updated (payload only)" in out


def test_another_model_is_a_reindex_and_query_refuses_it(
    notes: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from rechunk.integrations.sentence_transformers import SentenceTransformerEmbedder

    # the packaged model under another name: another model_id, the same policy id
    other = notes.parent / "other-model"
    shutil.copytree(SentenceTransformerEmbedder().folder, other, copy_function=os.symlink)
    assert main(["sync", "notes"]) == 0
    capsys.readouterr()
    assert main(["query", "alpha", "--model", str(other)]) == 2
    assert "pass the --model or --embedder it was synced with" in capsys.readouterr().err
    # two ids alike up to their options: the error shows where they differ (it cut both
    # at the first ';' and showed the same text twice)
    from qdrant_client import QdrantClient

    from rechunk.adapters.qdrant import QdrantStore
    from rechunk.cli.compose import check_collection
    from rechunk.integrations.onnx import OnnxEmbedder

    written = OnnxEmbedder().model_id
    client = QdrantClient(path=".rechunk/qdrant")
    try:
        with pytest.raises(ConfigError) as err:
            check_collection(QdrantStore(client, "rechunk"), written.replace("max=256", "max=128"))
    finally:
        client.close()
    assert f"written by {written}, not {written.replace('max=256', 'max=128')};" in str(err.value)
    assert main(["sync", "notes", "--model", str(other)]) == 2  # a usage error, as README says
    assert "reindex" in capsys.readouterr().err
    code, result = run_json(capsys, "reindex", "--policy", "structured", "--model", str(other))
    assert code == 0 and result["switched"]
    assert result["sync"]["model_id"].startswith("st/v1:other-model@")
    code, hits = run_json(capsys, "query", "alpha", "--model", str(other), "-k", "1")
    assert code == 0 and hits[0]["doc_id"] == "alpha.md"
    code, again = run_json(capsys, "sync", "notes", "--model", str(other))
    assert code == 0 and again["documents"]["unchanged"] == 5
    assert main(["query", "alpha"]) == 2  # now the default model is the other one


def test_a_local_model_folder_edited_in_place_says_how_to_rebuild(
    notes: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The same folder, a file of it rewritten (or hashed by a newer recipe): another
    model, and the refusal says why and how to rebuild, where it told the user to pass
    the --model they had passed."""
    from rechunk.integrations.sentence_transformers import SentenceTransformerEmbedder

    model = notes.parent / "m"
    shutil.copytree(SentenceTransformerEmbedder().folder, model, copy_function=os.symlink)
    assert main(["sync", "notes", "--model", str(model)]) == 0
    tokens = model / "special_tokens_map.json"
    text = json.loads(tokens.read_text())
    tokens.unlink()
    tokens.write_text(json.dumps(text, indent=2))  # the same content, other bytes
    capsys.readouterr()
    assert main(["sync", "notes", "--model", str(model)]) == 2
    err = capsys.readouterr().err
    assert "a local model folder is known by a hash" in err
    assert "rechunk reindex --policy KIND --model PATH" in err
    code, result = run_json(capsys, "reindex", "--policy", "structured", "--model", str(model))
    assert code == 0 and result["switched"]


def test_read_only_commands_create_nothing(notes: Path, capsys: pytest.CaptureFixture[str]) -> None:
    before = sorted(notes.parent.rglob("*"))
    for args in (["status", "--store", "qdrant:notes"], ["status", "--store", "chroma:notes"],
                 ["query", "alpha", "--store", "qdrant:missing"], ["status"]):
        assert main(args) == 3
        assert "no store at" in capsys.readouterr().err
    assert sorted(notes.parent.rglob("*")) == before


@pytest.mark.parametrize("args", [["sync", "empty"], ["sync", "notes", "--glob", "*.zzz"],
                                  ["sync", "notes", "--glob", "*.zzz", "--prune"]])
def test_sync_matching_nothing_warns_and_writes_nothing(
    notes: Path, capsys: pytest.CaptureFixture[str], args: list[str]
) -> None:
    (notes.parent / "empty").mkdir()
    before = sorted(notes.parent.rglob("*"))
    assert main(args) == 0
    err = capsys.readouterr().err
    # the patterns are named when given ("matching *" read as if typed)
    given = "--glob" in args
    assert ("no readable file matching *.zzz under" in err) == given
    assert ("no readable file under empty" in err) == (not given)
    assert ("drop the collection" in err) == ("--prune" in args)
    assert sorted(notes.parent.rglob("*")) == before


def test_a_folder_whose_files_would_replace_another_folders_is_refused(
    notes: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Two folders, each with an alpha.md: a doc_id is a path below the folder synced,
    so syncing the second after the first would replace the first's documents without a
    word. It is refused, as syncing both at once is, and nothing changes."""
    other = notes.parent / "other"
    other.mkdir()
    (other / "alpha.md").write_text("# Another alpha\n\nNothing like the first one.\n")
    (other / "zeta.md").write_text("# zeta\n\nA note only this folder has.\n")
    assert main(["sync", "notes"]) == 0
    capsys.readouterr()
    assert main(["sync", "other"]) == 2
    err = capsys.readouterr().err
    assert "would replace" in err and "notes/alpha.md" in err and "--collection" in err
    assert "--prune" in err  # the way out when the other folder is to go
    assert main(["sync", "notes", "other"]) == 2  # as before: two files, one doc_id
    capsys.readouterr()
    code, status = run_json(capsys, "status")
    assert status["documents"] == 5
    # a file of the folder itself, or a folder of other names, is no clash
    (other / "alpha.md").unlink()
    code, report = run_json(capsys, "sync", "other")
    assert code == 0 and report["documents"]["new"] == 1
    code, report = run_json(capsys, "sync", "notes")
    assert code == 0 and report["documents"]["unchanged"] == 5
    # another collection holds another folder's names
    code, report = run_json(capsys, "sync", "other", "--collection", "separate")
    assert code == 0


def test_a_subfolder_synced_alone_keeps_its_files_doc_ids(
    notes: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`sync notes`, an edit in notes/guides, then `sync notes/guides`: its files are the
    documents they are under notes (guides/x.md). They were named x.md, a second
    document beside the old revision, which queries still ranked first. Two PATHs, one
    inside the other, name the inner one's files the same in either order."""
    guides = notes / "guides"
    guides.mkdir()
    (guides / "backup.md").write_text("# Backup\n\nBackups run at 01:00.\n")
    assert main(["sync", "notes"]) == 0
    capsys.readouterr()
    (guides / "backup.md").write_text("# Backup\n\nBackups run at 03:00.\n")
    code, report = run_json(capsys, "sync", "notes/guides")
    assert code == 0 and report["documents"]["changed"] == 1 and report["documents"]["new"] == 0
    (guides / "backup.md").write_text("# Backup\n\nBackups run at 04:00.\n")
    code, report = run_json(capsys, "sync", "notes/guides", "notes")
    assert code == 0 and report["documents"]["changed"] == 1 and report["documents"]["new"] == 0
    # a link to the subfolder is the subfolder
    (notes.parent / "link").symlink_to(guides)
    code, report = run_json(capsys, "sync", "link")
    assert code == 0 and report["documents"] == {**report["documents"], "new": 0, "unchanged": 1}
    code, status = run_json(capsys, "status")
    assert status["documents"] == 6


def test_a_release_link_switched_to_the_next_release_syncs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`current -> v1` synced, then `current -> v2`: the same folder, named the same. The
    manifest recorded v1 (the link resolved), and every later sync of current was
    refused as a clash with v1, with --prune too, for as long as v1 existed."""
    monkeypatch.chdir(tmp_path)
    for release in ("v1", "v2"):
        (tmp_path / release).mkdir()
        for name in ("r1", "r2"):
            (tmp_path / release / f"{name}.md").write_text(f"# {name}\n\nDoc {name} of {release}.\n")
    (tmp_path / "current").symlink_to("v1")
    assert main(["sync", "current"]) == 0
    (tmp_path / "current").unlink()
    (tmp_path / "current").symlink_to("v2")
    capsys.readouterr()
    code, report = run_json(capsys, "sync", "current")
    assert code == 0 and report["documents"]["changed"] == 2
    # --prune: the paths given are the whole collection, so another folder's doc_ids are
    # no clash (its documents go)
    (tmp_path / "v3").mkdir()
    (tmp_path / "v3" / "r1.md").write_text("# r1\n\nDoc r1 of v3.\n")
    assert main(["sync", "v3"]) == 2  # v3/r1.md would replace current/r1.md
    code, report = run_json(capsys, "sync", "v3", "--prune")
    assert code == 0 and report["documents"]["changed"] == 1 and report["documents"]["deleted"] == 1


def test_emptied_and_directly_named_files(notes: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["sync", "notes"]) == 0
    capsys.readouterr()
    # a file named directly is the document it is under the folder synced before
    code, again = run_json(capsys, "sync", "notes/alpha.md")
    assert code == 0 and again["documents"]["unchanged"] == 1 and again["documents"]["new"] == 0
    # emptying a file is an edit, not a failure: kept until --prune, then deleted
    (notes / "beta.md").write_text("\n")
    code, kept = run_json(capsys, "sync", "notes")
    assert code == 0 and kept["empty_files"] == ["beta.md"] and kept["documents"]["deleted"] == 0
    code, pruned = run_json(capsys, "sync", "notes", "--prune")
    assert code == 0 and pruned["documents"]["deleted"] == 1
    code, status = run_json(capsys, "status")
    assert status["documents"] == 4


def test_an_emptied_file_of_any_format_is_empty_not_corrupt(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A PDF, DOCX, EPUB, page or e-mail truncated to 0 bytes (or left blank) was skipped
    as corrupt or as "no text", so --prune kept its chunks, while a Markdown file emptied
    the same way was pruned; every format's emptied file is now empty."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "kb").mkdir()
    names = ["a.pdf", "b.docx", "c.epub", "d.html", "e.eml", "f.adoc", "g.md", "h.odt"]
    for name in names:
        (tmp_path / "kb" / name).write_bytes(b"" if name < "e" else b" \n")
    code, report = run_json(capsys, "sync", "kb", "--dry-run")
    assert code == 0 and report["skipped_files"] == [], report["skipped_files"]
    assert sorted(report["empty_files"]) == names


def test_a_file_that_parses_and_holds_no_text_is_empty_not_a_failure(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A built site's search page (its main content a script's empty box), a page with an
    empty main, a DOCX with an empty body, a workbook of empty sheets and a deck of one
    blank slide were skipped as "no text": every sync of such a site
    exited 1. They are empty documents: listed as empty, exit 0, their chunks pruned."""
    docx = pytest.importorskip("docx")
    openpyxl = pytest.importorskip("openpyxl")
    pptx = pytest.importorskip("pptx")
    monkeypatch.chdir(tmp_path)
    site = tmp_path / "site"
    site.mkdir()
    (site / "search.html").write_text(
        "<!doctype html><html><head><title>Search</title></head><body><nav><a href='/'>"
        "Home</a></nav><main><noscript></noscript><div id='search-results'></div></main>"
        "<footer>Footer</footer></body></html>",
        encoding="utf-8",
    )
    (site / "blank.html").write_text("<html><body><main></main></body></html>", "utf-8")
    docx.Document().save(site / "body.docx")
    openpyxl.Workbook().save(site / "sheets.xlsx")
    deck = pptx.Presentation()
    deck.slides.add_slide(deck.slide_layouts[6])  # the blank layout: no placeholder
    deck.save(site / "deck.pptx")
    (site / "page.md").write_text("# Page\n\nA page with text.\n", encoding="utf-8")
    (site / "other.md").write_text("# Other\n\nAnother page with text.\n", encoding="utf-8")
    textless = ["blank.html", "body.docx", "deck.pptx", "search.html", "sheets.xlsx"]
    code, report = run_json(capsys, "sync", "site")
    assert code == 0 and report["skipped_files"] == [], report["skipped_files"]
    assert sorted(report["empty_files"]) == textless
    assert report["documents"]["new"] == 2
    (site / "page.md").unlink()  # a deleted page goes with --prune; the empty ones stay empty
    code, report = run_json(capsys, "sync", "site", "--prune")
    assert code == 0 and report["documents"]["deleted"] == 1


def test_the_working_folder_is_its_owners_and_the_manifest_keeps_its_mode(
    workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``.rechunk/`` holds the documents' text (the embedded store) and vectors: made
    readable by its owner only; a manifest its owner restricted stays restricted."""
    assert main(["sync", "docs", "--dry-run"]) == 0
    assert not (workdir / ".rechunk").exists()  # a dry run writes nothing
    assert main(["sync", "docs"]) == 0
    assert (workdir / ".rechunk").stat().st_mode & 0o777 == 0o700
    manifest = workdir / ".rechunk" / "manifest.json"
    manifest.chmod(0o600)
    (workdir / "docs" / "extra.md").write_text("# Extra\n\nOne more note.\n")
    assert main(["sync", "docs"]) == 0
    assert manifest.stat().st_mode & 0o777 == 0o600
    capsys.readouterr()


def test_status_lists_the_first_documents_and_counts_the_rest(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "many").mkdir()
    for k in range(25):
        (tmp_path / "many" / f"note-{k:02d}.md").write_text(f"# Note {k}\n\nBody of note {k}.\n")
    assert main(["sync", "many"]) == 0
    capsys.readouterr()
    assert main(["status"]) == 0
    out = capsys.readouterr().out
    assert sum(": revision " in line for line in out.splitlines()) == 20
    assert "  ... and 5 more documents (--json lists every one)" in out
    code, status = run_json(capsys, "status")
    assert code == 0 and len(status["revisions"]) == 25
    # a collection that holds nothing yet says so (its rows were blank)
    from qdrant_client import QdrantClient, models

    client = QdrantClient(path=str(tmp_path / ".rechunk" / "qdrant"))
    client.create_collection("empty", vectors_config=models.VectorParams(
        size=384, distance=models.Distance.COSINE))  # fmt: skip
    client.close()
    assert main(["status", "--collection", "empty"]) == 0
    out = capsys.readouterr().out
    assert "policies: none (no rechunk chunks yet)\nmodels: none (no rechunk chunks yet)\n" in out


def test_max_file_bytes_leaves_large_files_out_and_keeps_what_they_had(
    notes: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A log that grew to hundreds of MB was read whole and held in memory until the job
    was killed: --max-file-bytes counts such a file, reads nothing of it and keeps its
    chunks (a pruning sync and a watcher as well); a reindex of the recorded folders
    applies the limit they were synced with."""
    log = notes / "kettle.txt"
    log.write_text("The kettle boiled at seven.\n" * 20)  # 560 bytes
    code, first = run_json(capsys, "sync", "notes", "--max-file-bytes", "1KB")
    assert code == 0 and first["documents"]["new"] == 6 and first["too_large_files"] == []
    log.write_text("The kettle boiled at eight.\n" * 100)  # 2,800 bytes
    code, second = run_json(capsys, "sync", "notes", "--max-file-bytes", "1KB", "--prune")
    assert code == 0, second
    assert second["too_large_files"] == [{"doc_id": "kettle.txt", "bytes": 2800}]
    assert second["documents"]["deleted"] == 0 and second["documents"]["unchanged"] == 5
    assert main(["sync", "notes", "--max-file-bytes", "1k"]) == 0
    assert "too large     kettle.txt (2.8 KB) (over --max-file-bytes" in capsys.readouterr().out
    manifest = json.loads((Path(".rechunk") / "manifest.json").read_text())
    (entry,) = manifest.values()
    assert entry["roots"][os.path.abspath(notes)]["max_bytes"] == 1024
    # the recorded limit leaves the file out, and its document is in the live collection
    assert main(["reindex", "--policy", "recursive"]) == 2
    said = capsys.readouterr().err
    assert "(with a --max-file-bytes that reads kettle.txt)" in said, said
    assert main(["reindex", "--policy", "recursive", "--max-file-bytes", "1MB"]) == 2
    assert "--max-file-bytes apply to the PATHs given" in capsys.readouterr().err
    # with --prune it leaves the file out of the new generation, and says so
    assert main(["reindex", "--policy", "fixed", "--prune"]) == 0
    assert "not read; left out of the new generation" in capsys.readouterr().out
    code, done = run_json(capsys, "reindex", "notes", "--policy", "recursive")
    assert code == 0 and done["sync"]["documents"]["synced"] == 6 and not done["too_large_files"]


@pytest.mark.parametrize(
    ("given", "expected"),
    [("1000", 1000), ("50MB", 50 * 10**6), ("50MiB", 50 << 20), ("50m", 50 << 20),
     ("1.5GB", 1_500_000_000), (" 2 KiB ", 2048)],
)  # fmt: skip
def test_max_file_bytes_takes_sizes_as_rsync_does(given: str, expected: int) -> None:
    from rechunk.cli.options import file_size

    assert file_size(given) == expected


@pytest.mark.parametrize("given", ["", "MB", "12x", "-5", "0", "0.1"])
def test_a_size_that_is_not_one_is_refused(
    given: str, notes: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as refused:
        main(["sync", "notes", "--max-file-bytes", given])
    assert refused.value.code == 2
    assert "--max-file-bytes" in capsys.readouterr().err
    assert not Path(".rechunk").exists()


def test_a_run_off_a_terminal_says_how_far_it_is(
    notes: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A sync in cron or CI printed nothing until its summary, which for a large folder
    came hours later; it now says on stderr where it is every PROGRESS_EVERY seconds (here
    at every step), with counts only."""
    import rechunk.cli.summary as summary

    monkeypatch.setattr(summary, "PROGRESS_EVERY", 0.0)
    for command in (["sync", "notes"], ["reindex", "notes", "--policy", "recursive"]):
        assert main(command) == 0
        said = capsys.readouterr()
        lines = said.err.splitlines()
        stages = [line.split()[2] for line in lines]
        assert {"chunk", "plan", "publish"} <= set(stages), said.err
        # a share only of a total known at the start (the inputs to embed are known a
        # batch at a time: 99% was seen half-way through)
        shared = r"(chunk|plan|publish) [\d,]+ of [\d,]+ \(\d+%\)"
        growing = r"embed [\d,]+ of [\d,]+ planned so far"
        assert all(
            re.fullmatch(rf"rechunk: progress: ({shared}|{growing}) after \d+m\d+s", line)
            for line in lines
        ), said.err
        assert "things" not in said.err  # no text of the notes
    monkeypatch.setattr(summary, "PROGRESS_EVERY", 3600.0)
    assert main(["sync", "notes"]) == 0
    assert capsys.readouterr().err == ""  # a run shorter than that says nothing


def test_reindex_reads_records_with_the_id_field_they_were_synced_with(
    notes: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Reindex without PATH read a JSONL synced with --id-field by position: every record
    of the live alias was renamed (tickets.jsonl#T-1 -> #1), and the next sync swapped
    them back; --format and --encoding were forgotten alike."""
    (notes / "tickets.jsonl").write_text(
        '{"id": "T-1", "body": "Reset the token from the portal."}\n'
        '{"id": "T-2", "body": "Report a lost badge to security."}\n'
    )
    Path("pages").mkdir()
    Path("pages/plain.txt").write_text("# A heading\n\nRead as Markdown when told.\n")
    code, first = run_json(capsys, "sync", "notes", "--id-field", "id", "--glob", "*.jsonl")
    assert code == 0, first
    code, second = run_json(capsys, "sync", "pages", "--format", "markdown")
    assert code == 0 and second["formats"] == {"markdown": 1}, second
    ids = {"tickets.jsonl#T-1", "tickets.jsonl#T-2", "plain.txt"}
    code, done = run_json(capsys, "reindex", "--policy", "recursive")
    assert code == 0, done
    assert {d["doc_id"] for d in done["sync"]["per_document"]} == ids
    assert done["formats"] == {"jsonl": 2, "markdown": 1}
    # one that differs from how a folder was synced is refused, none included: given for
    # one folder, it renamed the records of another synced without it
    assert main(["reindex", "--policy", "structured", "--id-field", "body"]) == 2
    assert "was synced with --id-field id, not with --id-field body" in capsys.readouterr().err
    assert main(["reindex", "--policy", "structured", "--id-field", "id"]) == 2
    assert "pages was synced without --id-field, not with" in capsys.readouterr().err
    assert main(["reindex", "--policy", "structured"]) == 0
    capsys.readouterr()
    # the folder given without its --id-field: its records would all be renamed, and the
    # live ones left out (a JSONL whose records all vanish was read under other ids)
    assert main(["reindex", "notes", "pages", "--policy", "fixed"]) == 2
    said = capsys.readouterr().err
    assert "tickets.jsonl#T-1" in said and "with the --id-field they were synced with" in said
    # a record removed from the file, read with its --id-field, is gone, not missing
    (notes / "tickets.jsonl").write_text('{"id": "T-2", "body": "Report a lost badge."}\n')
    assert main(["reindex", "notes", "--glob", "*.jsonl", "--id-field", "id",
                 "--policy", "fixed"]) == 2  # fmt: skip
    assert "plain.txt" in capsys.readouterr().err  # pages' document, not given: missing
    code, done = run_json(capsys, "reindex", "notes", "pages", "--glob", "*.jsonl", "--glob",
                          "plain.txt", "--id-field", "id", "--policy", "fixed")  # fmt: skip
    assert code == 0, done
    assert {d["doc_id"] for d in done["sync"]["per_document"]} == {"tickets.jsonl#T-2",
                                                                   "plain.txt"}  # fmt: skip
    code, again = run_json(capsys, "sync", "notes", "--id-field", "id", "--glob", "*.jsonl")
    assert code == 0 and again["documents"]["unchanged"] == 1 and again["documents"]["new"] == 0


def test_a_root_an_earlier_version_recorded_stays_unrecorded_when_copied(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Copied to a reindexed Chroma generation, a root recorded before --id-field was
    recorded was written as synced without one, and the next reindex refused the
    --id-field Upgrading tells users to give."""
    from types import SimpleNamespace

    from rechunk.cli.manifest import copy_roots, read_manifest, recorded_roots

    monkeypatch.chdir(tmp_path)
    Path(".rechunk").mkdir()
    old = {"globs": ["*"], "gitignore": True, "generated": False}
    key = f"chroma:{os.path.realpath('c')} docs"
    (Path(".rechunk") / "manifest.json").write_text(json.dumps({key: {"roots": {"/kb": old}}}))
    store = SimpleNamespace(store="chroma:c", collection="docs", layout=None)
    copy_roots(store, "docs__fixed")  # type: ignore[arg-type]
    copied = read_manifest()[f"chroma:{os.path.realpath('c')} docs__fixed"]["roots"]["/kb"]
    assert copied == {**old, "max_bytes": None}  # no --id-field, --format... keys
    new = SimpleNamespace(store="chroma:c", collection="docs__fixed", layout=None)
    (how,) = recorded_roots(read_manifest(), new).values()  # type: ignore[arg-type]
    assert not how.read_as_recorded


def test_a_collection_of_another_distance_or_dimension_is_a_usage_error(
    workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A sync into a collection LangChain made with euclidean distance exited 3, which
    cron and CI read as the store failing; the command named the wrong collection (2).
    Nothing is written to it."""
    from qdrant_client import QdrantClient, models

    from rechunk import CollectionMismatchError, StoreError
    from rechunk.adapters.qdrant import QdrantStore

    client = QdrantClient(path=str(workdir / "q"))
    QdrantStore(client, "euclidean").ensure_collection(384, "euclid")
    QdrantStore(client, "small").ensure_collection(16, "cosine")
    client.create_collection(  # a distance rechunk cannot search by
        "manhattan", vectors_config=models.VectorParams(size=384, distance=models.Distance.MANHATTAN)
    )
    with pytest.raises(CollectionMismatchError, match="another model or distance") as caught:
        QdrantStore(client, "small").ensure_collection(384, "cosine")
    assert isinstance(caught.value, StoreError)  # still caught as a store's refusal
    client.close()
    for collection, says in (("euclidean", "use another collection"),
                             ("small", "use another collection"),
                             ("manhattan", "rechunk supports cosine, dot and euclid")):  # fmt: skip
        args = ["sync", "docs", "--store", f"qdrant:{workdir / 'q'}", "--collection", collection]
        assert main(args) == 2
        assert says in capsys.readouterr().err
    client = QdrantClient(path=str(workdir / "q"))
    assert [client.count(c).count for c in ("euclidean", "small", "manhattan")] == [0, 0, 0]
    client.close()


@pytest.mark.parametrize("replaced", [False, True])
def test_a_store_folder_removed_during_a_sync_fails_it(
    workdir: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
    replaced: bool,
) -> None:  # fmt: skip
    """An embedded Qdrant client writes on after its folder is removed, and its own reads
    find what it wrote: a sync whose folder an operator removed exited 0 with "stale
    check passed" and nothing on disk. It exits 3 now, and the next sync rebuilds."""
    engine = importlib.import_module("rechunk.sync")  # (rechunk.sync is the function)
    real = engine.sync
    folder = workdir / "q"

    def then_removed(*args: Any, **kwargs: Any) -> Any:
        report = real(*args, **kwargs)
        shutil.rmtree(folder)
        if replaced:  # another folder of the same name, as a restore from a backup makes
            folder.mkdir()
            (folder / "meta.json").write_text("{}", encoding="utf-8")
        return report

    monkeypatch.setattr(engine, "sync", then_removed)
    assert main(["sync", "docs", "--store", f"qdrant:{folder}"]) == 3
    assert "was removed or replaced while this command ran" in capsys.readouterr().err
    monkeypatch.setattr(engine, "sync", real)
    if replaced:
        shutil.rmtree(folder)
    code, again = run_json(capsys, "sync", "docs", "--store", f"qdrant:{folder}")
    assert code == 0 and again["chunks"]["added"] > 0 and again["stale_check"] == "passed"


def test_query_of_a_euclidean_collection_prints_distances(
    workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A collection that measures euclidean distance (LangChain's Chroma makes one by
    default) scores hits by the distance made negative: the terminal shows the distance,
    smallest first, and --json keeps the score (higher is closer)."""
    from qdrant_client import QdrantClient

    from rechunk import Document, policy_for, sync
    from rechunk.adapters.qdrant import QdrantStore
    from rechunk.integrations.uri import open_embedder

    embedder = open_embedder("onnx:")
    client = QdrantClient(path=str(workdir / "q"))
    store = QdrantStore(client, "kb")
    store.ensure_collection(embedder.dimension, "euclid")
    texts = [p.read_text(encoding="utf-8") for p in sorted((workdir / "docs").glob("*.md"))]
    docs = [Document(f"doc{i}.md", text) for i, text in enumerate(texts)]
    sync(docs, store, chunker=policy_for(embedder, "structured"), embedder=embedder)
    client.close()
    args = ["--store", f"qdrant:{workdir / 'q'}", "--collection", "kb"]
    capsys.readouterr()
    assert main(["query", "what happens when a sync crashes?", "-k", "3", *args]) == 0
    out = capsys.readouterr().out
    distances = [float(line.rsplit(" ", 1)[1]) for line in out.splitlines() if " distance " in line]
    assert len(distances) == 3 and distances == sorted(distances) and distances[0] > 0
    assert " score " not in out
    code, hits = run_json(capsys, "query", "what happens when a sync crashes?", "-k", "3", *args)
    assert code == 0 and [-hit["score"] for hit in hits] == pytest.approx(distances, abs=1e-3)


def test_a_query_cites_where_a_hit_lies_in_either_layout() -> None:
    """The llamaindex layout stores locators as text ("3-4", "Guide > Setup"), which the
    citation printed bare ("3-4, Cart") where the langchain layout's lists read
    "pp. 3-4"; both shapes now read the same."""
    from rechunk.cli.query import citation

    as_lists = {"pages": [3, 4], "lines": [12, 30], "symbol": "Cart.add",
                "section": ["Guide", "Setup"], "sheet": "Q3", "rows": [14, 14]}  # fmt: skip
    as_text = {"pages": "3-4", "lines": "12-30", "symbol": "Cart.add",
               "section": "Guide > Setup", "sheet": "Q3", "rows": "14"}  # fmt: skip
    assert citation(as_lists) == citation(as_text)
    assert "pp. 3-4" in citation(as_text) and "row 14" in citation(as_text)
    assert citation({"pages": "3"}) == "p. 3"
    assert citation({"section": "x" * 200}) == "x" * 80


def test_every_range_a_parser_records_is_cited() -> None:
    """An EPUB hit's chapters were left out of the citation and of --json's rows."""
    from rechunk.cli.query import CITED, citation
    from rechunk.document import RANGED_LOCATOR_KEYS

    assert set(CITED) >= RANGED_LOCATOR_KEYS
    for key in RANGED_LOCATOR_KEYS:
        assert citation({key: [2, 3]}).endswith(" 2-3") and citation({key: "4"}).endswith(" 4")
    assert citation({"chapters": [4, 4], "section": ["Locks"]}) == "chapter 4, Locks"


def test_a_file_whose_name_is_not_utf8_is_skipped_saying_to_rename_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A Latin-1 file name (a folder copied from an old system) was skipped as
    "Document.doc_id ... holds a lone surrogate", which read as rechunk's own fault."""
    import os

    monkeypatch.chdir(tmp_path)
    (tmp_path / "kb").mkdir()
    try:
        with open(os.path.join(b"kb", b"caf\xe9.md"), "wb") as fh:
            fh.write(b"# Menu\n\nCoffee and cake.\n")
    except OSError:
        pytest.skip("this file system takes no name that is not UTF-8")
    (tmp_path / "kb" / "ok.md").write_text("# Ok\n\nFine words.\n", encoding="utf-8")
    code, report = run_json(capsys, "sync", "kb", "--dry-run")
    (skipped,) = report["skipped_files"]
    assert code == 1 and skipped["reason"].startswith("its path is not valid UTF-8")
    assert report["documents"]["new"] == 1
