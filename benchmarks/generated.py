"""Generated-files benchmark: what a sync of a small web app's repository embeds when its npm
lockfile is read (``--include-generated``) and when it is left out (the default).

The app is a ``package.json`` written here (React, React Router, Vite, Vitest, ESLint,
TypeScript, pinned) and two source files of this project
(``tests/written_by_tools/shop/web/src/cart.js``, ``examples/code/format.ts``). npm writes
the lockfile (``npm install --package-lock-only --ignore-scripts --before DATE``: versions
published after DATE are not considered, so a rerun resolves the same tree for as long as
the registry serves those versions). Three revisions, each synced by ``rechunk sync`` on
the default embedder into two collections, one per mode:

1. the first sync;
2. a patch bump (Vite 6.0.3 -> 6.0.7), the lockfile written again;
3. two major changes (React 18 -> 19, ESLint 9 -> 8), the lockfile written again.

Needs ``npm`` and the npm registry.

Then what the tests catch on real releases: the newest release of every package the
code benchmarks read (``benchmarks/code_heldout.py``, sets a-d; archives from PyPI and
npm, digests checked, cached as that script caches them), every file judged as
``rechunk sync`` judges it. The files caught by their content, not their name, are listed
in the results so that each can be checked by eye.

    python benchmarks/generated.py            # writes docs/benchmarks.md and results/generated.json
    python benchmarks/generated.py --report   # the docs section again from the results
    python benchmarks/generated.py --releases # the releases judged again, the revisions kept
"""

from __future__ import annotations

import argparse
import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import code_heldout
from _report import ROOT, machine, write_section

from rechunk.sources.documents import CODE, kind_of
from rechunk.sources.generated import (
    LOCKFILE,
    MARKED,
    REASONS,
    WRAPPER,
    generated_by_content,
    generated_by_name,
)

BEFORE = "2026-11-01"
SOURCES = (
    ROOT / "tests" / "written_by_tools" / "shop" / "web" / "src" / "cart.js",
    ROOT / "examples" / "code" / "format.ts",
)
BASE = {
    "react": "18.3.1",
    "react-dom": "18.3.1",
    "react-router-dom": "6.28.0",
}
DEV = {
    "@vitejs/plugin-react": "4.3.4",
    "eslint": "9.17.0",
    "typescript": "5.7.2",
    "vite": "6.0.3",
    "vitest": "2.1.8",
}
#: (what changed, dependency changes, devDependency changes)
REVISIONS: list[tuple[str, dict[str, str], dict[str, str]]] = [
    ("first sync", {}, {}),
    ("patch bump: Vite 6.0.3 -> 6.0.7", {}, {"vite": "6.0.7"}),
    (
        "major changes: React 18 -> 19, ESLint 9 -> 8",
        {"react": "19.0.0", "react-dom": "19.0.0"},
        {"eslint": "8.57.1"},
    ),
]
MODES = {"default": [], "--include-generated": ["--include-generated"]}


def write_lockfile(app: Path, dependencies: dict[str, str], dev: dict[str, str]) -> None:
    manifest = {
        "name": "storefront",
        "version": "0.1.0",
        "private": True,
        "type": "module",
        "dependencies": dependencies,
        "devDependencies": dev,
    }
    (app / "package.json").write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
    subprocess.run(
        ["npm", "install", "--package-lock-only", "--ignore-scripts", "--no-audit",
         "--no-fund", f"--before={BEFORE}"],
        cwd=app, check=True, capture_output=True, timeout=600,
    )  # fmt: skip


def sync(work: Path, mode: str) -> dict[str, Any]:
    store = work / f"store-{mode.strip('-')}"
    cache = work / f"cache-{mode.strip('-')}.sqlite"
    run = subprocess.run(
        [sys.executable, "-m", "rechunk", "sync", "app", "--store", f"qdrant:{store}",
         "--cache", str(cache), "--json", *MODES[mode]],
        cwd=work, check=False, capture_output=True, text=True, timeout=1800,
    )  # fmt: skip
    if run.returncode != 0:
        raise SystemExit(f"rechunk sync failed ({run.returncode}): {run.stderr[-2000:]}")
    report = json.loads(run.stdout)
    return {
        "tokens_embedded": report["tokens_embedded"],
        "tokens_total": report["tokens_total"],
        "embed_seconds": report["seconds"]["embed"],
        "documents": len(report["per_document"]),
        "generated_files": report["generated_files"],
    }


def releases() -> dict[str, Any]:
    """Every file of the newest release of each package of the code benchmarks, judged."""
    counts: Counter[str] = Counter()
    by_content: list[str] = []
    packages = {}
    for sources in code_heldout.SETS.values():
        for source in sources:
            packages[(source.registry, source.package)] = source
    for source in packages.values():
        version = source.versions[-1]
        data = code_heldout._archive(source, version, code_heldout._metadata(source))
        with tarfile.open(fileobj=io.BytesIO(data)) as archive:
            for member in archive.getmembers():
                if not member.isfile():
                    continue
                name = member.name
                counts["files"] += 1
                why = generated_by_name(name)
                if why is not None:
                    counts[f"{why} (name)"] += 1
                    continue
                if kind_of(name) != CODE:
                    continue
                counts["source files"] += 1
                raw = archive.extractfile(member)
                why = generated_by_content(raw.read()) if raw is not None else None
                if why is not None:
                    counts[f"{why} (content)"] += 1
                    by_content.append(f"{source.package} {version}: {name} ({why})")
    return {"packages": len(packages), "counts": dict(counts), "by_content": by_content}


def main() -> None:
    npm = shutil.which("npm")
    if npm is None:
        raise SystemExit("npm is not on PATH: this benchmark has npm write the lockfile")
    version = subprocess.run([npm, "--version"], capture_output=True, text=True).stdout.strip()
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        app = work / "app"
        (app / "src").mkdir(parents=True)
        for source in SOURCES:
            shutil.copy(source, app / "src" / source.name)
        dependencies, dev = dict(BASE), dict(DEV)
        for what, dep_changes, dev_changes in REVISIONS:
            dependencies.update(dep_changes)
            dev.update(dev_changes)
            write_lockfile(app, dependencies, dev)
            lock = (app / "package-lock.json").read_bytes()
            row: dict[str, Any] = {
                "revision": what,
                "lockfile_lines": lock.count(b"\n"),
                "lockfile_bytes": len(lock),
            }
            for mode in MODES:
                row[mode] = sync(work, mode)
            rows.append(row)
            print(json.dumps(row), flush=True)
    load = os.getloadavg()[0]
    out = ROOT / "benchmarks" / "results" / "generated.json"
    result = {
        "benchmark": "generated",
        "machine": machine(),
        "npm": version,
        "before": BEFORE,
        "load_average_1min": load,
        "revisions": rows,
        "releases": releases(),
    }
    out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    write_section("generated", report(result))


#: files the release scan catches by content that were read by eye and are a person's work,
#: not a tool's (by the end of their path in the archive, with what each is)
WRITTEN_BY_A_PERSON = {
    "letsencrypt/templates/crontab.j2": "a Jinja cron template whose two cron lines are 960 bytes",
    "rouge/lexers/bsl.rb": "a lexer whose keyword patterns are lines of thousands of bytes",
}
#: caught by content, read by eye, and neither marked nor clearly a person's: keyword tables
#: that a script may have written
UNCLEAR = ("rouge/lexers/isbl/builtins.rb", "rouge/lexers/sqf/keywords.rb")


def _release_columns() -> list[tuple[str, str]]:
    """(reason, how it is found) for every way a release's file can be judged generated: a
    lockfile or build wrapper only by name, a marked file only by content."""
    by_name_only = (LOCKFILE, WRAPPER)
    return [
        (why, how)
        for why in REASONS
        for how in ("name", "content")
        if not (why in by_name_only and how == "content") and not (why == MARKED and how == "name")
    ]


def _releases_report(scan: dict[str, Any]) -> str:
    counts = scan["counts"]
    columns = _release_columns()
    header = " | ".join(f"{why} ({how})" for why, how in columns)
    cells = " | ".join(f"{counts.get(f'{why} ({how})', 0):,}" for why, how in columns)
    by_package = Counter(line.split(" ", 1)[0] for line in scan["by_content"])
    listed = ", ".join(f"{package} {n}" for package, n in by_package.most_common())
    return f"""
On real releases: the newest release of each of the {scan["packages"]} packages the code
benchmarks read ({counts["files"]:,} files, {counts["source files"]:,} of them source
files judged by content), each file judged as `rechunk sync` judges it:

| {header} |
|{"---|" * len(columns)}
| {cells} |

The files caught by their content, by package: {listed}. Each is listed in
`benchmarks/results/generated.json` and was read by eye when these results were written.
{_misjudged(scan["by_content"])}
"""


def _misjudged(by_content: list[str]) -> str:
    """What reading the files caught by content found: the ones a person wrote, and the
    ones whose origin is unclear."""
    person = [
        f"`{line.split(': ', 1)[1].split(' (')[0]}` ({what})"
        for line in by_content
        for end, what in WRITTEN_BY_A_PERSON.items()
        if line.split(" (")[0].endswith(end)
    ]
    unclear = [line for line in by_content if line.split(" (")[0].endswith(UNCLEAR)]
    rest = len(by_content) - len(person) - len(unclear)
    return (
        f"{rest} are a minified script or stylesheet or a generator's output. "
        f"{len(person)} are a person's files, left out by the minified rule (most of their "
        f"bytes on lines over 300 bytes): {'; '.join(person)}. {len(unclear)} are keyword "
        "tables with no generator's mark, which a script may or may not have written."
    )


def report(result: dict[str, Any]) -> str:
    lines = []
    for row in result["revisions"]:
        cells = [row["revision"], f"{row['lockfile_lines']:,}"]
        for mode in MODES:
            r = row[mode]
            cells.append(f"{r['tokens_embedded']:,} of {r['tokens_total']:,}")
        lines.append("| " + " | ".join(cells) + " |")
    first, *later = result["revisions"]
    share = 1 - first["default"]["tokens_total"] / first["--include-generated"]["tokens_total"]
    updates = "; ".join(
        f"{row['revision'].split(':')[0]}, {row['--include-generated']['tokens_embedded']:,} "
        f"tokens with it and {row['default']['tokens_embedded']:,} without"
        for row in later
    )
    return f"""## Generated files: a web app's npm lockfile (`benchmarks/generated.py`)

A small web app: a `package.json` (React, React Router, Vite, Vitest, ESLint, TypeScript)
and two source files of this project; npm {result["npm"]} writes `package-lock.json`
(`--package-lock-only`, versions published before {result["before"]}). Each revision is
synced on the default embedder with the lockfile left out (the default) and read
(`--include-generated`); tokens embedded of the tokens the repository holds.
{result["machine"]}, load average {result["load_average_1min"]:.2f}.

| revision | lockfile lines | default: tokens embedded | `--include-generated` |
|---|---|---|---|
{chr(10).join(lines)}

Read, the lockfile is {share:.1%} of the tokens the repository holds. The dependency
changes re-embedded ({updates}): npm keeps the file sorted and the structured policy
keeps the chunks of entries that did not change, so a patch bump costs little either way;
what leaving the lockfile out saves is the first sync, the major upgrades, and the
chunks of package names and hashes it would add to every search.
{_releases_report(result["releases"])}"""


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=" ".join((__doc__ or "").split("\n\n")[0].split()))
    what = parser.add_mutually_exclusive_group()
    what.add_argument(
        "--report", action="store_true", help="rewrite the docs section from the saved results"
    )
    what.add_argument(
        "--releases",
        action="store_true",
        help="judge the releases again (no npm, no sync); keep the saved revisions",
    )
    args = parser.parse_args()
    if args.report or args.releases:
        path = ROOT / "benchmarks" / "results" / "generated.json"
        saved = json.loads(path.read_text())
        if args.releases:
            saved["releases"] = releases()
            path.write_text(json.dumps(saved, indent=2) + "\n", encoding="utf-8")
        write_section("generated", report(saved))
    else:
        main()
