"""CLI errors as the README's exit-code table says: one line, the right code; links that
lead nowhere are skipped files; names are printed with control characters escaped; a
failed stale check is an error in the API and a non-zero exit in `sync` and `status`."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest

from rechunk import Document, StaleCheckError, StoreError, policy_for, sync
from rechunk.cli import main
from rechunk.sources.files import printable, read_documents


@pytest.fixture
def notes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "notes"
    folder.mkdir()
    for name in ("alpha", "beta"):
        (folder / f"{name}.md").write_text(f"# {name}\n\nThe note called {name}.\n")
    monkeypatch.chdir(tmp_path)
    return folder


def one_error_line(err: str) -> str:
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("rechunk: error: "), err
    return lines[0]


@pytest.mark.parametrize("store", ["chroma+http://256.256.256.256:8000",
                                   "qdrant+http://256.256.256.256:6333",
                                   "qdrant+https://999.1.1.1"])
def test_an_invalid_server_url_is_a_usage_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
    store: str
) -> None:
    monkeypatch.chdir(tmp_path)
    for args in (["status"], ["query", "x"]):
        assert main([*args, "--store", store]) == 2
        assert "is not a valid URL" in one_error_line(capsys.readouterr().err)


def test_a_collection_name_the_store_rejects_is_a_usage_error(
    notes: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["sync", "notes", "--store", "chroma:chroma", "--collection", "a"]) == 2
    assert "refuses the collection name 'a'" in one_error_line(capsys.readouterr().err)
    assert not (notes.parent / "chroma").exists()  # refused before a database was made
    for name in ("a..b", "-ab", "127.0.0.1", "x" * 513):
        assert main(["sync", "notes", "--store", "chroma:chroma", f"--collection={name}"]) == 2
        assert "refuses the collection name" in one_error_line(capsys.readouterr().err)
    assert not (notes.parent / "chroma").exists()
    assert main(["sync", "notes", "--store", "qdrant:qdrant", "--collection", "bad/name"]) == 2
    assert "refuses the collection name" in one_error_line(capsys.readouterr().err)


def test_links_that_loop_or_dangle_are_skipped(
    notes: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (notes / "loop.md").symlink_to("loop.md")
    (notes / "ring-a.md").symlink_to("ring-b.md")
    (notes / "ring-b.md").symlink_to("ring-a.md")
    (notes / "gone.md").symlink_to("nowhere.md")
    (notes / "alias.md").symlink_to("alpha.md")  # a link to a file is read, once
    files = read_documents([notes, notes])
    assert sorted(d.doc_id for d in files.documents) == ["alpha.md", "beta.md"]
    reasons = dict(files.skipped)
    assert sorted(reasons) == ["gone.md", "loop.md", "ring-a.md", "ring-b.md"]
    assert reasons["loop.md"] == "a symbolic link loop"
    assert reasons["gone.md"] == "a dangling symbolic link (to nowhere.md)"
    code = main(["sync", "notes", "--json"])
    report = json.loads(capsys.readouterr().out)
    assert code == 1 and report["documents"]["new"] == 2 and report["documents"]["skipped"] == 4
    assert main(["sync", "notes"]) == 1
    out = capsys.readouterr().out
    assert "gone.md: a dangling symbolic link" in out and "loop.md: a symbolic link loop" in out


def test_printable_escapes_what_a_terminal_acts_on() -> None:
    assert printable("a\nb") == "a\\x0ab"
    assert printable("\x1b[2J\r\t\x7f\x85") == "\\x1b[2J\\x0d\\x09\\x7f\\x85"
    assert printable("rtl\u202eevil\u2028") == "rtl\\u202eevil\\u2028"
    assert printable("caf\udce9") == "caf\\udce9"  # an undecodable byte of a file name
    assert printable("plain été 中文 ok") == "plain été 中文 ok"
    # invisible characters that make two names look alike; joiners that scripts use stay
    assert printable("报告\u200b.md \ufeffa\u2060b\u200e") == "报告\\u200b.md \\ufeffa\\u2060b\\u200e"
    assert printable("می\u200cخواهم 👩\u200d💻") == "می\u200cخواهم 👩\u200d💻"
    # every other invisible format character too (Arabic letter mark, soft hyphen, tags)
    assert printable("r\u061c.md s\u00adh x\U000e0001y") == "r\\u061c.md s\\xadh x\\U000e0001y"


def test_bench_language_names_cannot_forge_lines(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    corpus = tmp_path / "pairs.jsonl"
    pair = {"id": "a", "lang": "en\x1b[2J\nR_c, FORGED", "old": "One line.", "new": "Two lines."}
    corpus.write_text(json.dumps(pair) + "\n")
    assert main(["bench", str(corpus), "--chunker", "fixed"]) == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out and "R_c, en\\x1b[2J\\x0aR_c, FORGED" in out
    assert not any(line.startswith("R_c, FORGED") for line in out.splitlines())


@pytest.mark.skipif(sys.platform == "win32", reason="control characters in file names")
def test_names_with_control_characters_cannot_forge_lines(
    notes: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    forged = "x\n  stale check   passed\n  documents     9 new.md"
    (notes / forged).write_bytes(b"caf\xe9\n")  # not UTF-8: a skipped row names it
    (notes / "\x1b[31mred.md").write_text("# red\n\nA note whose name holds ESC.\n")
    assert main(["sync", "notes"]) == 1
    out = capsys.readouterr().out
    assert "\x1b" not in out
    lines = out.splitlines()
    assert sum(line.strip().startswith("stale check") for line in lines) == 1
    assert sum(line.strip().startswith("documents") for line in lines) == 1
    assert "x\\x0a  stale check   passed\\x0a  documents     9 new.md:" in out
    assert main(["status"]) == 0
    status = capsys.readouterr().out
    assert "\x1b" not in status and "\\x1b[31mred.md: revision" in status
    assert main(["query", "red", "-k", "3"]) == 0
    assert "\x1b" not in capsys.readouterr().out
    assert main(["sync", "notes", "--dry-run"]) == 1
    assert "\x1b" not in capsys.readouterr().out
    # JSON keeps the names as they are (escaped by JSON itself)
    code = main(["sync", "notes", "--json"])
    data = json.loads(capsys.readouterr().out)
    assert code == 1 and data["skipped_files"][0]["doc_id"] == forged


def test_names_a_terminal_cannot_encode_are_escaped(notes: Path) -> None:
    """Under an ASCII locale a file named café.md failed the sync (exit 3, a
    UnicodeEncodeError) half-way through its summary."""
    import subprocess

    (notes / "café.md").write_text("# café\n\nA note with an accent in its name.\n")
    env = {**os.environ, "PYTHONIOENCODING": "ascii"}
    for args in (["sync", "notes", "--dry-run"], ["sync", "notes"], ["status"]):
        done = subprocess.run([sys.executable, "-m", "rechunk.cli", *args], cwd=notes.parent,
                              env=env, capture_output=True, timeout=120)  # fmt: skip
        assert done.returncode == 0, done.stderr
        assert (b"caf\\xe9.md" in done.stdout) == (args != ["sync", "notes"])


def _no_delete_store(client: Any, name: str) -> Any:
    """A real Qdrant store whose deletes do nothing: the old revision stays (a fault)."""
    from rechunk.adapters.qdrant import QdrantStore

    class NoDelete(QdrantStore):
        def delete(self, ids: Any) -> None:
            return None

    return NoDelete(client, name)


def test_a_failed_stale_check_raises_with_the_report(minilm: Any) -> None:
    from qdrant_client import QdrantClient

    store = _no_delete_store(QdrantClient(":memory:"), "docs")
    store.ensure_collection(minilm.dimension)
    chunker = policy_for(minilm)
    v1 = "# One\n\nThe first revision of the note.\n\n# Two\n\nA second section here."
    sync([Document("n.md", v1)], store, chunker=chunker, embedder=minilm)
    v2 = v1.replace("first revision", "second revision")
    with pytest.raises(StaleCheckError, match=r"stale check failed: document 'n\.md'") as caught:
        sync([Document("n.md", v2)], store, chunker=chunker, embedder=minilm)
    assert isinstance(caught.value, StoreError)
    report = caught.value.report
    assert report.stale_check == "failed" and report.stale_points >= 1
    assert report.documents["changed"] == 1 and report.chunks["deleted"] >= 1


def test_status_finds_a_document_that_lacks_some_of_its_chunks(
    notes: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A sync killed by a full disk left a document with some of its chunks: one
    revision, so the stale check passed it (an on-call drill). Its chunks' ordinals and
    spans, which tile the text, now show the gap."""
    from qdrant_client import QdrantClient, models

    sections = "".join(
        f"## Part {i}\n\n" + f"Made-up sentence {i} about the long note's subject. " * 30 + "\n\n"
        for i in range(6)
    )
    (notes / "long.md").write_text("# Long\n\n" + sections, encoding="utf-8")
    assert main(["sync", "notes"]) == 0
    assert main(["status"]) == 0
    capsys.readouterr()
    client = QdrantClient(path=".rechunk/qdrant")
    try:
        of_long = models.Filter(must=[models.FieldCondition(
            key="metadata.doc_id", match=models.MatchValue(value="long.md"))])  # fmt: skip
        points, _ = client.scroll("rechunk", scroll_filter=of_long, limit=100, with_payload=True)
        assert len(points) > 3
        middle = [p.id for p in points if p.payload["metadata"]["ordinal"] == 2]  # type: ignore[index]
        client.delete("rechunk", points_selector=models.PointIdsList(points=middle))
    finally:
        client.close()
    assert main(["status"]) == 3
    captured = capsys.readouterr()
    assert "stale check: failed (long.md)" in captured.out
    assert "lack some of their chunks" in one_error_line(captured.err)
    assert main(["sync", "notes"]) == 0  # the sync writes what is missing
    assert main(["status"]) == 0


def test_sync_and_status_exit_3_on_a_failed_stale_check(
    notes: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from rechunk.adapters.qdrant import QdrantStore

    assert main(["sync", "notes"]) == 0
    capsys.readouterr()
    (notes / "alpha.md").write_text("# alpha\n\nThe note called alpha, now edited.\n")
    monkeypatch.setattr(QdrantStore, "delete", lambda self, ids: None)  # an injected fault
    assert main(["sync", "notes"]) == 3
    captured = capsys.readouterr()
    assert "stale check   failed" in captured.out  # the summary is still printed
    assert "stale check failed: document 'alpha.md'" in one_error_line(captured.err)
    assert main(["sync", "notes", "--json"]) == 3
    captured = capsys.readouterr()
    assert json.loads(captured.out)["stale_check"] == "failed"
    assert main(["status"]) == 3
    captured = capsys.readouterr()
    assert "stale check: failed (alpha.md)" in captured.out
    assert "stale check failed" in one_error_line(captured.err)
    assert main(["status", "--json"]) == 3
    assert json.loads(capsys.readouterr().out)["stale_check"] == "failed"
    monkeypatch.undo()
    monkeypatch.chdir(notes.parent)
    assert main(["sync", "notes"]) == 0  # a plain re-run repairs it
    assert main(["status"]) == 0


def test_an_unexpected_client_error_is_one_line(
    notes: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from rechunk.cli import compose

    def broken(args: Any, **kwargs: Any) -> Any:
        raise KeyError("a client library's own error\nwith a second line")

    monkeypatch.setattr(compose, "open_store", broken)
    assert main(["status"]) == 3
    line = one_error_line(capsys.readouterr().err)
    assert "KeyError" in line and "--debug" in line
    assert main(["--debug", "status"]) == 3
    assert capsys.readouterr().err.startswith("Traceback")
    assert os.environ.get("HF_HUB_OFFLINE") == "1"


# -- usage errors ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("argv", "said", "help_of"),
    [
        (["sync"], "the following arguments are required: PATH", "rechunk sync"),
        (["sync", "notes", "--frob"], "unrecognized arguments: --frob", "rechunk sync"),
        (["sync", "notes", "--policy", "nope"], "invalid choice: 'nope'", "rechunk sync"),
        (["query", "x", "-k", "many"], "invalid int value: 'many'", "rechunk query"),
        (["frob"], "invalid choice: 'frob'", "rechunk"),
        ([], "the following arguments are required: COMMAND", "rechunk"),
    ],
)
def test_a_usage_error_is_one_line_naming_the_help(
    notes: Path, capsys: pytest.CaptureFixture[str], argv: list[str], said: str, help_of: str
) -> None:
    with pytest.raises(SystemExit) as stopped:
        main(argv)
    assert stopped.value.code == 2
    captured = capsys.readouterr()
    line = one_error_line(captured.err)
    assert said in line and line.endswith(f"(see {help_of} --help)"), line
    assert captured.out == ""


# -- special files -----------------------------------------------------------------------


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs (POSIX)")
@pytest.mark.timeout(60)  # before: reading the FIFO blocked for ever
def test_special_files_are_skipped_never_opened(
    notes: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import socket

    os.mkfifo(notes / "pipe.md")
    with socket.socket(socket.AF_UNIX) as listening:
        listening.bind("notes/sock.md")  # relative: a socket's path is short
        (notes / "null.md").symlink_to(os.devnull)
        files = read_documents([notes])
        assert sorted(d.doc_id for d in files.documents) == ["alpha.md", "beta.md"]
        assert dict(files.skipped) == {
            "null.md": "not a regular file (a symbolic link to a character device)",
            "pipe.md": "not a regular file (FIFO)",
            "sock.md": "not a regular file (socket)",
        }
        # a special file named on the command line: skipped too (not "no such file")
        assert read_documents([notes / "pipe.md", os.devnull]).skipped == [
            ("pipe.md", "not a regular file (FIFO)"),
            ("null", "not a regular file (character device)"),
        ]
        assert main(["sync", "notes", os.devnull, "--dry-run"]) == 1
        out = capsys.readouterr().out
        assert "pipe.md: not a regular file (FIFO)" in out
        assert "null: not a regular file (character device)" in out
        assert "4 skipped" in out
    # a file read directly (measure) is refused, not waited on (a FIFO would block); as
    # the old version, a pipe that gives nothing is a new file's (tests/test_cli_ci.py)
    assert main(["measure", "notes/alpha.md", "notes/pipe.md"]) == 2
    assert "notes/pipe.md is not a regular file (FIFO)" in one_error_line(capsys.readouterr().err)
    if os.path.exists("/dev/zero"):  # would be read for ever
        assert main(["measure", "/dev/zero", "notes/alpha.md"]) == 2
        assert "not a regular file (character device)" in capsys.readouterr().err


# -- the Chroma lock collection's name -----------------------------------------------------


def test_the_lock_collection_name_is_reserved(
    notes: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for args in (["sync", "notes"], ["status"], ["query", "x"]):
        code = main([*args, "--store", "chroma:chroma", "--collection", "rechunk-writer-locks"])
        assert code == 2
        line = one_error_line(capsys.readouterr().err)
        assert "'rechunk-writer-locks' is reserved" in line and "choose another" in line
    assert not (notes.parent / "chroma").exists()  # nothing made
    assert not (notes.parent / ".rechunk").exists()


# -- server URIs ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("store", "said"),
    [
        ("qdrant://localhost:6333", "a server is qdrant+http://HOST:PORT"),
        ("chroma://127.0.0.1:8000", "a server is chroma+http://HOST:PORT"),
        ("qdrant-edge://shard", "a folder is qdrant-edge:DIR"),
    ],
)
def test_a_server_written_as_a_folder_uri_is_refused(
    notes: Path, capsys: pytest.CaptureFixture[str], store: str, said: str
) -> None:
    """`qdrant://localhost:6333` (for qdrant+http://) made and filled an embedded store in
    the folder /localhost:6333, exit 0."""
    # a dry run too: it planned against an empty store and exited 0 (a cron line checked
    # with --dry-run then failed)
    for args in (["sync", "notes"], ["sync", "notes", "--dry-run"], ["status"]):
        assert main([*args, "--store", store]) == 2
        line = one_error_line(capsys.readouterr().err)
        assert "reads as a server's" in line and said in line, line
    host = store.split("//", 1)[1]
    assert not Path("/", host).exists() and not (notes.parent / ".rechunk" / "qdrant").exists()
    # a file URL's three slashes name an absolute folder, as they did
    scheme = store.split("//", 1)[0]
    assert main(["sync", "notes", "--store", f"{scheme}//{notes.parent / 'kb'}"]) == 0
    assert (notes.parent / "kb").is_dir()


@pytest.mark.parametrize(
    ("store", "said"),
    [
        ("chroma+http://user:secret@127.0.0.1:8000", "CHROMA_CLIENT_AUTH_CREDENTIALS"),
        ("chroma+http://user:secret@127.0.0.1:8000/some/path", "CHROMA_CLIENT_AUTH_PROVIDER"),
        ("qdrant+http://user:secret@127.0.0.1:6333", "set QDRANT_API_KEY"),
        ("qdrant+https://:secret@127.0.0.1", "set QDRANT_API_KEY"),
        ("qdrant+http://127.0.0.1:6333/?api_key=secret", "query or fragment"),
        ("chroma+http://127.0.0.1:8000/#secret", "query or fragment"),
        ("chroma+http://[fe80::1%25]:8000", "not a valid URL"),
        ("chroma+http://[fe80::1%]:8000", "not a valid URL"),
        ("chroma+http://[fe80::1%25e$th0]:8000", "zone id 'e$th0'"),
        ("qdrant+http://[fe80::1%e/th0]:6333", "not a valid URL"),
    ],
)
def test_what_a_server_uri_cannot_honour_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
    store: str, said: str
) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(["status", "--store", store]) == 2
    line = one_error_line(capsys.readouterr().err)
    assert said in line and "secret" not in line, line


@pytest.mark.parametrize(
    ("uri", "host", "port", "path"),
    [
        ("chroma+http://[::1]:8000", "::1", 8000, ""),
        ("chroma+http://[fe80::1%25eth0]:8000/", "fe80::1", 8000, ""),
        ("chroma+http://[fe80::1%eth0]:8000/chroma/", "fe80::1", 8000, "/chroma"),
        ("qdrant+https://[FE80::A%25En0]/a/b", "fe80::a", None, "/a/b"),
        ("qdrant+http://Example.org:6333", "example.org", 6333, ""),
    ],
)
def test_server_uri_parts(uri: str, host: str, port: int | None, path: str) -> None:
    """An IPv6 zone id as RFC 6874 writes it (%25) or as is; its case is kept."""
    from rechunk.adapters.uri import _server

    server = _server(uri, required_port=False, secrets="X")
    zone = {"eth0": "%eth0", "En0": "%En0"}
    expected = host + next((z for k, z in zone.items() if k in uri), "")
    assert (server.host, server.port, server.path) == (expected, port, path)


class PrefixProxy:
    """A reverse proxy on 127.0.0.1 serving the server on ``upstream`` (a port; None: no
    server, every request answered 404) under ``prefix``, and 404 outside it. ``paths``:
    every path it was asked for."""

    def __init__(self, prefix: str, upstream: int | None) -> None:
        from reverse_proxy import ReverseProxy

        self.paths: list[str] = []

        def route(path: str, headers: Any) -> str | tuple[int, bytes]:
            self.paths.append(path)
            if upstream is None or not path.startswith(prefix + "/"):
                return 404, b""
            return path[len(prefix) :]

        self.proxy = ReverseProxy(upstream, route)
        self.port = self.proxy.port

    def close(self) -> None:
        self.proxy.close()


def test_a_server_path_is_honoured(notes: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A server behind a reverse proxy under a path prefix: every request goes under it
    (before: Chroma's requests went to the root, the path dropped without a word)."""
    from chroma_server import running_chroma

    with running_chroma(notes.parent / "data") as chroma:
        from rechunk.adapters.chroma import ChromaStore

        ChromaStore(chroma.client, "rechunk").ensure_collection(384)
        proxy = PrefixProxy("/chroma", chroma.port)
        try:
            assert main(["status", "--store", f"chroma+http://127.0.0.1:{proxy.port}/chroma/"]) == 0
            assert "collection rechunk: 0 documents" in capsys.readouterr().out
        finally:
            proxy.close()
    assert proxy.paths and all(p.startswith("/chroma/api/v2/") for p in proxy.paths), proxy.paths
    # Qdrant (no server here): what the client asks for, asked under the prefix
    listener = PrefixProxy("/qdrant", None)
    try:
        assert main(["status", "--store", f"qdrant+http://127.0.0.1:{listener.port}/qdrant"]) == 3
        capsys.readouterr()
    finally:
        listener.close()
    assert any("/collections" in p for p in listener.paths), listener.paths
    # (the client's version check asks for the prefix itself: "/qdrant", no slash)
    assert all(p == "/qdrant" or p.startswith("/qdrant/") for p in listener.paths), listener.paths


# -- third-party warnings ----------------------------------------------------------------


def test_qdrant_local_mode_warning_becomes_rechunks_advice(
    notes: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """qdrant-client warns (three lines) once an embedded collection passes 20,000 points;
    its threshold is lowered here so that two notes pass it. rechunk says nothing until its
    own threshold (that of `rechunk status`), then advises a server in one line."""
    import warnings

    from qdrant_client import QdrantClient, models
    from qdrant_client.common import client_warnings
    from qdrant_client.local import local_collection, qdrant_local

    import rechunk.adapters.qdrant as adapter

    monkeypatch.setattr(local_collection.LocalCollection, "LARGE_DATA_THRESHOLD", 1)
    monkeypatch.setattr(qdrant_local.QdrantLocal, "LARGE_DATA_THRESHOLD", 1)
    monkeypatch.setattr(client_warnings, "SEEN_MESSAGES", set())
    raw = QdrantClient(":memory:")  # the warning this is about, from qdrant-client itself
    raw.create_collection("c", vectors_config=models.VectorParams(size=2, distance="Cosine"))
    with pytest.warns(UserWarning, match="Local mode is not recommended"):
        raw.upsert("c", [models.PointStruct(id=i, vector=[1.0, i]) for i in range(2)])
    monkeypatch.setattr(client_warnings, "SEEN_MESSAGES", set())
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        assert main(["sync", "notes"]) == 0  # writes: the upsert's warning
        assert main(["status"]) == 0  # opens the folder: the loader's warning
    assert not [w for w in seen if "Local mode" in str(w.message)], [str(w.message) for w in seen]
    captured = capsys.readouterr()
    assert "Local mode" not in captured.err and "warning" not in captured.err
    monkeypatch.setattr(adapter, "EMBEDDED_POINTS_ADVICE", 1)
    (notes / "alpha.md").write_text("# alpha\n\nThe note called alpha, edited.\n")
    assert main(["sync", "notes"]) == 0
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1, err  # one line, rechunk's own advice, naming the moves
    assert err[0].startswith(
        "rechunk: warning: embedded Qdrant holds 2 points (more than 1): every process that "
        "opens the folder loads them all into memory first; move the collection to a Qdrant "
        "server (--store qdrant+http://HOST:6333) or a Chroma server"
    ), err
    assert "--store qdrant-edge:DIR --reuse-from qdrant:" in err[0], err
    assert main(["status"]) == 0  # the same advice, with the prefix every warning has
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith("rechunk: warning: embedded Qdrant holds 2 points"), line


def test_log_warnings_print_as_the_commands_warnings(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A sync's logged notices ('N stored point(s) ... are written again') printed bare,
    through Python's last-resort handler; they carry the prefix every warning has."""
    import logging

    monkeypatch.chdir(tmp_path)
    assert main(["status"]) == 3  # any command sets the lines up
    capsys.readouterr()
    logging.getLogger("rechunk.sync").warning("%d stored point(s) are written again", 2)
    logging.getLogger("rechunk.integrations.openai").warning("rechunk: waiting for x: 10 s")
    assert capsys.readouterr().err.splitlines() == [
        "rechunk: warning: 2 stored point(s) are written again",
        "rechunk: waiting for x: 10 s",
    ]


def test_the_onnx_export_says_so_as_it_starts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The first sync's one-time ONNX export took half a minute with nothing on screen;
    its notice is printed, once, and its warnings are not printed twice."""
    import logging

    monkeypatch.chdir(tmp_path)
    assert main(["status"]) == 3  # any command sets the lines up
    assert main(["status"]) == 3  # twice: still one handler each
    capsys.readouterr()
    onnx = logging.getLogger("rechunk.integrations.onnx")
    onnx.info("exporting %s to ONNX once", "MODEL")
    onnx.warning("the export was moved aside")
    logging.getLogger("rechunk.sync").info("a notice of the sync")  # not shown
    assert capsys.readouterr().err.splitlines() == [
        "rechunk: info: exporting MODEL to ONNX once",
        "rechunk: warning: the export was moved aside",
    ]


def test_a_read_only_qdrant_folder_is_named_read_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A store folder on a read-only file system (a backup mounted read-only) failed with
    SQLite's "unable to open database file", and nothing said read-only. Needs root to
    mount a file system read-only; skipped elsewhere."""
    import shutil
    import subprocess

    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("mounting a read-only file system needs root and mount")
    monkeypatch.chdir(tmp_path)
    (tmp_path / "kb").mkdir()
    (tmp_path / "kb" / "a.md").write_text("# A\n\nA note to keep.\n")
    (tmp_path / "ro").mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=20m", "tmpfs", "ro"],
                             capture_output=True, timeout=30)  # fmt: skip
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.decode(errors='replace')}")
    try:
        assert main(["sync", "kb", "--store", "qdrant:ro/q"]) == 0
        subprocess.run(["mount", "-o", "remount,ro", "ro"], check=True, timeout=30)
        capsys.readouterr()
        for command in (["status", "--store", "qdrant:ro/q"], ["sync", "kb", "--store", "qdrant:ro/q"]):
            assert main(command) == 3
            err = capsys.readouterr().err
            assert "cannot open the Qdrant folder ro/q" in err and "read-only" in err, err
    finally:
        subprocess.run(["umount", "-l", "ro"], capture_output=True, timeout=30)


def test_a_collection_of_two_models_is_named_so(
    notes: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A collection the default model synced and another model wrote one point into:
    query said it 'was written by' the other model, though all but one point were the
    default's. It names both models, and what rebuilds it with one."""
    import dataclasses
    import uuid

    from rechunk.adapters.qdrant import QdrantStore, local_client
    from rechunk.sync.store import PointWrite

    assert main(["sync", "notes"]) == 0
    capsys.readouterr()
    client = local_client(notes.parent / ".rechunk" / "qdrant")
    try:
        store = QdrantStore(client, "rechunk")
        point = store.get_points("alpha.md")[0]
        other = dataclasses.replace(point.payload, model_id="other/model", doc_id="other.md")
        (vector,) = store.get_vectors([point.payload.input_key], point.payload.model_id).values()
        store.write([PointWrite(str(uuid.uuid4()), other, vector)])
    finally:
        client.close()
    assert main(["query", "alpha"]) == 2
    said = one_error_line(capsys.readouterr().err)
    assert "holds points of 2 models" in said and "other/model" in said
    assert "rechunk reindex" in said
