from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from rechunk.cli import main

ROOT = Path(__file__).resolve().parent.parent
OLD = ROOT / "examples" / "revisions" / "chunking-guide.v1.md"
NEW = ROOT / "examples" / "revisions" / "chunking-guide.v2.md"


def test_measure_table(capsys) -> None:  # type: ignore[no-untyped-def]
    assert main(["measure", str(OLD), str(NEW)]) == 0
    out = capsys.readouterr().out
    assert "edit fraction:" in out and "(small)" in out
    for name in ("fixed", "recursive", "cdc"):
        assert name in out


def test_measure_json_and_control(capsys) -> None:  # type: ignore[no-untyped-def]
    assert main(["measure", str(OLD), str(OLD), "--json", "--chunker", "cdc"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["edit_fraction"] == 0.0
    assert [row["chunker"] for row in report["chunkers"]] == ["cdc"]
    assert report["chunkers"][0]["recompute_fraction"] == 0.0
    assert report["chunkers"][0]["tokens_to_embed"] == 0


def test_measure_rejects_invalid_utf8(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    bad = tmp_path / "bad.md"
    bad.write_bytes(b"caf\xe9 au lait")
    assert main(["measure", str(bad), str(NEW)]) == 2
    err = capsys.readouterr().err
    assert "not valid UTF-8" in err and "Traceback" not in err


def test_entry_point_runs() -> None:
    exe = Path(sys.executable).parent / "rechunk"
    out = subprocess.run(
        [str(exe), "measure", str(OLD), str(NEW), "--chunker", "fixed"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert "fixed" in out.stdout


def test_measure_tokenizer_option(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    assert main(["measure", str(OLD), str(NEW), "--tokenizer", str(tmp_path / "nope.json")]) == 2
    assert "tokenizer file not found" in capsys.readouterr().err


def test_measure_chunker_is_repeatable(capsys) -> None:  # type: ignore[no-untyped-def]
    assert (
        main(["measure", str(OLD), str(NEW), "--json", "--chunker", "cdc", "--chunker", "fixed"])
        == 0
    )
    report = json.loads(capsys.readouterr().out)
    assert [row["chunker"] for row in report["chunkers"]] == ["cdc", "fixed"]


def test_measure_sizes_chunkers_as_sync_does(capsys) -> None:  # type: ignore[no-untyped-def]
    """By default each policy is the one a sync with the default model uses (its policy id);
    --study-sizes gives the study's 512-token parameters that rechunk bench uses."""
    import rechunk
    from rechunk.integrations.uri import open_embedder

    assert main(["measure", str(OLD), str(NEW), "--json"]) == 0
    sized = {
        row["chunker"]: row["policy"] for row in json.loads(capsys.readouterr().out)["chunkers"]
    }
    model = open_embedder(None)
    assert sized == {kind: rechunk.policy_for(model, kind).policy_id for kind in sized}
    assert main(["measure", str(OLD), str(NEW), "--json", "--study-sizes"]) == 0
    study = {
        row["chunker"]: row["policy"] for row in json.loads(capsys.readouterr().out)["chunkers"]
    }
    assert study["structured"] == rechunk.StructuredChunker().policy_id != sized["structured"]


def test_measure_reads_each_format_as_sync_does(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    """A DOCX pair is measured on the text its parser reads (it was refused as not UTF-8,
    with advice to pass --encoding); a file of records and an unreadable type are refused
    with the reason."""
    docx = __import__("pytest").importorskip("docx")
    paragraphs = [p for p in OLD.read_text(encoding="utf-8").split("\n\n") if p.strip()]
    for name, body in (("old", paragraphs), ("new", [*paragraphs[:3], "An inserted paragraph.",
                                                       *paragraphs[3:]])):  # fmt: skip
        document = docx.Document()
        for text in body:
            document.add_paragraph(text)
        document.save(str(tmp_path / f"{name}.docx"))
    assert main(["measure", str(tmp_path / "old.docx"), str(tmp_path / "new.docx"), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["edit_band"] == "small"
    structured = next(row for row in report["chunkers"] if row["chunker"] == "structured")
    assert 0 < structured["recompute_fraction"] < 0.5
    records = tmp_path / "two.jsonl"
    records.write_text('{"text": "one"}\n{"text": "two"}\n', encoding="utf-8")
    assert main(["measure", str(records), str(records)]) == 2
    assert "holds 2 documents" in capsys.readouterr().err
    binary = tmp_path / "blob.bin"
    binary.write_bytes(b"\x00\x01")
    assert main(["measure", str(binary), str(binary)]) == 2
    assert "no parser reads .bin" in capsys.readouterr().err
