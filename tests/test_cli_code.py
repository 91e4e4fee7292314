"""`rechunk measure` and `rechunk bench` on source code: the code policy reported beside
the prose policies, with each pair's language (a file's suffix, or a pair's ``lang``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from rechunk.cli import main

pytest.importorskip("tree_sitter_python")

OLD = "\n\n".join(
    f"def handler_{k}(request):\n    \"\"\"Handle request kind {k}.\"\"\"\n"
    f"    value = request.get('v{k}')\n    return value * {k}\n"
    for k in range(30)
)
NEW = OLD.replace("def handler_15(", "def helper(x):\n    return x\n\n\ndef handler_15(")


def test_measure_reports_the_code_policy_for_source_files(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "old.py").write_text(OLD)
    (tmp_path / "new.py").write_text(NEW)
    assert main(["measure", str(tmp_path / "old.py"), str(tmp_path / "new.py"), "--json"]) == 0
    rows = {r["chunker"]: r for r in json.loads(capsys.readouterr().out)["chunkers"]}
    assert set(rows) == {"fixed", "recursive", "cdc", "structured", "code"}
    assert rows["code"]["policy"].startswith("code-")
    assert rows["code"]["recompute_fraction"] < rows["fixed"]["recompute_fraction"]
    # prose files get no code row; --chunker code on them needs --lang
    (tmp_path / "a.md").write_text(OLD)
    assert main(["measure", str(tmp_path / "a.md"), str(tmp_path / "a.md"), "--json"]) == 0
    assert "code" not in {r["chunker"] for r in json.loads(capsys.readouterr().out)["chunkers"]}
    assert main(["measure", str(tmp_path / "a.md"), str(tmp_path / "a.md"), "--chunker", "code"]) == 2
    capsys.readouterr()
    assert main(["measure", str(tmp_path / "a.md"), str(tmp_path / "a.md"), "--chunker", "code",
                 "--lang", "python", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["chunkers"][0]["recompute_fraction"] == 0.0


def test_measure_knows_a_script_with_no_suffix_by_its_first_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`git show HEAD~1:bin/serve > old` beside `bin/serve`: the code policy is measured
    as it is for `.py` files, its language read from the #! line."""
    (tmp_path / "old").write_text("#!/usr/bin/env python3\n" + OLD)
    (tmp_path / "serve").write_text("#!/usr/bin/env python3\n" + NEW)
    assert main(["measure", str(tmp_path / "old"), str(tmp_path / "serve"), "--json"]) == 0
    rows = {r["chunker"]: r for r in json.loads(capsys.readouterr().out)["chunkers"]}
    assert rows["code"]["policy"].startswith("code-python-")


def test_bench_takes_code_pairs_by_language(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    go_old = "\n\n".join(f"func F{k}(x int) int {{\n\treturn x + {k}\n}}" for k in range(30))
    go_new = go_old.replace("func F10(", "func G(x int) int {\n\treturn x\n}\n\nfunc F10(")
    corpus = tmp_path / "code.jsonl"
    corpus.write_text(
        json.dumps({"id": "py", "lang": "python", "old": OLD, "new": NEW}) + "\n"
        + json.dumps({"id": "go", "lang": "go", "old": "package m\n\n" + go_old,
                      "new": "package m\n\n" + go_new}) + "\n"
    )
    assert main(["bench", str(corpus), "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert set(result["chunkers"]) == {"fixed", "recursive", "cdc", "structured", "code"}
    code = result["chunkers"]["code"]
    assert not code["failures"] and code["control_max"] == 0.0
    assert code["cells"]["go/all"]["n"] == 1 and code["cells"]["python/all"]["n"] == 1
    # prose beside the code: the code policy is left out, and the table says so
    with corpus.open("a") as out:
        out.write(json.dumps({"id": "en", "lang": "en", "old": "One line.", "new": "Two."}) + "\n")
    assert main(["bench", str(corpus)]) == 0
    said = capsys.readouterr().out
    assert "the code policy is left out: 1 of the 3 pairs are not in a programming" in said
    # a language without a grammar is a failure of its pair, not of the run
    corpus.write_text(json.dumps({"id": "pl", "lang": "perl", "old": OLD, "new": NEW}) + "\n")
    assert main(["bench", str(corpus), "--chunker", "code", "--json"]) == 1
    assert json.loads(capsys.readouterr().out)["chunkers"]["code"]["failures"][0]["id"] == "pl"


def sync_without(module: str, folder: Path, other: tuple[str, str]) -> tuple[int, Any]:
    """``rechunk sync docs --json`` in ``folder``, in a process where ``module`` cannot be
    imported (an install without its extra), on a docs folder of one Markdown guide and
    ``other`` (name, text): the exit code and the report."""
    (folder / "docs").mkdir()
    (folder / "docs" / "index.md").write_text("# Guide\n\nSome text about the guide.\n")
    (folder / "docs" / other[0]).write_text(other[1])
    script = (
        f"import sys; sys.modules[{module!r}] = None\n"
        "from rechunk.cli import main\n"
        "raise SystemExit(main(['sync', 'docs', '--json']))\n"
    )
    run = subprocess.run(
        [sys.executable, "-c", script], cwd=folder, capture_output=True, text=True,
        timeout=300, env={**os.environ, "HF_HUB_OFFLINE": "1"},
    )  # fmt: skip
    assert run.stdout, run.stderr[-2000:]
    return run.returncode, json.loads(run.stdout)


def test_without_the_code_extra_a_folder_with_code_still_syncs(tmp_path: Path) -> None:
    """A docs folder holding one Sphinx conf.py, on an install without tree-sitter: the
    Python file goes to the recursive policy with its lines cited, and the summary says
    why; the sync does not stop (it did, at the first code chunk's location)."""
    code, report = sync_without(
        "tree_sitter", tmp_path, ("conf.py", "project = 'guide'\n\nextensions = []\n")
    )
    assert code == 0 and report["documents"]["new"] == 2
    assert report["no_grammar"]["python"]["reason"].startswith("tree-sitter is not installed")


def test_a_file_whose_parser_is_not_installed_is_skipped_not_the_sync(tmp_path: Path) -> None:
    """An HTML page on an install without the formats extra: skipped with the extra named
    (exit 1), and the Markdown beside it synced."""
    code, report = sync_without(
        "selectolax", tmp_path, ("page.html", "<html><body><p>A page.</p></body></html>")
    )
    assert code == 1 and report["documents"]["new"] == 1
    (skipped,) = report["skipped_files"]
    assert skipped["doc_id"] == "page.html" and "rechunk[formats]" in skipped["reason"]


def test_a_folder_of_one_language_names_its_code_policy(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Every file cut by the code policy of Python: the summary's policy row named the
    prose policy the sync was given (and no policies row showed), so a team syncing one
    service concluded its code got the prose policy."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "svc").mkdir()
    (tmp_path / "svc" / "cart.py").write_text(OLD, encoding="utf-8")
    (tmp_path / "svc" / "pricing.py").write_text("def total(p):\n    return sum(p)\n")
    assert main(["sync", "svc", "--dry-run"]) == 0
    (row,) = [line for line in capsys.readouterr().out.splitlines() if "policy " in line]
    assert row.split()[0] == "policy" and row.split()[1].startswith("code-python-"), row


def test_a_binary_with_a_code_suffix_is_not_read_and_no_failure(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A video saved as ``clip.ts`` (an MPEG transport stream) beside TypeScript: every sync
    exited 1 ('not valid UTF-8: name the encoding'), and with ``--encoding latin-1`` the
    video was embedded as TypeScript. Bytes of a source-code suffix that are not text are
    listed as binary and not read, and the sync succeeds; text in a legacy encoding is
    still a skip that names --encoding."""
    import random

    monkeypatch.chdir(tmp_path)
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "app.ts").write_text("export const answer = (): number => 42;\n")
    rng = random.Random(5)
    packets = b"".join(b"\x47" + rng.randbytes(187) for _ in range(40))
    (repo / "clip.ts").write_bytes(packets)
    (repo / "blob.py").write_bytes(rng.randbytes(4000).replace(b"\x00", b"\x01"))
    for extra in ([], ["--encoding", "latin-1"]):
        assert main(["sync", "repo", "--dry-run", "--json", *extra]) == 0
        report = json.loads(capsys.readouterr().out)
        expected = ["clip.ts"] if extra else ["blob.py", "clip.ts"]
        assert sorted(report["binary_files"]) == expected and report["skipped_files"] == []
    assert main(["sync", "repo", "--dry-run"]) == 0
    assert "binary" in capsys.readouterr().out
    (repo / "legacy.py").write_bytes("# café\nx = 1\n".encode("latin-1"))
    assert main(["sync", "repo", "--dry-run", "--json"]) == 1
    (skipped,) = json.loads(capsys.readouterr().out)["skipped_files"]
    assert skipped["doc_id"] == "legacy.py" and "--encoding" in skipped["reason"]


def test_source_in_utf16_or_utf32_without_a_mark_is_not_called_binary(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """UTF-16 source without a byte-order mark holds NUL bytes, yet it is text: it was
    listed as binary, and --prune deleted its chunks. It is a skipped file again (its
    chunks kept) that names the encoding to read it with."""
    monkeypatch.chdir(tmp_path)
    repo = tmp_path / "repo"
    repo.mkdir()
    source = "def total(items):\n    return sum(items)\n" * 5
    (repo / "u16.py").write_bytes(source.encode("utf-16-le"))
    (repo / "u32.py").write_bytes(source.encode("utf-32-le"))
    (repo / "ok.py").write_text(source)
    assert main(["sync", "repo", "--dry-run", "--json"]) == 1
    report = json.loads(capsys.readouterr().out)
    assert report["binary_files"] == []
    skipped = {s["doc_id"]: s["reason"] for s in report["skipped_files"]}
    assert set(skipped) == {"u16.py", "u32.py"} and "utf-16-le" in skipped["u16.py"]
