"""`rechunk sync` on a folder that mixes formats and code: every supported file is parsed
and synced in one command, each chunk cites where it lies, other types are counted, and an
edit re-embeds only what it touched. Files are written by real writers (python-docx,
reportlab) from the project's own guides; the store is embedded Qdrant, the model the
packaged MiniLM."""

from __future__ import annotations

import html
import json
import shutil
import warnings
from pathlib import Path
from typing import Any

import pytest
from cli_helpers import run_json
from qdrant_client import QdrantClient
from test_files import tree

from rechunk.cli import main
from rechunk.cli.reading import ReadOtherwiseWarning
from rechunk.sources.documents import OTHER_CODE_SUFFIXES, documents_from_file
from rechunk.sources.files import read_documents

pytest.importorskip("docx")
pytest.importorskip("reportlab")
pytest.importorskip("selectolax")

ROOT = Path(__file__).resolve().parent.parent
GUIDE = (ROOT / "examples" / "docs" / "sync-guide.md").read_text()
PARAGRAPHS = [p.strip() for p in GUIDE.split("\n\n") if p.strip() and not p.startswith(("#", "```", "-", "|", "1."))]
PAGE_TEMPLATE = """<!doctype html><html><head><title>Sync guide</title><style>p {{margin: 0}}</style></head>
<body><nav>Home | Shop | Help</nav><header>Acme docs</header>
<main><h1>How a sync publishes changes</h1>{body}</main>
<footer>Copyright Acme</footer><script>var x = 1;</script></body></html>"""

CODE = '"""Shopping carts and their ledgers."""\n\n' + "".join(
    f"""

class Cart{k}:
    \"\"\"Items of cart {k} and their prices, kept in the order they were added.\"\"\"

    def __init__(self) -> None:
        self.items: dict[str, float] = {{}}
        self.log: list[str] = []

    def add(self, name: str, price: float) -> None:
        \"\"\"Add one item; a second add of the same name replaces its price.\"\"\"
        self.items[name] = price
        self.log.append(f"add {{name}} at {{price:.2f}}")

    def total(self) -> float:
        \"\"\"The sum of every price in cart {k}.\"\"\"
        return sum(self.items.values())
"""
    for k in range(8)
)


def write_page(path: Path, paragraphs: list[str]) -> None:
    body = "".join(f"<p>{html.escape(p)}</p>" for p in paragraphs)
    path.write_text(PAGE_TEMPLATE.format(body=body))


def write_pdf(path: Path, paragraphs: list[str]) -> None:
    from reportlab.lib.pagesizes import A5
    from reportlab.lib.styles import getSampleStyleSheet
    from reportlab.platypus import Paragraph, SimpleDocTemplate

    def furniture(canvas: Any, doc: Any) -> None:
        canvas.saveState()
        canvas.setFont("Helvetica", 8)
        canvas.drawString(40, A5[1] - 30, "Acme manual - internal")
        canvas.drawString(A5[0] / 2, 20, str(doc.page))
        canvas.restoreState()

    styles = getSampleStyleSheet()
    story = [Paragraph(html.escape(p), styles["BodyText"]) for p in paragraphs]
    SimpleDocTemplate(str(path), pagesize=A5).build(
        story, onFirstPage=furniture, onLaterPages=furniture
    )


def write_docx(path: Path, paragraphs: list[str]) -> None:
    import docx

    document = docx.Document()
    document.add_heading("How a sync publishes changes", level=1)
    for p in paragraphs:
        document.add_paragraph(p)
    document.save(str(path))


@pytest.fixture
def kb(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "kb"
    folder.mkdir()
    write_page(folder / "page.html", PARAGRAPHS)
    write_pdf(folder / "manual.pdf", PARAGRAPHS * 2)
    write_docx(folder / "report.docx", PARAGRAPHS)
    (folder / "notes.md").write_text(GUIDE)
    (folder / "cart.py").write_text(CODE)
    (folder / "faq.jsonl").write_text(
        "\n".join(json.dumps({"id": f"q{i}", "question": f"Question {i}?", "answer": p})
                  for i, p in enumerate(PARAGRAPHS[:3])) + "\n"
    )
    (folder / "blob.bin").write_bytes(bytes(range(256)) * 4)
    (folder / "logo.PNG").write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(64))
    monkeypatch.chdir(tmp_path)
    return folder


def stored(tmp_path: Path) -> dict[str, list[dict[str, Any]]]:
    client = QdrantClient(path=str(tmp_path / ".rechunk" / "qdrant"))
    try:
        points, _ = client.scroll("rechunk", limit=10_000, with_payload=True)
    finally:
        client.close()
    out: dict[str, list[dict[str, Any]]] = {}
    for point in points:
        payload = dict(point.payload or {})  # the langchain layout: page_content, metadata
        meta = {**payload["metadata"], "text": payload["page_content"]}
        out.setdefault(meta["doc_id"], []).append(meta)
    return out


def test_a_mixed_folder_syncs_in_one_command(
    kb: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, report = run_json(capsys, "sync", "kb", "--id-field", "id")
    assert code == 0, report
    synced = {d["doc_id"] for d in report["per_document"]}
    assert synced == {"page.html", "manual.pdf", "report.docx", "notes.md", "cart.py",
                      "faq.jsonl#q0", "faq.jsonl#q1", "faq.jsonl#q2"}
    assert report["unsupported_files"] == {".bin": 1, ".png": 1}
    assert report["formats"] == {"code": 1, "docx": 1, "html": 1, "jsonl": 3, "markdown": 1,
                                 "pdf": 1}  # fmt: skip
    assert report["stale_check"] == "passed"
    assert len(report["policies"]) == 2  # prose, and the code policy of Python
    points = stored(kb.parent)
    page = " ".join(p["text"] for p in points["page.html"])
    for furniture in ("Home | Shop", "Acme docs", "Copyright Acme", "var x"):
        assert furniture not in page
    manual = " ".join(p["text"] for p in points["manual.pdf"])
    assert "Acme manual" not in manual and PARAGRAPHS[0][:60] in manual
    assert all(p["format"] == "pdf" and p["parser"].startswith("pdf/") for p in points["manual.pdf"])
    assert {p["pages"][0] for p in points["manual.pdf"]} >= {1, 2}
    assert all(p["section"] == ["How a sync publishes changes"] for p in points["report.docx"])
    symbols = {p.get("symbol") for p in points["cart.py"]}
    assert len(points["cart.py"]) > 1 and any(str(s).startswith("Cart") for s in symbols)
    assert all(p["language"] == "python" and len(p["lines"]) == 2 for p in points["cart.py"])
    assert all(p["record"] == "q1" for p in points["faq.jsonl#q1"])


def test_an_inserted_paragraph_re_embeds_only_around_it(
    kb: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run_json(capsys, "sync", "kb")[0] == 0
    edited = [*PARAGRAPHS[:3], "A paragraph inserted by a later revision of every file.",
              *PARAGRAPHS[3:]]
    write_page(kb / "page.html", edited)
    write_pdf(kb / "manual.pdf", edited * 2)
    write_docx(kb / "report.docx", edited)
    code, report = run_json(capsys, "sync", "kb")
    assert code == 0 and report["documents"]["changed"] == 3
    for doc in report["per_document"]:
        if doc["status"] == "changed":
            # the edit's own chunk and at most a neighbour or two: never the whole file
            assert doc["tokens_embedded"] <= 0.5 * doc["tokens_total"], doc


def test_format_forces_a_parser_and_unsupported_types_are_only_counted(kb: Path) -> None:
    files = read_documents([kb])
    assert files.unsupported == {".bin": 1, ".png": 1}
    (kb / "notes.log").write_text("A plain log line.\n")
    assert read_documents([kb], ["*.log"]).unsupported == {".log": 1}
    forced = read_documents([kb], ["*.log"], fmt="text")
    assert [d.doc_id for d in forced.documents] == ["notes.log"]


def test_a_file_that_cannot_be_parsed_is_skipped_with_one_line(
    kb: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (kb / "broken.pdf").write_bytes(b"%PDF-1.7 not really")
    (kb / "broken.docx").write_bytes(b"PK not a zip")
    code, report = run_json(capsys, "sync", "kb")
    assert code == 1  # synced what it could; the broken files are named
    reasons = {s["doc_id"]: s["reason"] for s in report["skipped_files"]}
    assert set(reasons) == {"broken.pdf", "broken.docx"}
    assert all("\n" not in r for r in reasons.values())
    assert report["documents"]["new"] == 8


CPP_HEADER = """// A shelf of jars, counted by label.
#pragma once

#include <map>
#include <string>

namespace pantry {

class Shelf {
 public:
  void add(const std::string& label, int jars) { counts_[label] += jars; }

  int count(const std::string& label) const {
    auto found = counts_.find(label);
    return found == counts_.end() ? 0 : found->second;
  }

 private:
  std::map<std::string, int> counts_;
};

}  // namespace pantry
"""
C_HEADER = """/* Readings of a thermometer, kept in a ring. */
#ifndef THERMO_H
#define THERMO_H

#include <stddef.h>

struct reading {
    long at;
    double kelvin;
};

size_t thermo_append(struct reading *ring, size_t size, struct reading r);

#endif
"""


def test_a_cpp_header_is_synced_as_cpp_and_a_c_header_as_c(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "inc"
    folder.mkdir()
    (folder / "shelf.h").write_text(CPP_HEADER)
    (folder / "thermo.h").write_text(C_HEADER)
    monkeypatch.chdir(tmp_path)
    code, report = run_json(capsys, "sync", "inc")
    assert code == 0, report
    assert sorted(p.split("-")[1] for p in report["policies"]) == ["c", "cpp"]
    points = stored(tmp_path)
    assert {p["language"] for p in points["shelf.h"]} == {"cpp"}
    assert {p["language"] for p in points["thermo.h"]} == {"c"}


COMPOSE = "".join(
    f"""  worker-{i}:
    image: shop/worker:1.{i}
    environment:
      QUEUE: carts-{i}
      BATCH: "{10 * i}"
    depends_on:
      - db
"""
    for i in range(30)
)
REPOSITORY_FILES = {
    "Dockerfile": "FROM python:3.11-slim\nWORKDIR /app\nCOPY . .\nCMD [\"shop\"]\n",
    "Makefile": "include config.mk\n\ntest:\n\tpython -m pytest\n",
    "compose.yaml": f"# The shop's services.\nservices:\n{COMPOSE}",
    "pyproject.toml": '[project]\nname = "shop"\n\n[tool.ruff]\nline-length = 100\n',
    "infra/main.tf": 'resource "aws_s3_bucket" "logs" {\n  bucket = "shop-logs"\n}\n',
    "web/site.css": ".cart {\n  margin: 0;\n}\n",
    "db/schema.sql": "CREATE TABLE carts (\n  id serial PRIMARY KEY\n);\n",
}


def test_a_repository_s_scripts_without_a_suffix_sync_as_code(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``bin/deploy`` and ``scripts/release`` are read by the language their first line
    names (before, each was counted as a type no parser reads), a Perl script by the
    recursive policy (no grammar), and a LICENSE is still not read."""
    from test_scripts import DEPLOY, RELEASE, REPORT

    repo = tree(tmp_path / "repo", {
        "bin/deploy": DEPLOY,
        "scripts/release": RELEASE,
        "tools/report": REPORT,
        "LICENSE": "Permission is granted to use this shop.\n",
    })  # fmt: skip
    monkeypatch.chdir(tmp_path)
    code, report = run_json(capsys, "sync", "repo")
    assert code == 0, report
    assert report["documents"]["new"] == 3
    assert report["unsupported_files"] == {"": 1}
    assert sorted(p.split("-")[1] for p in report["policies"] if p.startswith("code-")) == [
        "bash",
        "python",
    ]
    assert report["no_grammar"]["perl"]["files"] == 1
    points = stored(tmp_path)
    assert {p["language"] for p in points["bin/deploy"]} == {"bash"}
    (release,) = points["scripts/release"]  # one chunk: the script is short
    assert release["language"] == "python" and release["lines"] == [1, 17]
    assert points["tools/report"][0]["policy"].startswith("recursive-")
    (repo / "bin/deploy").write_text(DEPLOY.replace("staging", "preview"))
    code, report = run_json(capsys, "sync", "repo")
    assert code == 0 and report["documents"]["changed"] == 1, report


def sync_repository(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
    files: dict[str, str],
) -> tuple[Path, dict[str, Any]]:
    """``rechunk sync repo`` on a repository of ``files``, which must all sync (no type
    unsupported): the repository and the report."""
    repo = tree(tmp_path / "repo", files)
    monkeypatch.chdir(tmp_path)
    code, report = run_json(capsys, "sync", "repo")
    assert code == 0, report
    assert report["documents"]["new"] == len(files) and report["unsupported_files"] == {}
    return repo, report


@pytest.mark.parametrize("suffix", sorted(OTHER_CODE_SUFFIXES))
def test_every_source_type_without_a_grammar_is_read_as_code(tmp_path: Path, suffix: str) -> None:
    path = tmp_path / f"shop{suffix}"
    path.write_text("cart = new_cart()\nadd(cart, 'tea')\n")
    (doc,) = documents_from_file(path, path.name)
    assert doc.metadata == {"format": "code", "parser": "code/1",
                            "language": OTHER_CODE_SUFFIXES[suffix]}  # fmt: skip


def test_a_web_app_s_components_styles_and_schemas_sync_with_the_recursive_policy(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Vue components, SCSS, a GraphQL schema and a Gradle build (no grammar here) were
    types no parser reads; they are read as code, chunked by the recursive policy sized
    like the code policy, and counted under no grammar."""
    component = "<template>\n  <ul class=\"cart\">\n" + "".join(
        f'    <li>{{{{ items[{k}].name }}}}: {{{{ items[{k}].price }}}}</li>\n' for k in range(60)
    ) + "  </ul>\n</template>\n\n<script setup>\ndefineProps(['items'])\n</script>\n"
    files = {
        "web/Cart.vue": component,
        "web/cart.scss": ".cart {\n  li { margin: 0; }\n}\n",
        "api/schema.graphql": "type Cart {\n  id: ID!\n  items: [Item!]!\n}\n",
        "android/build.gradle": "plugins {\n  id 'com.android.application'\n}\n",
    }
    repo, report = sync_repository(tmp_path, monkeypatch, capsys, files)
    assert {k: v["files"] for k, v in report["no_grammar"].items()} == {
        "graphql": 1, "groovy": 1, "scss": 1, "vue": 1,
    }  # fmt: skip
    assert main(["sync", "repo", "--dry-run"]) == 0  # one row for them all
    (row,) = [line for line in capsys.readouterr().out.splitlines() if "no grammar" in line]
    assert row.split(None, 2)[2] == (
        "graphql 1, groovy 1, scss 1, vue 1 (chunked by the recursive policy)"
    )
    points = stored(tmp_path)
    cart = points["web/Cart.vue"]
    assert len(cart) > 1 and {p["policy"][:10] for p in cart} == {"recursive-"}
    (repo / "web/Cart.vue").write_text(component.replace("items[59].price", "items[59].cost"))
    code, report = run_json(capsys, "sync", "repo")
    assert code == 0, report
    (doc,) = [d for d in report["per_document"] if d["status"] == "changed"]
    assert 0 < doc["tokens_embedded"] < doc["tokens_total"], doc


def test_an_ansible_role_s_templates_and_settings_sync_with_the_recursive_policy(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Jinja templates, INI and .cfg settings, a .conf and a Spring .properties file were
    types no parser reads; they sync as code without a grammar, and an edit to one
    server block of a template re-embeds part of it, not the file."""
    servers = "".join(
        f"server {{\n    listen {8000 + k};\n    server_name shop{k}.{{{{ domain }}}};\n"
        f"    location / {{\n        proxy_pass http://{{{{ upstream_{k} }}}};\n"
        f"        proxy_read_timeout {{{{ timeout | default(30) }}}}s;\n    }}\n}}\n\n"
        for k in range(40)
    )
    files = {
        "roles/web/templates/nginx.conf.j2": "# {{ ansible_managed }}\n\n" + servers,
        "setup.cfg": "[metadata]\nname = shop\n\n[options]\npackages = find:\n",
        "tox.ini": "[tox]\nenv_list = py311\n\n[testenv]\ncommands = pytest\n",
        "etc/supervisord.conf": "[program:shop]\ncommand=/srv/shop/run\nautorestart=true\n",
        "src/main/resources/application.properties": "server.port=8080\nshop.currency=EUR\n",
    }
    repo, report = sync_repository(tmp_path, monkeypatch, capsys, files)
    assert {k: v["files"] for k, v in report["no_grammar"].items()} == {
        "conf": 1, "ini": 2, "jinja": 1, "properties": 1,
    }  # fmt: skip
    template = stored(tmp_path)["roles/web/templates/nginx.conf.j2"]
    assert len(template) > 1 and {p["language"] for p in template} == {"jinja"}
    edited = servers.replace("listen 8039;", "listen 9039;")
    (repo / "roles/web/templates/nginx.conf.j2").write_text("# {{ ansible_managed }}\n\n" + edited)
    code, report = run_json(capsys, "sync", "repo")
    assert code == 0, report
    (doc,) = [d for d in report["per_document"] if d["status"] == "changed"]
    assert 0 < doc["tokens_embedded"] < 0.5 * doc["tokens_total"], doc


def test_a_repository_s_config_and_build_files_sync_as_code(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Dockerfiles, Makefiles, YAML, TOML, Terraform and CSS are read by their
    grammars (before, each was an unsupported type), SQL by the recursive policy, and an
    edit of one YAML service re-embeds that service's chunk, not the file."""
    repo = tree(tmp_path / "repo", REPOSITORY_FILES)
    monkeypatch.chdir(tmp_path)
    code, report = run_json(capsys, "sync", "repo")
    assert code == 0, report
    assert report["unsupported_files"] == {}
    code_policies = [p for p in report["policies"] if p.startswith("code-")]
    languages = sorted(p.split("-")[1] for p in code_policies)
    assert languages == ["css", "dockerfile", "hcl", "make", "toml", "yaml"]
    points = stored(tmp_path)
    (schema,) = points["db/schema.sql"]
    assert schema["language"] == "sql" and schema["policy"].startswith("recursive-")
    assert report["no_grammar"]["sql"]["files"] == 1
    assert "no code grammar for 'sql'" in report["no_grammar"]["sql"]["reason"]
    assert {p["language"] for p in points["Dockerfile"]} == {"dockerfile"}
    assert {p["language"] for p in points["Makefile"]} == {"make"}
    compose = points["compose.yaml"]
    assert len(compose) > 1 and {p["format"] for p in compose} == {"code"}
    symbols = {p.get("symbol") for p in compose}
    assert all(str(s).startswith("services") for s in symbols) and len(symbols) > 1, symbols
    assert {p.get("symbol") for p in points["infra/main.tf"]} == {"resource.aws_s3_bucket.logs"}
    edited = COMPOSE.replace("QUEUE: carts-6", "QUEUE: carts-six")
    (repo / "compose.yaml").write_text(f"# The shop's services.\nservices:\n{edited}")
    code, report = run_json(capsys, "sync", "repo")
    assert code == 0 and report["documents"]["changed"] == 1
    (doc,) = [d for d in report["per_document"] if d["status"] == "changed"]
    assert doc["chunks"] >= 5 and 0 < doc["tokens_embedded"] <= 0.3 * doc["tokens_total"], doc


def test_query_says_where_each_hit_lies(kb: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The page, section, lines and symbol a parser recorded come back with each hit: in the
    JSON rows, and as a citation on the terminal."""
    assert run_json(capsys, "sync", "kb", "--id-field", "id")[0] == 0
    code, hits = run_json(capsys, "query", "items of a cart and their prices", "-k", "40")
    assert code == 0
    by_doc = {hit["doc_id"]: hit for hit in reversed(hits)}  # the best hit of each
    cart = by_doc["cart.py"]
    assert cart["lines"][0] <= cart["lines"][1] and cart["language"] == "python"
    assert by_doc["manual.pdf"]["pages"][0] >= 1
    assert by_doc["report.docx"]["section"] == ["How a sync publishes changes"]
    assert by_doc["faq.jsonl#q1"]["record"] == "q1"
    assert main(["query", "items of a cart and their prices", "-k", "40"]) == 0
    out = capsys.readouterr().out
    first, last = cart["lines"]
    assert f"cart.py, lines {first}-{last}" in out or f"cart.py, line {first}" in out
    assert "manual.pdf, p. 1 [" in out and "faq.jsonl#q1, line 2, record q1 [" in out
    assert "notes.md, How a sync publishes changes > " in out  # the heading path


@pytest.mark.parametrize("store", ["qdrant:store", "chroma:store"])
def test_a_record_removed_from_a_file_synced_again_is_deleted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], store: str
) -> None:
    """The file was given whole, so a record gone from it is gone from the collection, as
    a watcher deletes it: without --prune, and without touching other documents."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "kb").mkdir()
    (tmp_path / "kb" / "note.md").write_text("# Note\n\nA note beside the records.\n")
    records = [
        {"id": "reset", "q": "How is a password reset?", "a": "With the link on the login page."},
        {"id": "close", "q": "How is an account closed?", "a": "Support closes it within a week."},
        {"id": "refund", "q": "Are refunds given?", "a": "Within fourteen days of a purchase."},
    ]
    faq = tmp_path / "kb" / "faq.jsonl"
    faq.write_text("".join(json.dumps(r) + "\n" for r in records))
    elsewhere = tmp_path / "other.md"
    elsewhere.write_text("# Other\n\nA file synced on its own.\n")
    # a file whose name looks like a record of faq.jsonl: a document of its own
    lookalike = tmp_path / "kb" / "faq.jsonl#notes.md"
    lookalike.write_text("# Notes\n\nNot a record of the FAQ.\n")
    args = ["--store", store, "--id-field", "id"]
    assert main(["sync", "kb", *args]) == 0
    assert main(["sync", str(elsewhere), *args]) == 0
    faq.write_text("".join(json.dumps(r) + "\n" for r in records[1:]))
    capsys.readouterr()
    # the FAQ alone, then the folder with the look-alike unreadable: it stays both times
    code, report = run_json(capsys, "sync", str(faq), *args, "--dry-run")
    deleted = [d["doc_id"] for d in report["per_document"] if d["status"] == "deleted"]
    assert code == 0 and deleted == ["faq.jsonl#reset"]
    lookalike.write_bytes(b"caf\xe9 not UTF-8\n")
    code, report = run_json(capsys, "sync", "kb", *args, "--dry-run")
    deleted = [d["doc_id"] for d in report["per_document"] if d["status"] == "deleted"]
    assert code == 1 and deleted == ["faq.jsonl#reset"]
    lookalike.write_text("# Notes\n\nNot a record of the FAQ.\n")
    code, report = run_json(capsys, "sync", "kb", *args, "--dry-run")
    assert code == 0 and report["documents"]["deleted"] == 1
    code, report = run_json(capsys, "sync", "kb", *args)
    assert code == 0 and report["documents"]["deleted"] == 1
    assert [d["doc_id"] for d in report["per_document"] if d["status"] == "deleted"] == [
        "faq.jsonl#reset"
    ]
    assert main(["status", *args[:2]]) == 0
    held = capsys.readouterr().out
    assert "faq.jsonl#reset" not in held and "faq.jsonl#close" in held
    assert "other.md" in held and "note.md" in held  # not given, not a record: kept
    # a reindex reads the folder: a record removed since is not "missing" from it
    faq.write_text(json.dumps(records[2]) + "\n")
    assert main(["reindex", "--policy", "recursive", *args, "--json"]) == 0
    capsys.readouterr()
    if store.startswith("qdrant"):  # its alias follows the new generation (Chroma has none)
        assert main(["status", *args[:2]]) == 0
        held = capsys.readouterr().out
        assert "faq.jsonl#close" not in held and "faq.jsonl#refund" in held


def test_a_pasted_picture_is_named_in_the_summary_and_the_json(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import base64

    monkeypatch.chdir(tmp_path)
    (tmp_path / "kb").mkdir()
    picture = base64.b64encode(bytes(range(256)) * 24).decode()
    (tmp_path / "kb" / "flow.md").write_text(f"# Flow\n\n![f](data:image/png;base64,{picture})\n")
    code, report = run_json(capsys, "sync", "kb", "--dry-run")
    assert code == 0 and report["inline_data"] == [{"doc_id": "flow.md", "bytes": len(picture)}]
    assert main(["sync", "kb", "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "inline data   flow.md: 8 KB of base64 data: URIs, embedded as text" in out


DIV_PAGE = """<!doctype html><html><head><title>{title}</title></head><body>
<div class="navbar"><ul><li>Home</li><li>Handbook</li><li>{extra}</li></ul></div>
<div class="breadcrumbs">Home / Handbook / {title}</div>
<div class="doc-body"><h1>{title}</h1><p>{text}</p></div>
<div id="footer">Exported by the docs bot.</div>
</body></html>"""


def test_a_site_template_of_plain_divs_is_left_out_by_selectors(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A template built from divs is no nav, header or footer: every page's first chunk was
    its menu, and only the Python loaders took selectors. --html-exclude drops them, a
    menu change then costs nothing, and reindex reads the pages with the same selectors."""
    pytest.importorskip("selectolax")
    site = tmp_path / "site"
    site.mkdir()
    monkeypatch.chdir(tmp_path)

    def write(extra: str) -> None:
        for i, text in enumerate(PARAGRAPHS[:3]):
            page = DIV_PAGE.format(title=f"Page {i}", extra=extra, text=text)
            (site / f"page{i}.html").write_text(page)

    write("Teams")
    selectors = ["--html-exclude", "div.navbar", "--html-exclude", ".breadcrumbs, #footer"]
    code, first = run_json(capsys, "sync", "site", *selectors)
    assert code == 0 and first["documents"]["new"] == 3, first
    text = " ".join(p["text"] for points in stored(tmp_path).values() for p in points)
    for furniture in ("Handbook", "Home /", "docs bot"):
        assert furniture not in text
    assert PARAGRAPHS[0][:60] in text
    write("Teams, Holidays")  # the template's menu changes on every page
    code, second = run_json(capsys, "sync", "site", *selectors)
    assert code == 0 and second["documents"]["unchanged"] == 3 and second["tokens_embedded"] == 0
    # a later command line without the selectors reads the menus again: it says so
    with pytest.warns(ReadOtherwiseWarning) as said:
        code, again = run_json(capsys, "sync", "site", "--dry-run")
    assert code == 0 and again["documents"]["changed"] == 3
    assert str(said[0].message).startswith(
        f"{site} was synced with --html-exclude div.navbar --html-exclude '.breadcrumbs, "
        "#footer' and is read now without --html-exclude: its documents are read anew"
    )
    with warnings.catch_warnings():  # the same selectors in another order read the same
        warnings.simplefilter("error", ReadOtherwiseWarning)
        code, again = run_json(capsys, "sync", "site", "--dry-run", *selectors[2:], *selectors[:2])
        assert code == 0 and again["documents"]["unchanged"] == 3
        # UTF-8 is read first anyway: naming it reads the same
        code, again = run_json(capsys, "sync", "site", "--dry-run", *selectors, "--encoding", "utf8")
        assert code == 0 and again["documents"]["unchanged"] == 3
    # one page of the folder, named alone without the selectors, is read otherwise too
    with pytest.warns(ReadOtherwiseWarning, match=f"{site} was synced with --html-exclude"):
        code, one = run_json(capsys, "sync", "site/page0.html", "--dry-run")
    assert code == 0 and one["documents"]["changed"] == 1
    code, rebuilt = run_json(capsys, "reindex", "--policy", "recursive")
    assert code == 0 and rebuilt["sync"]["documents"]["synced"] == 3, rebuilt
    # given without PATH, options that read the same are taken, as the warning takes them
    code, _ = run_json(
        capsys, "reindex", "--policy", "recursive", *selectors[2:], *selectors[:2],
        "--encoding", "utf8",
    )
    assert code == 0
    text = " ".join(p["text"] for points in stored(tmp_path).values() for p in points)
    assert "Handbook" not in text
    # a page the selectors to read find nothing in is skipped; a refused reindex says so,
    # as its error is all it prints
    (site / "page1.html").write_text("<html><body><p>No body div.</p></body></html>")
    assert main(["reindex", "site", "--html-include", "div.doc-body", "--policy", "fixed"]) == 2
    said = capsys.readouterr().err
    assert "page1.html was read and skipped: no element matches the selectors" in said, said
    # a selector that is not CSS is refused before anything is read or written
    shutil.rmtree(".rechunk")
    assert main(["sync", "site", "--html-include", "div["]) == 2
    assert "--html-include selector 'div[' is not a CSS selector" in capsys.readouterr().err
    assert not Path(".rechunk").exists()
