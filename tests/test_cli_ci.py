"""The CLI as a CI pipeline runs it: from a read-only checkout (the working folder cannot
hold ``.rechunk``), with the store elsewhere; and ``rechunk measure`` on what a CI job
hands it (folders, ``/dev/null``, a process substitution of ``git show``)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import threading
import time
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from rechunk.cli import main


@contextmanager
def read_only(folder: Path, how: str) -> Iterator[None]:
    """Make the empty ``folder`` one nothing can be created in, also for root (chmod does
    not stop root, which the tests run as): ``mount`` puts a tmpfs there remounted
    read-only (EROFS, a read-only checkout); ``chattr`` makes it immutable (EPERM). Not as
    root, a mode of 0o555 does it (EACCES)."""
    if os.geteuid() != 0:
        folder.chmod(0o555)
        try:
            yield
        finally:
            folder.chmod(0o755)
        return
    if how == "mount":
        if shutil.which("mount") is None:
            pytest.skip("mount is not installed")
        made = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(folder)],
                              capture_output=True, text=True, timeout=30)  # fmt: skip
        if made.returncode != 0:
            pytest.skip(f"cannot mount a tmpfs here: {made.stderr.strip()}")
        try:
            subprocess.run(["mount", "-o", "remount,ro", str(folder)], check=True, timeout=30)
            yield
        finally:
            subprocess.run(["umount", "-l", str(folder)], capture_output=True, timeout=30)
        return
    if shutil.which("chattr") is None:
        pytest.skip("chattr is not installed")
    made = subprocess.run(["chattr", "+i", str(folder)], capture_output=True, text=True)
    if made.returncode != 0:
        pytest.skip(f"chattr +i is refused here ({made.stderr.strip()})")
    try:
        yield
    finally:
        subprocess.run(["chattr", "-i", str(folder)], check=True)


@pytest.fixture
def checkout(tmp_path: Path) -> Path:
    """A folder of two notes, beside an empty folder ``ro`` to run from."""
    folder = tmp_path / "repo"
    folder.mkdir()
    for name in ("alpha", "beta"):
        (folder / f"{name}.md").write_text(f"# {name}\n\nThe note called {name}.\n")
    (tmp_path / "ro").mkdir()
    return folder


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str, list[str]]:
    """``rechunk ARGS`` in this process: the exit code, stdout, stderr, and the warnings
    it gave (those it prints itself and those of rechunk's classes it raises, which the
    command prints as ``rechunk: warning: ...`` lines; a ResourceWarning a garbage
    collection gives meanwhile for another test's file is none of them)."""
    with warnings.catch_warnings(record=True) as raised:
        warnings.simplefilter("always")
        code = main(list(args))
    out, err = capsys.readouterr()
    printed = [line for line in err.splitlines() if line.startswith("rechunk: warning: ")]
    own = [w for w in raised if w.category.__module__.startswith("rechunk.")]
    return code, out, err, printed + [str(w.message) for w in own]


# ------------------------------------------------------- a working folder .rechunk cannot be in


@pytest.mark.parametrize("how", ["mount", "chattr"])
def test_a_read_only_working_folder_keeps_the_cache_in_memory(
    checkout: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], how: str
) -> None:
    """From a read-only checkout, with the store elsewhere, a sync failed with exit 3
    (``[Errno 30] Read-only file system: '.rechunk'``): the default cache's folder was made
    before anything else. The cache is kept in memory with a warning, as docs/cli.md says,
    and the manifest that cannot be written is a second warning, after the sync."""
    ro, store = checkout.parent / "ro", checkout.parent / "q"
    with read_only(ro, how):
        monkeypatch.chdir(ro)  # after mounting: the mount, not the folder under it
        code, out, err, said = run(capsys, "sync", str(checkout), "--store", f"qdrant:{store}",
                                   "--json")  # fmt: skip
        assert not (ro / ".rechunk").exists()
    assert code == 0, err
    assert json.loads(out)["documents"]["new"] == 2
    cache, manifest = said
    assert ".rechunk/cache.sqlite" in cache and "kept in memory" in cache, said
    assert ".rechunk/manifest.json" in manifest and "the sync itself is done" in manifest, said


def test_a_state_folder_that_is_a_file_keeps_the_cache_in_memory(
    checkout: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The same without root: ``.rechunk`` is a file (mkdir: EEXIST; inside it: ENOTDIR)."""
    monkeypatch.chdir(checkout.parent)
    Path(".rechunk").write_text("not a folder\n")
    code, out, err, said = run(capsys, "sync", str(checkout), "--store", "qdrant:q")
    assert code == 0, err
    assert "2 new" in out and Path(".rechunk").read_text() == "not a folder\n"
    # the manifest cannot be read either (ENOTDIR): a warning before the sync
    unread, cache, manifest = said
    assert ".rechunk/manifest.json cannot be read" in unread, said
    assert ".rechunk/cache.sqlite" in cache and "kept in memory" in cache, said
    assert "cannot record the folders synced in .rechunk/manifest.json" in manifest, said


def test_watch_from_a_working_folder_it_cannot_write_says_so_before_starting(
    checkout: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A watcher keeps its freshness state in .rechunk/: it warned that the cache was kept
    in memory, then exited 3 on a bare "[Errno 30] Read-only file system: '.rechunk'"."""
    pytest.importorskip("watchfiles")
    monkeypatch.chdir(checkout.parent)
    Path(".rechunk").write_text("not a folder\n")
    code, _, err, _ = run(capsys, "watch", str(checkout), "--store", "qdrant:q")
    assert code == 2, err
    assert "rechunk watch keeps its state in .rechunk/" in err and "writable folder" in err
    assert not Path("q").exists()  # nothing was opened or made


# ---------------------------------------------------------- a manifest that cannot be written


@pytest.mark.parametrize("how", ["mount", "chattr"])
def test_a_manifest_that_cannot_be_written_is_one_warning_after_the_sync(
    checkout: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], how: str
) -> None:
    """With ``--cache`` on a writable path, a finished sync from a read-only checkout exited
    3 with no report (``RuntimeError: generator didn't yield``): the manifest's context
    manager returned without yielding when its lock could not be taken."""
    ro, store = checkout.parent / "ro", checkout.parent / "q"
    cache = checkout.parent / "cache.sqlite"
    with read_only(ro, how):
        monkeypatch.chdir(ro)  # after mounting: the mount, not the folder under it
        code, out, err, said = run(capsys, "sync", str(checkout), "--store", f"qdrant:{store}",
                                   "--cache", str(cache))  # fmt: skip
    assert code == 0, err
    assert "2 new" in out and cache.exists()
    (warning,) = said
    assert "cannot record the folders synced in .rechunk/manifest.json" in warning, said
    assert "error" not in err


def test_a_manifest_lock_that_cannot_be_taken_leaves_the_sync_done(
    checkout: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The same without root: ``.rechunk`` is a file, so its lock cannot be made (ENOTDIR);
    the exit code is the sync's own (1: a file skipped) and the report is printed."""
    monkeypatch.chdir(checkout.parent)
    Path(".rechunk").write_text("not a folder\n")
    (checkout / "bad.md").write_bytes(b"\xff\xfe not UTF-8 \x80\n")
    code, out, err, said = run(capsys, "sync", str(checkout), "--store", "qdrant:q", "--cache",
                               "c.sqlite")  # fmt: skip
    assert code == 1, err
    assert "2 new" in out
    unread, warning = said
    assert ".rechunk/manifest.json cannot be read" in unread, said
    assert "cannot record the folders synced in .rechunk/manifest.json" in warning, said
    assert "rechunk: error" not in err


# ------------------------------------------------------------------ measure in a CI job

OLD_TEXT = "# Tides\n\nThe tide turns at two o'clock.\n\n## Gulls\n\nGulls follow the boats.\n"
NEW_TEXT = OLD_TEXT.replace("two o'clock", "three o'clock")


@pytest.fixture
def pair(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path]:
    """Two checkouts of one repository, ``old/a.md`` and ``new/a.md`` (one edit)."""
    monkeypatch.chdir(tmp_path)
    for name, text in (("old", OLD_TEXT), ("new", NEW_TEXT)):
        Path(name).mkdir()
        Path(name, "a.md").write_text(text)
    return Path("old/a.md"), Path("new/a.md")


def measured(capsys: pytest.CaptureFixture[str], old: str, new: str) -> tuple[int, dict, str]:
    code = main(["measure", old, new, "--chunker", "structured", "--json"])
    out, err = capsys.readouterr()
    return code, json.loads(out) if out.strip() else {}, err


def test_measure_on_folders_says_what_measures_a_folder(
    pair: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    """``rechunk measure old new`` on two checkouts said ``cannot read old: Is a
    directory``."""
    code, _, err = measured(capsys, "old", "new")
    assert code == 2
    (line,) = err.splitlines()
    assert "old is a folder: measure compares two files" in line, err
    assert "rechunk sync new --dry-run" in line, err


@pytest.mark.skipif(not Path("/dev/fd").is_dir(), reason="needs /dev/fd (a process substitution)")
@pytest.mark.timeout(60)
def test_measure_reads_a_pipe_as_the_other_files_format(
    pair: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    """``rechunk measure <(git show HEAD~1:a.md) a.md`` was refused: "/dev/fd/63 is not a
    regular file (FIFO)". A pipe is read to its end (as cat reads it: written already, or
    by a writer still at work), in the other file's format (a pipe has no suffix); a FIFO
    nothing writes to is, as OLD, an empty old version (a new file), and as NEW refused,
    never waited on, saying what to give instead."""
    old, new = pair
    code, by_files, _ = measured(capsys, str(old), str(new))
    assert code == 0 and by_files["chunkers"][0]["recompute_fraction"] < 1
    for late in (False, True):
        read_end, write_end = os.pipe()

        def write(write_end: int = write_end, late: bool = late) -> None:
            if late:
                time.sleep(0.3)  # git show still at work when measure reads
            os.write(write_end, old.read_bytes())
            os.close(write_end)

        writer = threading.Thread(target=write)
        writer.start()
        if not late:
            writer.join()  # git show done: its text waits in the pipe
        try:
            code, by_pipe, err = measured(capsys, f"/dev/fd/{read_end}", str(new))
        finally:
            writer.join()
            os.close(read_end)
        assert code == 0, err
        assert by_pipe == by_files  # read as Markdown, as new/a.md is
    # a FIFO nothing writes to, as NEW: refused at once, not waited on; as OLD it is an
    # empty old version, as `<(git show BASE:new.md)` of a file the change adds gives
    os.mkfifo("pipe")
    code, _, err = measured(capsys, str(old), "pipe")
    assert code == 2 and "pipe is not a regular file (FIFO)" in err, err
    assert "/dev/null" in err and "write it to a file" in err, err
    code, report, err = measured(capsys, "pipe", str(new))
    assert code == 0 and report["chunkers"][0]["recompute_fraction"] == 1.0, err


def test_measure_of_a_new_file_embeds_everything(
    pair: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    """A new file (OLD ``/dev/null``, as diff and git name it, or an empty file) was
    refused ("is not a regular file (character device)", "holds no text"): every input is
    new, R_c 100%. A NEW with no text (a deleted file) is still refused; so is a device
    that would be read for ever."""
    _, new = pair
    Path("empty.md").write_text("")
    for old in (os.devnull, "empty.md"):
        code, report, err = measured(capsys, old, str(new))
        assert code == 0, err
        (row,) = report["chunkers"]
        assert row["recompute_fraction"] == 1.0 and row["chunks_old"] == 0, report
        assert row["tokens_to_embed"] == row["tokens_total"] > 0, report
    code, _, err = measured(capsys, str(new), "empty.md")
    assert code == 2 and "empty.md holds no text" in err, err
    if os.path.exists("/dev/zero"):
        code, _, err = measured(capsys, "/dev/zero", str(new))
        assert code == 2 and "not a regular file (character device)" in err, err
        assert "write it to a file" in err, err


# ------------------------------------------------------------------ the --json report's keys


def test_every_key_of_the_sync_json_report_is_documented(
    checkout: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """docs/cli.md's table of ``sync --json`` names every top-level key a sync prints, and
    no other (a CI job reads them: ``model_check`` and ``model_check_tokens`` were added
    without a word)."""
    import re

    page = (Path(__file__).resolve().parents[1] / "docs" / "cli.md").read_text()
    table = page.split("### The `--json` report", 1)[1].split("<!-- help:sync:start -->")[0]
    documented = {
        key
        for row in table.splitlines()
        if row.startswith("| `")
        for key in re.findall(r"`([a-z_]+)`", row.split("|")[1])
    }
    monkeypatch.chdir(checkout.parent)
    code, out, err, _ = run(capsys, "sync", "repo", "--store", "qdrant:q", "--json")
    assert code == 0, err
    assert set(json.loads(out)) == documented
