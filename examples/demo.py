"""The main job, end to end: sync a folder, edit a document, sync again, sync once more.

Runs the real `rechunk` command line on the project's own guides (examples/docs)
in a scratch folder, with the embedded defaults: Qdrant under .rechunk/qdrant,
the SQLite cache under .rechunk/cache.sqlite and the packaged all-MiniLM-L6-v2.
"""

from __future__ import annotations

import shlex
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
RECHUNK = [sys.executable, "-m", "rechunk.cli"]

NEW_PARAGRAPH = """
Payload updates are cheap but not free. When a paragraph is inserted near the
top of a document, every later chunk keeps its text and its vector, and only
its recorded position changes; rechunk sends those positions as payload-only
updates and never re-sends a vector that is already stored.
"""


def run(*args: str, cwd: Path) -> None:
    print(f"$ rechunk {shlex.join(args)}", flush=True)
    done = subprocess.run([*RECHUNK, *args], cwd=cwd, text=True, capture_output=True)
    print(done.stdout.rstrip(), flush=True)
    if done.returncode != 0:
        print(done.stderr, file=sys.stderr)
        raise SystemExit(done.returncode)


def main() -> None:
    work = Path(tempfile.mkdtemp(prefix="rechunk-demo-"))
    try:
        shutil.copytree(HERE / "docs", work / "docs")
        run("sync", "docs", cwd=work)

        guide = work / "docs" / "sync-guide.md"
        text = guide.read_text(encoding="utf-8")
        guide.write_text(text.replace("## Embed\n", NEW_PARAGRAPH.lstrip() + "\n## Embed\n"),
                         encoding="utf-8")
        print("\n(edited docs/sync-guide.md: one paragraph inserted)\n")
        run("sync", "docs", cwd=work)

        print("\n(no edit: a no-op sync does not even load the model)\n")
        run("sync", "docs", cwd=work)
        run("query", "what happens when a sync crashes?", "-k", "2", cwd=work)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
