"""Text files that are not UTF-8: a byte-order mark decides, else UTF-8, else the encoding
the user named (`--encoding`, the loaders' `encoding`). The rule, its errors, and a
folder of files that iconv wrote in legacy encodings synced by the real CLI into
embedded Qdrant with the packaged MiniLM."""

from __future__ import annotations

import codecs
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from cli_helpers import run_json
from hypothesis import given
from hypothesis import strategies as st
from qdrant_client import QdrantClient

from rechunk.cli import main
from rechunk.errors import ConfigError, InputError
from rechunk.sources import ParseError, ParseOptions, parse_file
from rechunk.sources.encoding import check_encoding, declared_encoding, decode_text, decode_text_as
from rechunk.sources.files import read_documents, read_text_file
from rechunk.sources.generated import generated_by_content

TEXT = "Café crème: the façade's naïve señor paid 5 € for a Größe-M jacket."
MARKED = [
    ("utf-8", codecs.BOM_UTF8),
    ("utf-16-le", codecs.BOM_UTF16_LE),
    ("utf-16-be", codecs.BOM_UTF16_BE),
    ("utf-32-le", codecs.BOM_UTF32_LE),
    ("utf-32-be", codecs.BOM_UTF32_BE),
]


# -- the rule -----------------------------------------------------------------------------


@pytest.mark.parametrize(("codec", "bom"), MARKED)
def test_a_byte_order_mark_decides_and_is_no_text(codec: str, bom: bytes) -> None:
    assert decode_text(bom + TEXT.encode(codec)) == TEXT
    assert decode_text(bom + TEXT.encode(codec), "cp1252") == TEXT  # the mark wins


def test_valid_utf8_is_read_as_utf8_whatever_encoding_is_named() -> None:
    assert decode_text(TEXT.encode()) == TEXT
    assert decode_text(TEXT.encode(), "cp1252") == TEXT


@pytest.mark.parametrize("codec", ["cp1252", "latin-1", "iso8859-15", "mac-roman"])
def test_bytes_that_are_not_utf8_are_read_in_the_encoding_named(codec: str) -> None:
    data = TEXT.replace("€", "E").encode(codec)
    with pytest.raises(
        ParseError, match=r"not valid UTF-8 \(byte offset 3\).*--encoding; encoding= in Python"
    ):
        decode_text(data)
    assert decode_text(data, codec) == TEXT.replace("€", "E")


@pytest.mark.parametrize("codec", ["utf-16-le", "utf-16-be"])
def test_utf16_without_a_mark_is_read_when_named_and_named_otherwise(codec: str) -> None:
    for text in ("plain words", TEXT):  # UTF-8 full of NULs; not UTF-8 at all
        data = text.encode(codec)
        with pytest.raises(ParseError, match=f"UTF-16 without a byte-order mark.*{codec}"):
            decode_text(data)
        assert decode_text(data, codec) == text


@pytest.mark.parametrize("codec", ["utf-16-le", "utf-16-be"])
def test_utf16_of_other_scripts_without_a_mark_is_named_too(codec: str) -> None:
    """Cyrillic or Japanese in UTF-16 has zero bytes only from its spaces, digits and line
    ends: it was called a binary file, and the user never told of --encoding."""
    for text in (
        "Синхронизация 2 раза в день.\nИндекс обновляется сам.\n",
        "同期は一日に2回実行されます。\n索引は自動で更新されます。\n",
    ):
        data = (text * 4).encode(codec)
        with pytest.raises(ParseError, match=f"UTF-16 without a byte-order mark.*{codec}"):
            decode_text(data)
        assert decode_text(data, codec) == text * 4


def test_nul_bytes_are_binary_whatever_is_named() -> None:
    # the last: a compiled object with bytes UTF-8 never holds, named a .c file (a CI
    # user was told it was "not valid UTF-8: name its encoding", then, given latin-1, "not
    # valid text in any encoding tried"; with no newline it was called minified)
    elf = b"\x7fELF\x02\x01\x01\x00\x00\x00\xfe\xed" * 100
    for data in (b"ok\x00nul", b"\x00\x01\x02\x03binary\x00\x00data\x00", elf):
        with pytest.raises(ParseError, match="contains NUL bytes"):
            decode_text(data)
        with pytest.raises(ParseError, match="contains NUL bytes"):
            decode_text(data, "cp1252")
        with pytest.raises(ParseError, match="contains NUL bytes"):
            decode_text(data, "latin-1")
    assert generated_by_content(elf) is None  # not minified: binary, as reading it says


def test_what_no_encoding_decodes_names_each_one_tried() -> None:
    with pytest.raises(ParseError) as failed:
        decode_text(b"caf\x81\xe9", "cp1252")  # 0x81 is unassigned in cp1252
    assert str(failed.value) == (
        "not valid text in any encoding tried: utf-8 (byte offset 3), cp1252 (byte offset 3)"
    )
    with pytest.raises(ParseError, match=r"not valid UTF-16-LE \(byte offset 4\), despite"):
        decode_text(codecs.BOM_UTF16_LE + b"a\x00\x00\xdc")  # a lone low surrogate


def test_detection_reads_what_no_encoding_named_reads() -> None:
    pytest.importorskip("charset_normalizer")
    german = "Die Größe der Straße ändert sich über die Jahre nur wenig, sagt der Bürgermeister."
    data = german.encode("cp1252")
    assert decode_text(data, detect=True) == german
    assert decode_text(data, "shift_jis", detect=True) == german  # shift_jis fails first


def test_an_encoding_name_is_checked_and_normalised() -> None:
    assert check_encoding("Latin1") == "iso8859-1"
    assert check_encoding("UTF8") == "utf-8"
    assert check_encoding(None) is None
    for name in ("no-such-codec", "base64", "rot13"):  # unknown, or bytes to bytes
        with pytest.raises(ConfigError, match="not an encoding text files are saved in"):
            check_encoding(name)
    with pytest.raises(ConfigError):
        ParseOptions(encoding="no-such-codec")
    assert ParseOptions(encoding="LATIN-1").encoding == "iso8859-1"


@given(st.text(st.characters(blacklist_characters="\x00", blacklist_categories=("Cs",))))
def test_every_text_survives_every_marked_encoding(text: str) -> None:
    for codec, bom in MARKED:
        assert decode_text(bom + text.encode(codec)) == text


@given(st.text(st.characters(codec="cp1252", blacklist_characters="\x00")))
def test_a_cp1252_file_reads_as_itself_unless_its_bytes_are_valid_utf8(text: str) -> None:
    data = text.encode("cp1252")
    try:
        as_utf8: str | None = data.decode("utf-8")
    except UnicodeDecodeError:
        as_utf8 = None
    if as_utf8 is not None and as_utf8.startswith("\ufeff"):
        as_utf8 = as_utf8[1:]  # cp1252's "ï»¿" is UTF-8's byte-order mark
    assert decode_text(data, "cp1252") == (text if as_utf8 is None else as_utf8)


# -- every reader of text files takes it --------------------------------------------------

MARKDOWN = "# Réunion\n\nLe café du matin coûte 2 € et la crème 50 centimes.\n"
CSV = "nom;ville\nJérôme;Besançon\nAnaïs;Nîmes\n"
PAGE = "<html><body><main><h1>Réunion</h1><p>Le café coûte 2 €.</p></main></body></html>"


@pytest.mark.parametrize(
    ("fmt", "text", "expected"),
    [
        ("text", MARKDOWN, "Le café du matin"),
        ("markdown", MARKDOWN, "Le café du matin"),
        ("rst", "Réunion\n=======\n\nLe café du matin.\n", "Le café du matin"),
        ("csv", CSV, "Besançon"),
        ("html", PAGE, "Le café coûte 2 €."),
    ],
)
def test_each_text_format_reads_a_cp1252_file_when_told(
    fmt: str, text: str, expected: str, tmp_path: Path
) -> None:
    if fmt == "html":
        pytest.importorskip("selectolax")
    path = tmp_path / "doc.any"
    path.write_bytes(text.encode("cp1252"))
    with pytest.raises(ParseError, match=f"^{path}: not valid UTF-8"):
        parse_file(path, fmt)
    (doc,) = parse_file(path, fmt, ParseOptions(encoding="cp1252"))
    assert expected in doc.text
    assert "invalid_bytes" not in doc.metadata and doc.metadata["encoding"] == "cp1252"


def test_a_page_s_declared_charset_beats_the_encoding_named(tmp_path: Path) -> None:
    pytest.importorskip("selectolax")
    path = tmp_path / "page.html"
    declared = PAGE.replace("<html>", "<html><head><meta charset='utf-8'></head>")
    path.write_bytes(declared.encode("cp1252"))
    (doc,) = parse_file(path, "html", ParseOptions(encoding="cp1252"))
    assert doc.metadata["encoding"] == "utf-8" and doc.metadata["invalid_bytes"] is True


@pytest.mark.parametrize(
    ("head", "expected"),
    [
        (b"# -*- coding: latin-1 -*-\n", "iso8859-1"),  # Emacs style
        (b"#!/usr/bin/env python3\n# vim: set fileencoding=cp1252 :\n", "cp1252"),
        (b"\n# coding=koi8-r\n", "koi8-r"),  # a blank first line
        (b"x = 1  # coding: latin-1\n", None),  # not a comment line
        (b"import os\n# coding: latin-1\n", None),  # second line after code
        (b"#\n#\n# coding: latin-1\n", None),  # third line
        (b"# coding: no-such-codec\n", None),
        (b"# coding: base64\n", None),  # a codec, not a text encoding
        (b"# A note on coding style\n", None),
    ],
)
def test_a_coding_declaration_is_read_as_pep_263_says(head: bytes, expected: str | None) -> None:
    assert declared_encoding(head + b"pass\n") == expected


def test_a_python_file_is_read_in_the_encoding_it_declares(tmp_path: Path) -> None:
    """A latin-1 module that says so was skipped as "not valid UTF-8" unless --encoding
    named latin-1 for every file of the sync."""
    source = '# -*- coding: latin-1 -*-\n"""Café."""\nNAME = "naïve"\n'
    (tmp_path / "legacy.py").write_bytes(source.encode("latin-1"))
    (tmp_path / "windows.py").write_bytes(
        '# coding: latin-1\nQUOTE = "\u201cyes\u201d"\n'.encode("cp1252")
    )
    # a byte cp1252 leaves undefined is read as latin-1 reads it
    (tmp_path / "strict.py").write_bytes(b'# coding: latin-1\nX = "\x81\xe9"\n')
    # valid UTF-8 stays UTF-8 whatever the line says (a file converted, its line kept)
    (tmp_path / "converted.py").write_bytes(source.encode("utf-8"))
    # the file's own word comes before --encoding's, which applies to every file
    docs = {
        Path(doc.doc_id).name: doc
        for doc in read_documents([tmp_path], options=ParseOptions(encoding="shift_jis")).documents
    }
    assert docs["legacy.py"].text == source
    # latin-1 is read as cp1252, as browsers read the label: Windows tools saved such
    # files with cp1252's quotes, which latin-1 reads as control codes
    assert docs["legacy.py"].metadata["encoding"] == "cp1252"
    assert docs["windows.py"].text.endswith('"\u201cyes\u201d"\n')
    assert docs["strict.py"].text.endswith('"\x81\xe9"\n')
    assert docs["strict.py"].metadata["encoding"] == "iso8859-1"
    assert docs["converted.py"].text == source and "encoding" not in docs["converted.py"].metadata


def test_a_declared_encoding_that_does_not_decode_names_each_one_tried() -> None:
    data = b"# coding: ascii\nNAME = 'caf\xe9'\n"
    with pytest.raises(ParseError, match=r"utf-8 \(byte offset 27\), ascii \(byte offset 27\)"):
        decode_text_as(data, declared=declared_encoding(data))


def test_read_text_file_names_the_file_once(tmp_path: Path) -> None:
    path = tmp_path / "old.c"
    path.write_bytes("/* © Jörg */\n".encode("latin-1"))
    with pytest.raises(ParseError) as failed:
        read_text_file(path)
    assert str(failed.value).count(str(path)) == 1
    assert isinstance(failed.value, InputError)
    assert read_text_file(path, "latin-1") == "/* © Jörg */\n"


# -- a folder of legacy files, synced ------------------------------------------------------

C_SOURCE = """/* Temperaturfühler: Messwerte in °C, geschrieben von Jörg Müller, 1998. */
#include <stdio.h>

/* Gibt die Temperatur in Grad Celsius zurück (Fühler Nr. 2, Büro). */
double lese_fuehler(int nummer) {
    return nummer * 0.5;
}

int main(void) {
    printf("Temperatur: %.1f\\n", lese_fuehler(2));
    return 0;
}
"""
NOTES = """# Übergabe an die Nachtschicht

Die Kühlung im Serverraum läuft wieder; der Fühler im Büro zeigt 21,5 °C.

Bitte prüfen: Lüfter 3 ist laut, Ersatzteil ist bestellt.
"""
README = "# Thermometer\n\nReads the sensors and prints °C, in UTF-8 like most files.\n"
WINDOWS_NOTE = "Passwörter werden nie in dieser Datei gespeichert.\r\nNur Hinweise.\r\n"


def _iconv(text: str, codec: str, path: Path) -> None:
    """``path`` holds ``text`` in ``codec``, written by iconv from UTF-8."""
    path.parent.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(
        ["iconv", "-f", "UTF-8", "-t", codec], input=text.encode(), capture_output=True,
        check=True, timeout=30,
    )  # fmt: skip
    path.write_bytes(done.stdout)


@pytest.fixture
def legacy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    if shutil.which("iconv") is None:
        pytest.skip("iconv is not installed: it writes this test's legacy files")
    repo = tmp_path / "repo"
    _iconv(C_SOURCE, "ISO-8859-1", repo / "src" / "fuehler.c")
    _iconv(NOTES, "CP1252", repo / "docs" / "uebergabe.md")
    _iconv(WINDOWS_NOTE, "UTF-16", repo / "docs" / "hinweise.txt")  # with its mark
    (repo / "README.md").write_text(README)
    monkeypatch.chdir(tmp_path)
    return repo


def _stored_encodings(tmp_path: Path) -> dict[str, set[str | None]]:
    client = QdrantClient(path=str(tmp_path / ".rechunk" / "qdrant"))
    try:
        points, _ = client.scroll("rechunk", limit=1_000, with_payload=True)
    finally:
        client.close()
    out: dict[str, set[str | None]] = {}
    for point in points:
        meta = dict(point.payload or {})["metadata"]
        out.setdefault(meta["doc_id"], set()).add(meta.get("encoding"))
    return out


def _stored(tmp_path: Path) -> dict[str, str]:
    client = QdrantClient(path=str(tmp_path / ".rechunk" / "qdrant"))
    try:
        points, _ = client.scroll("rechunk", limit=1_000, with_payload=True)
    finally:
        client.close()
    texts: dict[str, list[Any]] = {}
    for point in points:
        payload = dict(point.payload or {})
        meta = payload["metadata"]
        texts.setdefault(meta["doc_id"], []).append((meta["start"], payload["page_content"]))
    return {doc: "".join(t for _, t in sorted(parts)) for doc, parts in texts.items()}


def test_a_folder_of_legacy_files_syncs_with_encoding_and_is_kept_without(
    legacy: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, report = run_json(capsys, "sync", "repo", "--glob", "*.c", "--glob", "*.md",
                            "--glob", "*.txt")  # fmt: skip
    assert code == 1, report  # synced what it could, and named the rest
    reasons = {s["doc_id"]: s["reason"] for s in report["skipped_files"]}
    assert set(reasons) == {"src/fuehler.c", "docs/uebergabe.md"}
    for reason in reasons.values():  # once, not "PATH: PATH: ..."
        assert reason.startswith("not valid UTF-8 (byte offset") and "--encoding" in reason
    assert {d["doc_id"] for d in report["per_document"]} == {"README.md", "docs/hinweise.txt"}

    code, report = run_json(capsys, "sync", "repo", "--glob", "*.c", "--glob", "*.md",
                            "--glob", "*.txt", "--encoding", "latin-1")  # fmt: skip
    assert code == 0 and report["documents"]["new"] == 2 and not report["skipped_files"]
    # what was not read as UTF-8 is counted, and each chunk's payload names its encoding
    utf16 = [name for name in report["encodings"] if name.startswith("utf-16-")]  # iconv's order
    assert report["encodings"] == {"iso8859-1": 2, **dict.fromkeys(utf16, 1)} and utf16
    encodings = _stored_encodings(legacy.parent)
    assert encodings["src/fuehler.c"] == {"iso8859-1"} and encodings["README.md"] == {None}
    stored = _stored(legacy.parent)
    assert "Jörg Müller" in stored["src/fuehler.c"] and "°C" in stored["src/fuehler.c"]
    assert "Die Kühlung im Serverraum" in stored["docs/uebergabe.md"]
    assert "Passwörter" in stored["docs/hinweise.txt"]
    assert "Reads the sensors and prints °C" in stored["README.md"]  # UTF-8 stays UTF-8

    # the same bytes, the same options: nothing to embed
    code, report = run_json(capsys, "sync", "repo", "--glob", "*.c", "--glob", "*.md",
                            "--glob", "*.txt", "--encoding", "latin-1")  # fmt: skip
    assert code == 0 and report["tokens_embedded"] == 0

    # forgetting --encoding on a pruning run loses nothing: skipped files keep their chunks
    code, report = run_json(capsys, "sync", "repo", "--glob", "*.c", "--glob", "*.md",
                            "--glob", "*.txt", "--prune")  # fmt: skip
    assert code == 1 and report["documents"]["deleted"] == 0
    assert set(_stored(legacy.parent)) == set(stored)


def test_an_unknown_encoding_is_refused_before_anything_is_written(
    legacy: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["sync", "repo", "--encoding", "klingon"]) == 2
    assert "encoding 'klingon': not an encoding text files are saved in" in capsys.readouterr().err
    assert not (legacy.parent / ".rechunk").exists()


def test_read_documents_and_measure_take_the_encoding(
    legacy: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    files = read_documents([legacy], ["*.c"], options=ParseOptions(encoding="latin-1"))
    (doc,) = files.documents
    assert doc.metadata["language"] == "c" and "Jörg" in doc.text
    old = legacy / "src" / "fuehler.c"
    new = legacy / "fuehler_neu.c"
    _iconv(C_SOURCE.replace("Nr. 2", "Nr. 3"), "ISO-8859-1", new)
    assert main(["measure", str(old), str(new)]) == 2
    assert "not valid UTF-8" in capsys.readouterr().err
    code, report = run_json(capsys, "measure", str(old), str(new), "--encoding", "latin-1")
    assert code == 0 and report["edit_band"] == "small"
    assert {row["chunker"] for row in report["chunkers"]} >= {"structured", "code"}


# -- the loaders ---------------------------------------------------------------------------


def test_the_langchain_loader_takes_textloader_s_encoding_arguments(legacy: Path) -> None:
    pytest.importorskip("langchain_core")
    from rechunk.adapters.langchain_loader import RechunkLoader

    notes = legacy / "docs" / "uebergabe.md"
    with pytest.raises(ParseError, match="not valid UTF-8"):
        RechunkLoader(notes).load()
    (doc,) = RechunkLoader(notes, "cp1252").load()  # TextLoader's positional order
    assert "Die Kühlung im Serverraum" in doc.page_content
    readme = legacy / "README.md"
    both = RechunkLoader([notes, readme], encoding="cp1252").load()  # a mixed folder
    assert "°C" in both[1].page_content
    pytest.importorskip("charset_normalizer")
    (found,) = RechunkLoader(notes, autodetect_encoding=True).load()
    # a guess: on so short a note charset-normalizer picks ISO 8859-14, whose 0xB0 is
    # not the degree sign; the letters it shares with cp1252 come out right
    assert "Die Kühlung im Serverraum" in found.page_content
    # so does a page that declares no charset, read as a text file is
    pytest.importorskip("selectolax")
    page = legacy / "docs" / "kantine.html"
    menu = "Heute in der Kantine: Käsespätzle mit Röstzwiebeln und grünem Salat. " * 6
    page.write_bytes(f"<html><body><h1>Kantine</h1><p>{menu}</p></body></html>".encode("cp1252"))
    (found,) = RechunkLoader(page, autodetect_encoding=True).load()
    assert "Käsespätzle mit Röstzwiebeln" in found.page_content
    with pytest.raises(ConfigError):
        RechunkLoader(notes, "klingon")


def test_the_llamaindex_reader_takes_an_encoding_simpledirectoryreader_cannot_pass(
    legacy: Path,
) -> None:
    pytest.importorskip("llama_index.core")
    from llama_index.core import SimpleDirectoryReader

    from rechunk.adapters.llamaindex_reader import RechunkReader

    reader = RechunkReader(encoding="latin-1")
    docs = SimpleDirectoryReader(
        str(legacy), recursive=True, file_extractor=reader.file_extractor(),
        required_exts=[".md", ".txt"], raise_on_error=True,
    ).load_data()  # fmt: skip
    texts = {Path(d.metadata["file_path"]).name: d.text for d in docs}
    assert "Die Kühlung im Serverraum" in texts["uebergabe.md"]
    assert "Passwörter" in texts["hinweise.txt"]


def test_encoding_given_twice_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    """The first --encoding was dropped in silence, and the second applied to every file."""
    from rechunk.cli import main

    monkeypatch.chdir(tmp_path)
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "a.txt").write_text("plain\n")
    with pytest.raises(SystemExit) as exit_:
        main(["sync", "d", "--encoding", "cp1252", "--encoding", "utf-16-le"])
    assert exit_.value.code == 2
    assert "--encoding given twice" in capsys.readouterr().err
    assert not (tmp_path / ".rechunk").exists()


def test_sync_names_pages_read_with_replaced_bytes_and_skips_undeclared_legacy_ones(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A cp1252 page that declares no charset was stored with U+FFFD for its accents, and
    one that declares UTF-8 wrongly too, both without a word. The first is skipped with
    the reason and --encoding reads it; the second is read as a browser reads it and
    named in the summary and in --json."""
    pytest.importorskip("selectolax")
    monkeypatch.chdir(tmp_path)
    site = tmp_path / "site"
    site.mkdir()
    body = "<html><body><main><h1>Caf\u00e9 policy</h1><p>Our caf\u00e9 serves fair trade coffee.</p></main></body></html>"
    (site / "plain.html").write_bytes(body.encode("cp1252"))
    (site / "lying.html").write_bytes(
        body.replace("<html>", "<html><head><meta charset='utf-8'></head>").encode("cp1252")
    )
    (site / "fine.html").write_text(body, encoding="utf-8")
    code, report = run_json(capsys, "sync", "site", "--dry-run")
    assert code == 1
    (skipped,) = report["skipped_files"]
    assert skipped["doc_id"] == "plain.html" and "--encoding" in skipped["reason"]
    assert report["invalid_bytes_files"] == ["lying.html"]
    code, report = run_json(capsys, "sync", "site", "--dry-run", "--encoding", "cp1252")
    assert code == 0 and report["skipped_files"] == [] and report["encodings"] == {"cp1252": 1}
    assert main(["sync", "site", "--dry-run", "--encoding", "cp1252"]) == 0
    (row,) = [line for line in capsys.readouterr().out.splitlines() if "invalid bytes" in line]
    assert "lying.html" in row and "U+FFFD" in row
