"""No document text in any report, log or error: files whose libraries' own messages quote
them (libxml2 quotes the text around a fault, Python's idna codec the label it failed on)
are skipped or read with reasons that name no text, one such file never ends a sync of
the others, and the Python API's errors say what a metadata value is, never what it says.
Every file here is written by a real tool (python-pptx, python-docx) or by hand as a user
would save it; each carries a marker word that must appear in no output."""

from __future__ import annotations

import io
import json
import uuid
import zipfile
from pathlib import Path
from typing import Any

import pytest
from cli_helpers import run_json
from packages import rewritten

from rechunk.cli import main
from rechunk.errors import ConfigError, InputError
from rechunk.sources import ParseError, ParseOptions
from rechunk.sources.encoding import check_encoding, declared_encoding
from rechunk.sources.files import read_documents

MARKER = "ZQXMARKER"


def _deck() -> bytes:
    pptx = pytest.importorskip("pptx")
    deck = pptx.Presentation()
    slide = deck.slides.add_slide(deck.slide_layouts[1])
    slide.shapes.title.text = "Quarter"
    data = io.BytesIO()
    deck.save(data)
    return data.getvalue()


def _damaged_files(folder: Path) -> dict[str, str]:
    """Files whose parse fails with a library message quoting the marker: name -> how."""
    deck = _deck()
    slide = zipfile.ZipFile(io.BytesIO(deck)).read("ppt/slides/slide1.xml")
    cdata = slide.replace(b"<a:t>Quarter</a:t>", f"<a:t><![CDATA[{MARKER} closes</a:t>".encode())
    uri = slide.replace(b"<p:sld ", f'<p:sld xmlns:zz="{MARKER} in a namespace" '.encode(), 1)
    core = b'<cp:x xmlns:cp="http://schemas.openxmlformats.org/package/2006/metadata/core-properties"/>'
    (folder / "cdata.pptx").write_bytes(rewritten(deck, {"ppt/slides/slide1.xml": cdata}))
    (folder / "uri.pptx").write_bytes(rewritten(deck, {"ppt/slides/slide1.xml": uri}))
    (folder / "core.pptx").write_bytes(rewritten(deck, {"docProps/core.xml": core}))
    docx = pytest.importorskip("docx")
    word = io.BytesIO()
    docx.Document().save(word)
    main_part = f'<x:document xmlns:x="{MARKER} revenue fell"/>'.encode()
    (folder / "ns.docx").write_bytes(rewritten(word.getvalue(), {"word/document.xml": main_part}))
    return {
        "cdata.pptx": "XMLSyntaxError at line",
        "uri.pptx": "XMLSyntaxError",
        "core.pptx": "properties cannot be read",
        "ns.docx": "holds no w:document",
    }


def _declared_files(folder: Path) -> None:
    """Files that declare an encoding no file is saved in: each is read as UTF-8 would be."""
    label = f"Memo.xn--{MARKER} the merger closes friday-.end"
    (folder / "idna.html").write_text(
        f'<html><head><meta charset="idna"></head><body><p>{label}</p></body></html>'
    )
    (folder / "rot13.html").write_text(
        '<html><head><meta charset="rot13"></head><body><p>Plain words.</p></body></html>'
    )
    (folder / "idna.eml").write_text(
        f"From: a@example.org\nSubject: note\nContent-Type: text/plain; charset=idna\n\n{label}\n"
    )
    (folder / "mod.py").write_bytes(
        f"# -*- coding: idna -*-\nnote = '{label}'\n".encode() + b"x = 2  # caf\xe9\n"
    )


def test_a_sync_names_no_text_and_reads_every_other_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "kb"
    folder.mkdir()
    reasons = _damaged_files(folder)
    _declared_files(folder)
    (folder / "ok.md").write_text("# Fine\n\nA note that reads.\n")
    store = ["--store", f"qdrant:{tmp_path / 'q'}", "--cache", str(tmp_path / "c.sqlite")]
    code, report = run_json(capsys, "sync", str(folder), *store)
    said = json.dumps(report) + capsys.readouterr().err
    assert code == 1  # files skipped, the rest synced
    assert MARKER not in said
    skipped = {row["doc_id"]: row["reason"] for row in report["skipped_files"]}
    # the code file's declaration names no file encoding: it is read as UTF-8, which fails
    assert set(skipped) == {*reasons, "mod.py"}
    for name, reason in reasons.items():
        assert reason in skipped[name], skipped[name]
    assert "not valid UTF-8" in skipped["mod.py"]
    assert report["documents"]["new"] == 4  # ok.md, both pages and the e-mail
    assert main(["status", *store[:2]]) == 0
    assert MARKER not in "".join(capsys.readouterr())


def test_an_encoding_no_file_is_saved_in_is_refused_where_a_user_names_it() -> None:
    for name in ("idna", "punycode", "rot13", "base64", "zlib", "undefined"):
        with pytest.raises(ConfigError, match="not an encoding text files are saved in"):
            check_encoding(name)
        assert declared_encoding(f"# -*- coding: {name} -*-\n".encode()) is None
    assert check_encoding("latin1") == "iso8859-1"


def test_the_loaders_raise_a_parse_error_that_quotes_nothing(tmp_path: Path) -> None:
    pytest.importorskip("langchain_core")
    from rechunk.adapters.langchain_loader import RechunkLoader

    reasons = _damaged_files(tmp_path)
    for name, reason in reasons.items():
        with pytest.raises(ParseError) as err:
            RechunkLoader(tmp_path / name).load()
        assert reason in str(err.value) and MARKER not in str(err.value)
    _declared_files(tmp_path)
    for name in ("idna.html", "idna.eml"):
        (doc,) = RechunkLoader(tmp_path / name).load()
        assert MARKER in doc.page_content  # read, as UTF-8


def test_a_read_of_the_folder_in_python_reports_no_text(tmp_path: Path) -> None:
    _damaged_files(tmp_path)
    found = read_documents([tmp_path], options=ParseOptions())
    assert len(found.skipped) == 4
    assert all(MARKER not in reason for _, reason in found.skipped)


def test_api_errors_say_what_a_metadata_value_is_not_what_it_says(
    minilm: Any, chroma_client: Any
) -> None:
    from qdrant_client import QdrantClient

    from rechunk import Document, policy_for, sync
    from rechunk.adapters.chroma import ChromaStore
    from rechunk.adapters.qdrant import QdrantStore

    chunker = policy_for(minilm, "structured")
    qdrant = QdrantStore(QdrantClient(":memory:"), "c")
    chroma = ChromaStore(chroma_client, "notes")
    for store in (qdrant, chroma):
        store.ensure_collection(minilm.dimension)
    values: list[Any] = [{"summary": f"{MARKER} board"}, [f"{MARKER} a", 1]]
    for value, said in zip(values, ("a dict", "a list of int and str")):
        doc = Document("a", "Some text.", locator=lambda s, e, v=value: {"where": v})
        with pytest.raises(InputError) as err:
            sync([doc], qdrant, chunker=chunker, embedder=minilm)
        assert MARKER not in str(err.value) and said in str(err.value)
    doc = Document("a", "Some text.", metadata={"summary": {"said": f"{MARKER} board"}})
    with pytest.raises(InputError) as err:
        sync([doc], chroma, chunker=chunker, embedder=minilm)
    assert MARKER not in str(err.value) and "holds a dict" in str(err.value)
    pytest.importorskip("langchain_core")
    from rechunk.adapters.langchain import RechunkTextSplitter

    with pytest.raises(InputError) as err:
        RechunkTextSplitter().create_documents(["text"], [{"source": [f"{MARKER} a"]}])
    assert MARKER not in str(err.value) and "got a list" in str(err.value)


def test_a_stored_field_holding_text_is_named_by_its_type(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A point another tool wrote in rechunk's shape, with text where a number belongs:
    status refuses the collection without printing the text."""
    from qdrant_client import QdrantClient, models

    folder = tmp_path / "kb"
    folder.mkdir()
    (folder / "a.md").write_text("# A\n\nhello\n")
    store = ["--store", f"qdrant:{tmp_path / 'q'}", "--cache", str(tmp_path / "c.sqlite")]
    assert main(["sync", str(folder), *store]) == 0
    client = QdrantClient(path=str(tmp_path / "q"))
    name = client.get_collections().collections[0].name
    payload = client.scroll(name, limit=1, with_payload=True)[0][0].payload
    assert payload is not None
    payload["metadata"]["ordinal"] = f"{MARKER} text in a field"
    point = models.PointStruct(id=str(uuid.uuid4()), vector=[0.1] * 384, payload=payload)
    client.upsert(name, [point])
    client.close()
    capsys.readouterr()
    assert main(["status", *store[:2]]) == 3
    err = capsys.readouterr().err
    assert "ordinal is a str" in err and MARKER not in err


class _Failing:
    """A parser whose library fails in its own way on a file: what parse_bytes stands
    between a parser and a sync for (a parser of the Parser protocol, not a stand-in for
    a service)."""

    name = "brittle"
    suffixes = (".brittle",)

    def __init__(self, error: BaseException) -> None:
        self.error = error

    def version(self) -> str:
        return "brittle/1"

    def parse(self, data: bytes, options: ParseOptions) -> list[Any]:
        raise self.error


def test_a_library_failure_is_a_skipped_file_named_by_its_class() -> None:
    """Any exception a parser's library raises is a ParseError naming its class and not
    its message (which may quote the file), and so is running out of memory while reading
    it (a zip bomb's page ended a sync of a whole folder); rechunk's own errors and an
    environment's missing module are not a file's fault and go through as they are."""
    from rechunk.errors import MissingDependencyError
    from rechunk.sources.registry import parse_bytes

    for error in (KeyError(f"{MARKER} key"), AttributeError(f"{MARKER}"), ValueError(MARKER)):
        with pytest.raises(ParseError) as err:
            parse_bytes(_Failing(error), b"", ParseOptions())
        assert type(error).__name__ in str(err.value) and MARKER not in str(err.value)
        assert "brittle parser" in str(err.value)
    kept = (
        MissingDependencyError("pypdfium2", "formats"),
        ModuleNotFoundError("no module named x"),
        ConfigError("a setting"),
    )
    for error in kept:
        with pytest.raises(type(error)):
            parse_bytes(_Failing(error), b"", ParseOptions())
    import zlib

    with pytest.raises(ParseError, match=r"\(zlib\.error\)"):  # not "(error)"
        parse_bytes(_Failing(zlib.error(MARKER)), b"", ParseOptions())
    with pytest.raises(ParseError, match="too large to read in the memory available"):
        parse_bytes(_Failing(MemoryError()), b"x" * 10, ParseOptions())
