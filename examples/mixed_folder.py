"""A knowledge base as it really is: one `rechunk sync` over pages, PDFs, Office files,
a notebook, an e-mail, records, code and its build files, then an edit of each kind,
synced again.

Every file is written here by the tool a real knowledge base gets it from (reportlab for
the PDF, python-docx, python-pptx, openpyxl, the standard library's e-mail and JSON
writers) from the project's own guides (examples/docs) and code (examples/code), in a
scratch folder, and synced with the embedded defaults. The page carries a site's menus
and the PDF running headers and page numbers, which never reach a chunk.
"""

from __future__ import annotations

import html
import json
import shutil
import tempfile
from email.message import EmailMessage
from pathlib import Path

from demo import run  # the demo's runner: `$ rechunk ...`, then its output

HERE = Path(__file__).resolve().parent
GUIDE = (HERE / "docs" / "sync-guide.md").read_text()
INSERTED = (
    "A sync that finds nothing to do loads no model: it reads the stored points, sees "
    "that every input key is already there, and stops before the embedder is opened."
)


def sections(markdown: str) -> list[tuple[str, list[str]]]:
    """The guide as (heading, paragraphs): code blocks and lists left out."""
    out: list[tuple[str, list[str]]] = []
    for block in markdown.split("\n\n"):
        block = block.strip()
        if block.startswith("#"):
            out.append((block.lstrip("# ").split("\n")[0], []))
        elif out and block and not block.startswith(("```", "-", "|", "1.")):
            out[-1][1].append(" ".join(block.split()))
    return out


def write_page(path: Path, parts: list[tuple[str, list[str]]]) -> None:
    body = "".join(
        f"<h2>{html.escape(title)}</h2>" + "".join(f"<p>{html.escape(p)}</p>" for p in paras)
        for title, paras in parts
    )
    path.write_text(
        "<!doctype html><html><head><title>Sync guide</title></head><body>"
        "<nav><a href='/'>Home</a> | <a href='/docs'>Docs</a> | <a href='/blog'>Blog</a></nav>"
        f"<main><article><h1>How a sync publishes changes</h1>{body}</article></main>"
        "<footer>Example Docs - all rights reserved</footer></body></html>"
    )


def write_pdf(path: Path, parts: list[tuple[str, list[str]]]) -> None:
    from reportlab.lib.pagesizes import A5
    from reportlab.lib.styles import getSampleStyleSheet
    from reportlab.platypus import Paragraph, SimpleDocTemplate

    def furniture(canvas: object, doc: object) -> None:  # a running header, a page number
        canvas.saveState()  # type: ignore[attr-defined]
        canvas.setFont("Helvetica", 8)  # type: ignore[attr-defined]
        canvas.drawString(36, A5[1] - 24, "Sync guide - operations manual")  # type: ignore[attr-defined]
        canvas.drawString(A5[0] / 2, 18, str(doc.page))  # type: ignore[attr-defined]
        canvas.restoreState()  # type: ignore[attr-defined]

    styles = getSampleStyleSheet()
    story = []
    for title, paras in parts:
        story.append(Paragraph(html.escape(title), styles["Heading2"]))
        story.extend(Paragraph(html.escape(p), styles["BodyText"]) for p in paras)
    SimpleDocTemplate(str(path), pagesize=A5).build(
        story, onFirstPage=furniture, onLaterPages=furniture
    )


def write_docx(path: Path, parts: list[tuple[str, list[str]]]) -> None:
    import docx

    document = docx.Document()
    for title, paras in parts:
        document.add_heading(title, level=2)
        for p in paras:
            document.add_paragraph(p)
    document.save(str(path))


def write_others(folder: Path) -> None:
    import openpyxl
    import pptx

    deck = pptx.Presentation()
    for title, paras in sections((HERE / "docs" / "chunking-guide.md").read_text())[:4]:
        slide = deck.slides.add_slide(deck.slide_layouts[1])
        slide.shapes.title.text = title
        slide.placeholders[1].text_frame.text = paras[0] if paras else title
    deck.save(str(folder / "chunking-talk.pptx"))
    book = openpyxl.Workbook()
    sheet = book.active
    sheet.title = "Stores"
    sheet.append(["store", "kind", "aliases"])
    for row in (("qdrant:DIR", "embedded", "yes"), ("chroma:DIR", "embedded", "no"),
                ("qdrant+http://HOST:6333", "server", "yes")):
        sheet.append(row)
    book.save(str(folder / "stores.xlsx"))
    notebook = {
        "nbformat": 4, "nbformat_minor": 5,
        "metadata": {"kernelspec": {"language": "python", "name": "python3"}},
        "cells": [
            {"cell_type": "markdown", "metadata": {}, "source": ["# Measuring R_c\n", "\n",
                                                               "Chunk two revisions and compare."]},
            {"cell_type": "code", "metadata": {}, "execution_count": 1, "outputs": [],
             "source": ["import rechunk\n", "rechunk.recompute_fraction(old, new)"]},
        ],
    }
    (folder / "measure.ipynb").write_text(json.dumps(notebook, indent=1))
    mail = EmailMessage()
    mail["Subject"] = "Re-embedding after the model change"
    mail["From"] = "ops@example.org"
    mail["To"] = "team@example.org"
    mail["Date"] = "Fri, 04 Dec 2026 09:00:00 +0000"
    mail.set_content(
        "The reindex built the new generation overnight.\n\n"
        "Vectors were reused by input key; only the new model's inputs were embedded.\n"
    )
    (folder / "reindex.eml").write_bytes(bytes(mail))
    faq = [
        ("ids", "Why are point ids UUIDs?", "UUIDv5 of doc_id, input key and occurrence."),
        ("moves", "Does a moved chunk re-embed?", "No: it keeps its id, its payload changes."),
    ]
    (folder / "faq.jsonl").write_text(
        "".join(json.dumps({"id": i, "question": q, "answer": a}) + "\n" for i, q, a in faq)
    )
    (folder / "logo.png").write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(32))


def main() -> None:
    work = Path(tempfile.mkdtemp(prefix="rechunk-mixed-"))
    kb = work / "kb"
    try:
        kb.mkdir()
        parts = sections(GUIDE)
        for name in ("getting-started.md", "reuse-cache.md"):
            shutil.copy(HERE / "docs" / name, kb / name)
        shutil.copytree(HERE / "code", kb / "src")
        write_page(kb / "sync-guide.html", parts)
        write_pdf(kb / "sync-guide.pdf", parts)
        write_docx(kb / "sync-guide.docx", parts)
        write_others(kb)
        run("sync", "kb", "--id-field", "id", cwd=work)
        # one revision of each: a paragraph inserted in the page, the PDF and the DOCX,
        # and one method of the cart changed
        edited = [(t, [*ps[:1], INSERTED, *ps[1:]] if i == 1 else ps)
                  for i, (t, ps) in enumerate(parts)]
        write_page(kb / "sync-guide.html", edited)
        write_pdf(kb / "sync-guide.pdf", edited)
        write_docx(kb / "sync-guide.docx", edited)
        cart = kb / "src" / "cart.py"
        cart.write_text(cart.read_text().replace(
            'self.items.pop(name, None)', 'if self.items.pop(name, None) is None:\n'
            '            return'))
        print("\n(edited: a paragraph inserted in the page, the PDF and the DOCX; "
              "Cart.remove changed)\n", flush=True)
        run("sync", "kb", "--id-field", "id", cwd=work)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
