"""A static site a documentation generator built, synced as a folder: only its pages are
documents; its machinery (theme CSS and JavaScript, search indexes, Sphinx's ``_sources/``
copies) and its pages with no content (search, genindex, py-modindex, 404) are counted as
generated, by reason, and ``--include-generated`` reads them. A folder without the
generator's markers is read as before. Office's owner files (``~$memo.docx``) are left
out too.

The sites are built for real, by MkDocs and Sphinx, when this Python can import them
(MkDocs is a dev dependency of rechunk; Sphinx may be absent). When a generator is absent,
:func:`mkdocs_site` / :func:`sphinx_site` write by hand the layout it writes: its markers
(Sphinx's ``.buildinfo``; MkDocs' ``search/search_index.json``), its theme's files, its search index and utility pages,
with the contents those generators give them.
"""

from __future__ import annotations

import gzip
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import zlib
from collections.abc import Collection
from pathlib import Path

import pytest
from cli_helpers import run_json

from rechunk.cli import main
from rechunk.sources import files
from rechunk.sources.files import FileSet, read_documents
from rechunk.sources.generated import (
    MKDOCS,
    OWNER,
    SITE_ASSET,
    SITE_PAGE,
    SPHINX,
    built_site,
    generated_by_name,
)

PAGES = {
    "guide": "# Guide\n\n## Backups\n\nThe backup job snapshots the ledger every night and "
    "keeps thirty copies.\n",
    "faq": "# FAQ\n\n## Restores\n\nA restore takes the newest snapshot.\n",
}
#: the content pages of each site, as their doc_ids
MKDOCS_PAGES = {"index.html", "guide/index.html", "faq/index.html"}
SPHINX_PAGES = {"index.html", "guide.html", "faq.html"}


def _html(title: str, body: str) -> str:
    return (
        f"<!doctype html><html><head><title>{title}</title>"
        '<link rel="stylesheet" href="_static/basic.css"></head><body>'
        f"<nav>Home Guide FAQ</nav><main><h1>{title}</h1><p>{body}</p></main>"
        "<footer>Built with a generator</footer></body></html>\n"
    )


def mkdocs_site(tmp_path: Path) -> Path:
    """A site MkDocs built (its default theme and search plugin), by hand if MkDocs is
    not importable here."""
    src = tmp_path / "mk"
    (src / "docs").mkdir(parents=True)
    (src / "docs" / "index.md").write_text("# Home\n\nWelcome to the handbook.\n")
    for name, text in PAGES.items():
        (src / "docs" / f"{name}.md").write_text(text)
    (src / "mkdocs.yml").write_text("site_name: Handbook\n")
    site = tmp_path / "mk-site"
    if importlib.util.find_spec("mkdocs") is not None:
        subprocess.run(
            [sys.executable, "-m", "mkdocs", "build", "-q", "-f", str(src / "mkdocs.yml"),
             "-d", str(site)],
            check=True, capture_output=True,
        )  # fmt: skip
        return site
    # what MkDocs 1.6 writes with its default theme
    (site / "search").mkdir(parents=True)
    index = {"config": {"lang": ["en"], "separator": "[\\s\\-]+"}, "docs": []}
    (site / "index.html").write_text(_html("Home", "Welcome to the handbook."))
    for name, text in PAGES.items():
        (site / name).mkdir()
        (site / name / "index.html").write_text(_html(name.title(), text))
        index["docs"].append({"location": f"{name}/", "title": name, "text": text})  # type: ignore[attr-defined]
    (site / "404.html").write_text(_html("Handbook", "404 Page not found"))
    (site / "search" / "search_index.json").write_text(json.dumps(index))
    (site / "search" / "main.js").write_text("function getSearchTermFromLocation() {\n}\n")
    (site / "search" / "worker.js").write_text("var base_path = 'function';\n")
    (site / "css").mkdir()
    (site / "css" / "base.css").write_text("body {\n  padding-top: 70px;\n}\n")
    (site / "js").mkdir()
    (site / "js" / "base.js").write_text("function getSearchTerm() {\n  return 1;\n}\n")
    sitemap = '<?xml version="1.0" encoding="UTF-8"?>\n<urlset></urlset>\n'
    (site / "sitemap.xml").write_text(sitemap)
    (site / "sitemap.xml.gz").write_bytes(gzip.compress(sitemap.encode()))
    return site


def sphinx_site(tmp_path: Path) -> Path:
    """A site Sphinx's HTML builder built (its default theme, a module documented so that
    it writes a module index), by hand if Sphinx is not importable here."""
    src = tmp_path / "sx"
    src.mkdir()
    (src / "conf.py").write_text("project = 'Handbook'\n")
    (src / "index.rst").write_text(
        "Home\n====\n\nWelcome to the handbook.\n\n.. toctree::\n\n   guide\n   faq\n\n"
        ".. py:module:: ledger\n"
    )
    for name, text in PAGES.items():
        title, _, rest = text.partition("\n")
        title = title.lstrip("# ")
        (src / f"{name}.rst").write_text(f"{title}\n{'=' * len(title)}\n{rest}")
    site = tmp_path / "sx-site"
    if importlib.util.find_spec("sphinx") is not None:
        subprocess.run(
            [sys.executable, "-m", "sphinx", "-q", "-b", "html", "-d",
             str(tmp_path / "doctrees"), str(src), str(site)],
            check=True, capture_output=True,
        )  # fmt: skip
        return site
    # what Sphinx 8's html builder writes (alabaster theme)
    (site / "_static").mkdir(parents=True)
    (site / "_sources").mkdir()
    (site / ".buildinfo").write_text(
        "# Sphinx build info version 1\n# This file records the configuration used when "
        "building these files. When it is not found, a full rebuild will be done.\n"
        "config: f70ea93fa72fac11bdd24135b95d6146\ntags: 645f666f9bcd5a90fca523b33c5a78b7\n"
    )
    (site / "index.html").write_text(_html("Home", "Welcome to the handbook."))
    (site / "_sources" / "index.rst.txt").write_text((src / "index.rst").read_text())
    for name in PAGES:
        text = (src / f"{name}.rst").read_text()
        (site / f"{name}.html").write_text(_html(name.title(), text))
        (site / "_sources" / f"{name}.rst.txt").write_text(text)
    for name, title in (("genindex", "Index"), ("search", "Search"), ("py-modindex", "Python "
                        "Module Index")):  # fmt: skip
        (site / f"{name}.html").write_text(_html(title, f"{title} ledger"))
    (site / "_static" / "pygments.css").write_text(".highlight .hll {\n  color: #000;\n}\n")
    (site / "_static" / "basic.css").write_text("div.section {\n  margin: 0;\n}\n")
    (site / "_static" / "doctools.js").write_text("const Documentation = {\n  init: 1,\n};\n")
    (site / "_static" / "documentation_options.js").write_text("const OPTIONS = {};\n")
    (site / "searchindex.js").write_text('Search.setIndex({"docnames": ["faq", "guide"]})\n')
    (site / "objects.inv").write_bytes(
        b"# Sphinx inventory version 2\n# Project: Handbook\n" + zlib.compress(b"ledger py:module")
    )
    return site


def files_under(site: Path) -> set[str]:
    """The relative paths of the files under ``site`` a sync meets (not hidden ones)."""
    return {
        p.relative_to(site).as_posix()
        for p in site.rglob("*")
        if p.is_file() and not any(part.startswith(".") for part in p.relative_to(site).parts)
    }


def summary_row(out: str, name: str) -> str:
    return next(line for line in out.splitlines() if line.strip().startswith(name))


@pytest.fixture
def workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_an_mkdocs_site_is_read_as_its_pages(
    workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    site = mkdocs_site(workdir)
    assert built_site(site) == MKDOCS
    code, report = run_json(capsys, "sync", site.name, "--dry-run")
    assert code == 0, report
    assert {d["doc_id"] for d in report["per_document"]} == MKDOCS_PAGES
    reasons = {g["doc_id"]: g["reason"] for g in report["generated_files"]}
    # everything else MkDocs wrote is counted, by reason: the search index (the whole site
    # again), its theme's CSS and JavaScript, the sitemaps, and the 404 page
    assert set(reasons) == files_under(site) - MKDOCS_PAGES
    assert reasons["search/search_index.json"] == SITE_ASSET
    assert reasons["sitemap.xml"] == reasons["sitemap.xml.gz"] == SITE_ASSET
    assert any(d.endswith(".css") for d in reasons) and any(d.endswith(".js") for d in reasons)
    assert reasons["404.html"] == SITE_PAGE
    assert report["unsupported_files"] == {} and report["skipped_files"] == []
    # the person's summary counts them by reason
    assert main(["sync", site.name, "--dry-run"]) == 0
    row = summary_row(capsys.readouterr().out, "generated")
    assert f"{SITE_ASSET} {len(reasons) - 1}, {SITE_PAGE} 1" in row
    assert "--include-generated" in row


def test_a_sphinx_site_is_read_as_its_pages(
    workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    site = sphinx_site(workdir)
    assert built_site(site) == SPHINX
    code, report = run_json(capsys, "sync", site.name, "--dry-run")
    assert code == 0, report
    assert {d["doc_id"] for d in report["per_document"]} == SPHINX_PAGES
    reasons = {g["doc_id"]: g["reason"] for g in report["generated_files"]}
    assert set(reasons) == files_under(site) - SPHINX_PAGES
    # the copies of the sources would answer every query a second time
    sources = {d for d in reasons if d.startswith("_sources/")}
    assert len(sources) == 3 and {reasons[d] for d in sources} == {SITE_ASSET}
    assert reasons["_static/basic.css"] == reasons["_static/doctools.js"] == SITE_ASSET
    assert reasons["searchindex.js"] == reasons["objects.inv"] == SITE_ASSET
    for page in ("genindex.html", "search.html", "py-modindex.html"):
        assert reasons[page] == SITE_PAGE, page
    assert report["unsupported_files"] == {} and report["skipped_files"] == []
    assert ".buildinfo" in report["hidden"]


def test_include_generated_reads_a_site_s_machinery(
    workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    mkdocs_site(workdir / "sites")
    sphinx_site(workdir / "sites")
    code, report = run_json(capsys, "sync", "sites", "--dry-run")
    assert code == 0, report
    left_out = {g["doc_id"] for g in report["generated_files"] if g["reason"] == SITE_ASSET}
    assert "mk-site/search/search_index.json" in left_out
    assert "sx-site/_sources/guide.rst.txt" in left_out
    code, report = run_json(capsys, "sync", "sites", "--include-generated", "--dry-run")
    assert code == 0 and report["generated_files"] == [], report
    read = {d["doc_id"].split("#")[0] for d in report["per_document"]}
    # the Markdown the sites were built from is read too, the same folder
    read = {d for d in read if d.startswith(("mk-site/", "sx-site/"))}
    assert {"mk-site/404.html", "mk-site/search/search_index.json", "sx-site/search.html",
            "sx-site/genindex.html", "sx-site/_sources/guide.rst.txt"} <= read  # fmt: skip
    assert any(d.startswith("sx-site/_static/") and d.endswith(".css") for d in read)
    assert any(d.startswith("mk-site/") and d.endswith(".js") for d in read)


def test_only_the_generators_markers_make_a_built_site(tmp_path: Path) -> None:
    """A folder of documents with a ``_static/`` or ``search/`` folder, a ``404.html``, a
    ``genindex.html`` and a ``sitemap.xml`` of its own is read as it always was; the same
    folder with a generator's markers is a built site."""
    docs = tmp_path / "docs"
    (docs / "_static").mkdir(parents=True)
    (docs / "search").mkdir()
    (docs / "_sources").mkdir()
    (docs / "guide.html").write_text(_html("Guide", PAGES["guide"]))
    (docs / "genindex.html").write_text(_html("Genes", "An index of the genes we study."))
    (docs / "404.html").write_text(_html("Not found", "Our error page, as we wrote it."))
    (docs / "_static" / "site.css").write_text("body {\n  margin: 0;\n}\n")
    (docs / "_sources" / "notes.txt").write_text("Notes we keep as text.\n")
    (docs / "search" / "search_index.json").write_text('{"docs": [{"text": "our own"}]}')
    (docs / "search" / "tips.md").write_text("# Search tips\n\nQuote a phrase.\n")
    (docs / "sitemap.xml").write_text("<urlset></urlset>\n")
    (docs / ".buildinfo").write_text("built by our own script\n")
    everything = {p for p in files_under(docs) if p != "sitemap.xml"}  # no parser reads XML

    def read() -> set[str]:
        files = read_documents([docs])
        assert files.skipped == [], files.skipped
        return {d.doc_id.split("#")[0] for d in files.documents}

    assert built_site(docs) is None
    plain = read_documents([docs])
    assert plain.generated == [] and plain.unsupported == {".xml": 1}
    assert read() == everything
    # Sphinx's own .buildinfo makes it a Sphinx site ...
    (docs / ".buildinfo").write_text("# Sphinx build info version 1\nconfig: 0\ntags: 0\n")
    assert built_site(docs) == SPHINX
    assert read() == {"guide.html", "404.html"}
    (docs / ".buildinfo").unlink()
    assert read() == everything
    # a sitemap beside its gzipped copy is no marker: a hand-kept site, or a deploy that
    # gzips its files for the web server, has them too (a reviewer found its Markdown
    # and text left out as site assets)
    (docs / "sitemap.xml.gz").write_bytes(gzip.compress(b"<urlset></urlset>\n"))
    assert built_site(docs) is None
    assert read() == everything
    (docs / "sitemap.xml.gz").unlink()
    # MkDocs' search index makes it an MkDocs site
    (docs / "search" / "search_index.json").write_text('{"config": {"lang": ["en"]}, "docs": []}')
    assert built_site(docs) == MKDOCS
    assert read() == {"guide.html", "genindex.html"}


def test_a_site_s_files_named_directly_are_judged_by_their_site(
    workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A file or folder of a built site given as a path (as a watcher reads each changed
    file) is judged by the site that holds it."""
    site = sphinx_site(workdir)
    css = next((site / "_static").glob("*.css")).relative_to(workdir).as_posix()
    files = read_documents([css, "sx-site/_sources", "sx-site/search.html", "sx-site/guide.html"])
    assert {d.doc_id for d in files.documents} == {"guide.html"}
    assert dict(files.generated)["search.html"] == SITE_PAGE
    assert {why for _, why in files.generated} == {SITE_ASSET, SITE_PAGE}
    assert len(files.generated) == 2 + len(list((site / "_sources").iterdir()))
    everything = read_documents([css, "sx-site/search.html"], include_generated=True)
    assert len(everything.documents) >= 2 and everything.generated == []


def _outcome(found: FileSet) -> dict[str, object]:
    """What a reading gave, in a form two readings can be compared by."""
    return {
        "documents": sorted((d.doc_id, d.text) for d in found.documents),
        "generated": sorted(found.generated),
        "skipped": sorted(found.skipped),
        "unsupported": dict(found.unsupported),
        "binary": sorted(found.binary),
        "empty": sorted(found.empty),
        "hidden": sorted(found.hidden),
    }


def test_include_generated_asks_no_folder_and_a_walk_shares_its_answers(
    workdir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With ``include_generated`` no folder is asked whether a site is built there (before:
    the walk asked every folder, and its answer was never used); without it, no folder is
    asked twice in one reading (before: a file named beside its folder asked the site's
    folders again). What is read is the same: only the pages of each site without
    ``include_generated``, everything with it."""
    mkdocs_site(workdir / "sites")
    sphinx_site(workdir / "sites")
    sites = workdir / "sites"
    asked: list[Path] = []
    real_built_site = files.built_site

    def counted(folder: Path, names: Collection[str] | None = None) -> str | None:
        asked.append(folder.resolve())
        return real_built_site(folder, names)

    monkeypatch.setattr(files, "built_site", counted)
    # without include_generated: the pages are read, the machinery counted by reason
    pages = {f"mk-site/{p}" for p in MKDOCS_PAGES} | {f"sx-site/{p}" for p in SPHINX_PAGES}
    machinery = {f"{name}/{p}" for name in ("mk-site", "sx-site")
                 for p in files_under(sites / name)} - pages  # fmt: skip
    without = read_documents([sites])
    read = {d.doc_id.split("#")[0] for d in without.documents}
    assert {d for d in read if d.startswith(("mk-site/", "sx-site/"))} == pages
    assert dict(without.generated).keys() == machinery
    assert set(dict(without.generated).values()) == {SITE_ASSET, SITE_PAGE}
    assert asked and len(asked) == len(set(asked)), asked
    # with it: nothing asked, nothing left out, and every file left out above is read
    # (or counted as any file of its type is)
    asked.clear()
    everything = read_documents([sites], include_generated=True)
    assert asked == []
    assert everything.generated == [] and everything.skipped == without.skipped
    read_all = {d.doc_id.split("#")[0] for d in everything.documents}
    assert read <= read_all
    for doc_id in machinery - read_all:  # an inventory, a gzipped sitemap: no parser reads
        assert Path(doc_id).suffix.lower() in everything.unsupported, doc_id
    assert _outcome(everything) == _outcome(read_documents([sites], include_generated=True))
    # a file and a folder of a site named beside the site: each folder asked once, the
    # outcome that of reading each alone
    named = [sites / "sx-site", sites / "sx-site" / "guide.html", sites / "sx-site" / "_static",
             sites / "mk-site" / "css", sites / "mk-site" / "search" / "search_index.json"]  # fmt: skip
    asked.clear()
    together = read_documents(named)
    assert len(asked) == len(set(asked)), asked
    assert {d.doc_id for d in together.documents} == SPHINX_PAGES
    css = {path.name: SITE_ASSET for path in (sites / "mk-site" / "css").iterdir()}
    sphinx = {d.removeprefix("sx-site/"): why for d, why in without.generated
              if d.startswith("sx-site/")}  # fmt: skip
    assert dict(together.generated) == {**sphinx, **css, "search_index.json": SITE_ASSET}
    assert len(together.generated) == len(sphinx) + len(css) + 1
    monkeypatch.undo()
    assert _outcome(together) == _outcome(read_documents(named))


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs on this system")
def test_a_fifo_where_a_site_s_marker_would_be_is_not_waited_on(tmp_path: Path) -> None:
    """A FIFO named ``.buildinfo`` or ``search/search_index.json`` is no marker, and is
    not opened (before: the walk, and for ``search_index.json`` a file named directly too,
    opened it to read its first bytes and waited for a writer for ever). A marker that
    cannot be read (a folder, a dangling link) is no marker, and no error, as before."""
    site = tmp_path / "site"
    (site / "search").mkdir(parents=True)
    (site / "index.html").write_text(_html("Home", "Welcome to the handbook."))
    os.mkfifo(site / ".buildinfo")
    os.mkfifo(site / "search" / "search_index.json")
    other = tmp_path / "other"
    (other / ".buildinfo").mkdir(parents=True)
    (other / "search").mkdir()
    (other / "search" / "search_index.json").symlink_to(other / "nowhere.json")
    (other / "index.html").write_text(_html("Other", "Another handbook."))
    script = (
        "import json, sys\n"
        "from pathlib import Path\n"
        "from rechunk.sources.files import read_documents\n"
        "from rechunk.sources.generated import built_site\n"
        "out = {}\n"
        "for name in ('site', 'other'):\n"
        "    folder = Path(sys.argv[1]) / name\n"
        "    walked = read_documents([folder])\n"
        "    named = read_documents([folder / 'index.html'])\n"
        "    out[name] = [built_site(folder), [d.doc_id for d in walked.documents],\n"
        "                 walked.generated, [d.doc_id for d in named.documents]]\n"
        "print(json.dumps(out))\n"
    )
    try:
        done = subprocess.run([sys.executable, "-c", script, str(tmp_path)], capture_output=True,
                              text=True, timeout=60, check=True)  # fmt: skip
    except subprocess.TimeoutExpired:
        pytest.fail("reading a folder with a FIFO for a marker waited on the FIFO")
    out = json.loads(done.stdout)
    for name in ("site", "other"):
        assert out[name] == [None, ["index.html"], [], ["index.html"]], out


def test_office_owner_files_are_left_out_and_the_run_succeeds(
    workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Word writes ``~$memo 1.docx`` (162 bytes: the name of who has ``memo 1.docx``
    open) beside the document while it is open; read as a DOCX it is corrupt."""
    share = workdir / "share"
    share.mkdir()
    (share / "a.md").write_text("# Minutes\n\nThe board met on Monday.\n")
    owner = b"\x05alice" + bytes(157)
    for name in ("~$memo 1.docx", "~$budget.xlsx", "~$deck.pptx"):
        (share / name).write_bytes(owner)
    assert generated_by_name("share/~$memo 1.docx") == OWNER
    code, report = run_json(capsys, "sync", "share", "--dry-run")
    assert code == 0, report
    assert report["skipped_files"] == []
    assert {d["doc_id"] for d in report["per_document"]} == {"a.md"}
    assert {g["doc_id"]: g["reason"] for g in report["generated_files"]} == {
        "~$memo 1.docx": OWNER,
        "~$budget.xlsx": OWNER,
        "~$deck.pptx": OWNER,
    }
    assert main(["sync", "share"]) == 0
    assert f"{OWNER} 3" in summary_row(capsys.readouterr().out, "generated")
    # named directly (as a watcher reads a file that appeared), it is left out too
    files = read_documents([share / "~$memo 1.docx"], within=[share])
    assert files.documents == [] and files.skipped == []
    assert files.generated == [("~$memo 1.docx", OWNER)]


def test_a_copied_site_without_its_markers_is_read_whole(
    workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The built site's own files, markers removed: every file is read again, as before."""
    site = mkdocs_site(workdir)
    code, report = run_json(capsys, "sync", site.name, "--dry-run")
    assert code == 0 and {g["reason"] for g in report["generated_files"]} == {SITE_ASSET, SITE_PAGE}
    bare = Path(shutil.copytree(site, workdir / "bare"))
    (bare / "search" / "search_index.json").unlink()
    code, report = run_json(capsys, "sync", "bare", "--dry-run")
    assert code == 0, report
    read = {d["doc_id"].split("#")[0] for d in report["per_document"]}
    assert {"404.html", *MKDOCS_PAGES} <= read
    assert any(d.endswith(".js") for d in read)
    assert all(g["reason"] not in (SITE_ASSET, SITE_PAGE) for g in report["generated_files"])
