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
