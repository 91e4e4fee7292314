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
from rechunk.files import printable, read_documents


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
    import rechunk.cli as cli

    def broken(args: Any, **kwargs: Any) -> Any:
        raise KeyError("a client library's own error\nwith a second line")

    monkeypatch.setattr(cli, "_open", broken)
    assert main(["status"]) == 3
    line = one_error_line(capsys.readouterr().err)
    assert "KeyError" in line and "--debug" in line
    assert main(["--debug", "status"]) == 3
    assert capsys.readouterr().err.startswith("Traceback")
    assert os.environ.get("HF_HUB_OFFLINE") == "1"
