"""Formats benchmark: what text extraction adds to re-embedding, per format and pipeline.

On ``../shared/revisions/formats-dev/`` (the ``dev.jsonl`` pairs rendered as a MkDocs
Material page, a WeasyPrint PDF and a pandoc DOCX; see its README), for every pipeline
(a loader, then a splitter) and format:

* **points added**: R_c of the pipeline on the render minus R_c of the same splitter on
  the source text the render was made from (``dev.jsonl``'s old/new), mean over pairs of
  the per-pair difference, all pairs and small edits (edit fraction <= 5%);
* **small-edit tokens vs source**: the tokens the pipeline re-embeds over all small-edit
  pairs on the renders, divided by what the same splitter re-embeds on the source texts;
* **extraction MB/s**: render bytes over the loader's seconds (fastest of ``--repeat``
  passes; the machine is shared, so this moves with load), and whether every pass gave
  the same text;
* **header / footer leakage** (PDF): of the (page, running-header string) and (page,
  footer string) instances, read from each page's top and bottom margins with PDFium,
  the share that shows up in the extracted text beyond the string's occurrences in the
  source text (a chapter title that is also a heading counts once as text);
* **mid-sentence breaks per 1,000 characters**: paragraph breaks (a blank line, or the
  boundary between two documents a loader returns, such as two PDF pages) and line
  breaks where the sentence goes on: the line before holds at least 20 characters (10
  when it ends in a CJK character), is not a heading, and does not end in sentence or
  clause punctuation; the text after starts with a lower-case letter, a digit or a CJK
  character; fenced code is left out. The source texts' own rate is the reference;
* **Chinese text recovered** (``--cjk-only`` re-measures it into the saved results): over
  the Chinese pairs' renders (old and new), the share of the source's CJK characters
  (counted as a multiset) that the loader's text holds, pooled over all files, the
  lowest file's share, and the files under half and under 98%;
* **foreign words**: the share of the extracted words (Latin words, numbers, single
  CJK characters) that never occur in the source text: template, navigation, headers,
  footers and page numbers.

Pipelines: ``rechunk`` (``rechunk.sources.parse_file``, then the structured policy sized
by ``rechunk.policy_for`` for the default embedder, all-MiniLM-L6-v2: 138/198 tokens);
``langchain`` (PyPDFLoader / BSHTMLLoader / Docx2txtLoader from langchain-community, then
RecursiveCharacterTextSplitter on the MiniLM tokenizer); ``llamaindex``
(SimpleDirectoryReader, then SentenceSplitter with the MiniLM tokenizer, through
``get_nodes_from_documents`` as its pipelines run it); ``markitdown`` (markitdown, then
semantic-text-splitter's MarkdownSplitter on the MiniLM tokenizer). Each anchor splitter
is length-matched: its token target is chosen (bisection on a 10-token grid) so that its
median chunk on the source texts is closest to the structured policy's median there.
Every chunk string becomes ``rechunk.embedding_input(s)`` and is counted with the MiniLM
tokenizer, so only extraction and boundaries differ.

    python benchmarks/formats.py                   # full run; writes docs + results
    python benchmarks/formats.py --formats docx    # one format; prints, writes nothing
    python benchmarks/formats.py --only rechunk langchain

Each pipeline runs in a fresh process. A run restricted with ``--formats`` or ``--only``
prints its section and writes nothing.
"""

from __future__ import annotations

import argparse
import functools
import json
import multiprocessing
import os
import re
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tokenizers import Tokenizer

import rechunk
from rechunk import Chunk
from rechunk.chunking.tokens import HFTokenCounter, default_tokenizer_path, resolve_tokenizer

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _report

FORMATS = ("docx", "html", "pdf")
DATA = _report.ROOT.parent / "shared" / "revisions" / "formats-dev"
RESULTS = Path(__file__).resolve().parent / "results" / "formats.json"
COMMAND = "python benchmarks/formats.py"
REPEAT = 2
SPEED_STEP, SPEED_ROUNDS = 6, 3  # the interleaved speed run: every 6th pair, 3 rounds
GRID = 10  # anchors' token targets are multiples of this
LANGS = ("en", "zh")
# the issue's targets, per format
TARGET_POINTS_SMALL = 1.0
TARGET_POINTS_ALL = 2.0
TARGET_RATIO_SMALL = 1.15
# loaders that do not extract text from the format: left out of the speed comparison
NOT_EXTRACTION = {("llamaindex", "html")}  # SimpleDirectoryReader reads a page as raw text


# -- pipelines ---------------------------------------------------------------------------------


def _tokenizer() -> Any:
    """A fresh copy of MiniLM's ``tokenizers.Tokenizer`` with truncation and padding off
    (its tokenizer.json truncates at 128 and pads: a splitter would see no long piece)."""
    return HFTokenCounter(Tokenizer.from_file(str(default_tokenizer_path()))).tokenizer


@dataclass
class Pipeline:
    """``load(path, fmt)`` -> the loader's native output; ``texts(native)`` -> the texts it
    hands its splitter; ``split(native, target)`` -> chunk strings of a render;
    ``split_source(text, target)`` -> chunk strings of a source text."""

    name: str
    formats: tuple[str, ...]
    load: Callable[[Path, str], Any]
    texts: Callable[[Any], list[str]]
    split: Callable[[Any, int], list[str]]
    split_source: Callable[[str, int], list[str]]
    matched: bool = True  # an anchor whose target is length-matched


def _rechunk_pipeline() -> Pipeline:
    from rechunk.integrations.onnx import OnnxEmbedder
    from rechunk.sources import parse_file

    chunker = rechunk.policy_for(OnnxEmbedder())

    def split(text: str, _target: int) -> list[str]:
        return [c.text for c in chunker.chunk(text)]

    return Pipeline(
        "rechunk",
        FORMATS,
        lambda path, fmt: parse_file(path),
        lambda docs: [d.text for d in docs],
        lambda docs, target: [s for d in docs for s in split(d.text, target)],
        split,
        matched=False,
    )


def _langchain_pipeline() -> Pipeline:
    import warnings

    warnings.filterwarnings("ignore")
    from langchain_community.document_loaders import (
        BSHTMLLoader,
        Docx2txtLoader,
        PyPDFLoader,
    )
    from langchain_text_splitters import RecursiveCharacterTextSplitter
    from transformers import PreTrainedTokenizerFast

    tok = PreTrainedTokenizerFast(tokenizer_object=_tokenizer())
    splitters: dict[int, Any] = {}

    def splitter(target: int) -> Any:
        if target not in splitters:
            splitters[target] = RecursiveCharacterTextSplitter.from_huggingface_tokenizer(
                tok, chunk_size=target, chunk_overlap=0
            )
        return splitters[target]

    loaders = {"pdf": PyPDFLoader, "html": BSHTMLLoader, "docx": Docx2txtLoader}

    def load(path: Path, fmt: str) -> Any:
        return loaders[fmt](str(path)).load()

    return Pipeline(
        "langchain",
        FORMATS,
        load,
        lambda docs: [d.page_content for d in docs],
        lambda docs, target: [d.page_content for d in splitter(target).split_documents(docs)],
        lambda text, target: splitter(target).split_text(text),
    )


def _llamaindex_pipeline() -> Pipeline:
    from llama_index.core import SimpleDirectoryReader
    from llama_index.core.node_parser import SentenceSplitter

    tok = _tokenizer()

    @functools.lru_cache(maxsize=1 << 16)
    def _ids(s: str) -> tuple[int, ...]:
        return tuple(tok.encode(s, add_special_tokens=False).ids)

    def ids(s: str) -> list[int]:  # SentenceSplitter measures the same pieces many times
        return list(_ids(s))

    splitters: dict[int, Any] = {}

    def splitter(target: int) -> Any:
        if target not in splitters:
            splitters[target] = SentenceSplitter(chunk_size=target, chunk_overlap=0, tokenizer=ids)
        return splitters[target]

    def load(path: Path, fmt: str) -> Any:
        return SimpleDirectoryReader(input_files=[str(path)]).load_data()

    return Pipeline(
        "llamaindex",
        FORMATS,
        load,
        lambda docs: [d.text for d in docs],
        lambda docs, target: [
            n.get_content() for n in splitter(target).get_nodes_from_documents(docs)
        ],
        lambda text, target: splitter(target).split_text(text),
    )


def _markitdown_pipeline() -> Pipeline:
    from markitdown import MarkItDown
    from semantic_text_splitter import MarkdownSplitter

    converter = MarkItDown(enable_plugins=False)
    tok = _tokenizer()
    splitters: dict[int, Any] = {}

    def splitter(target: int) -> Any:
        if target not in splitters:
            splitters[target] = MarkdownSplitter.from_huggingface_tokenizer(tok, target)
        return splitters[target]

    return Pipeline(
        "markitdown",
        FORMATS,
        lambda path, fmt: converter.convert(str(path)).text_content,
        lambda text: [text],
        lambda text, target: list(splitter(target).chunks(text)),
        lambda text, target: list(splitter(target).chunks(text)),
    )


PIPELINES: dict[str, Callable[[], Pipeline]] = {
    "rechunk": _rechunk_pipeline,
    "langchain": _langchain_pipeline,
    "llamaindex": _llamaindex_pipeline,
    "markitdown": _markitdown_pipeline,
}
LABELS = {
    "rechunk": "rechunk: `parse_file` + structured (`policy_for`, MiniLM)",
    "langchain": "LangChain: PyPDFLoader / BSHTMLLoader / Docx2txtLoader + RecursiveCharacter",
    "llamaindex": "LlamaIndex: SimpleDirectoryReader + SentenceSplitter",
    "markitdown": "markitdown + semantic-text-splitter Markdown",
}


# -- data --------------------------------------------------------------------------------------


def load_pairs() -> list[dict[str, Any]]:
    manifest = DATA / "manifest.jsonl"
    if not manifest.exists():
        raise SystemExit(f"the format renders are absent ({manifest} not found)")
    sources = {p["id"]: p for p in _report.load_revisions()}
    pairs = []
    for line in manifest.read_text(encoding="utf-8").splitlines():
        if line.strip():
            row = json.loads(line)
            source = sources[row["id"]]
            pairs.append({**row, "old": source["old"], "new": source["new"]})
    return pairs


def page_margins(path: Path) -> list[tuple[list[str], list[str]]]:
    """Per page of a PDF: the text runs in its top margin and in its bottom margin (the
    renders' margins: 24 mm at the top, 22 mm at the bottom)."""
    import pypdfium2 as pdfium

    top_mm, bottom_mm = 24, 22
    out = []
    pdf = pdfium.PdfDocument(str(path))
    try:
        for index in range(len(pdf)):
            page = pdf[index]
            _, height = page.get_size()
            textpage = page.get_textpage()
            head: list[str] = []
            foot: list[str] = []
            for k in range(textpage.count_rects()):
                left, bottom, right, top = textpage.get_rect(k)
                text = " ".join(textpage.get_text_bounded(left, bottom, right, top).split())
                if not text:
                    continue
                if bottom > height - top_mm * 72 / 25.4:
                    head.append(text)
                elif top < bottom_mm * 72 / 25.4:
                    foot.append(text)
            out.append((head, foot))
    finally:
        pdf.close()
    return out


# -- measures ----------------------------------------------------------------------------------

_WORD = re.compile(r"[A-Za-z]+|\d+|[\u3400-\u4dbf\u4e00-\u9fff]")
_FENCE = re.compile(r"^(```|~~~).*?^\1", re.S | re.M)
_STOP = tuple(".!?:;。！？：；…)]\"'”’」』）")
_CJK = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff]")
_CONTINUES = re.compile(r"[a-z0-9\u3400-\u4dbf\u4e00-\u9fff]")


# inline Markdown / reStructuredText markup around a heading's words in the source: a link's
# text, code spans, emphasis, reference links' brackets (the header shows the words only)
_INLINE_MARKUP = re.compile(r"!?\[([^\]\n]*)\]\([^)\n]*\)|`+|\*+|[\[\]]|(?<!\w)_+|_+(?!\w)")


def _markup_text(match: re.Match[str]) -> str:
    return match.group(1) or ""


def _norm(text: str) -> str:
    from rechunk.sources.base import clean_inline

    return clean_inline(text)


def foreign_share(text: str, source: str) -> float:
    words = [w.lower() for w in _WORD.findall(text)]
    if not words:
        return 0.0
    known = {w.lower() for w in _WORD.findall(source)}
    return sum(1 for w in words if w not in known) / len(words)


def cjk_recovered(text: str, source: str) -> tuple[int, int]:
    """(source CJK characters the text holds, source CJK characters), as multisets."""
    from collections import Counter

    want = Counter(_CJK.findall(source))
    got = Counter(_CJK.findall(text))
    return sum(min(n, got[c]) for c, n in want.items()), sum(want.values())


def cjk_recovery(
    pairs: list[dict[str, Any]], names: Sequence[str], formats: Sequence[str]
) -> dict[str, Any]:
    """Per format and pipeline: the Chinese text its loader recovers from the zh renders."""
    out: dict[str, Any] = {}
    chinese = [p for p in pairs if p["lang"] == "zh"]
    for name in names:
        try:
            pipeline = PIPELINES[name]()
        except Exception as exc:
            print(f"cjk {name}: unavailable ({_error(exc)})", file=sys.stderr)
            continue
        for fmt in formats:
            if fmt not in pipeline.formats:
                continue
            held = total = under_half = under_98 = failed = 0
            lowest = 1.0
            for pair in chinese:
                for version in ("old", "new"):
                    try:
                        texts = pipeline.texts(
                            pipeline.load(DATA / pair["id"] / f"{version}.{fmt}", fmt)
                        )
                    except Exception:
                        failed += 1
                        continue
                    got, want = cjk_recovered("\n".join(texts), pair[version])
                    if not want:
                        continue
                    held, total = held + got, total + want
                    share = got / want
                    lowest = min(lowest, share)
                    under_half += share < 0.5
                    under_98 += share < 0.98
            out.setdefault(fmt, {})[name] = {
                "files": 2 * len(chinese) - failed,
                "failed_files": failed,
                "share": held / total if total else None,
                "lowest": lowest if total else None,
                "under_half": under_half,
                "under_98": under_98,
            }
            print(f"cjk {fmt} {name}: {out[fmt][name]}", file=sys.stderr)
    return out


def _breaks(texts: Sequence[str]) -> tuple[int, int, int]:
    """(mid-sentence paragraph breaks, mid-sentence line breaks, characters)."""
    paragraph = line = chars = 0
    previous_tail: str | None = None
    for text in texts:
        text = _FENCE.sub("\n\n", text)
        chars += len(text)
        lines = text.split("\n")
        # a document boundary counts as a paragraph break between its neighbours
        items: list[tuple[str, bool]] = []  # (line, a blank line or boundary comes before)
        blank = previous_tail is not None
        if previous_tail is not None:
            items.append((previous_tail, False))
        for raw in lines:
            stripped = raw.strip()
            if not stripped:
                blank = True
                continue
            items.append((stripped, blank))
            blank = False
        for (before, _), (after, after_blank) in zip(items, items[1:]):
            if _mid_sentence(before, after):
                line += 1
                paragraph += after_blank
        previous_tail = items[-1][0] if items else previous_tail
    return paragraph, line, chars


def _mid_sentence(before: str, after: str) -> bool:
    if before.startswith("#") or before.endswith(_STOP):
        return False
    needed = 10 if _CJK.match(before[-1]) else 20
    if len(before) < needed:
        return False
    return bool(_CONTINUES.match(after))


def leakage(margins: list[tuple[list[str], list[str]]], text: str, source: str) -> dict[str, int]:
    """Header and footer string instances (page, string) and how many leaked (see module)."""
    flat = _norm(text)
    reference = _norm(_INLINE_MARKUP.sub(_markup_text, source))
    counts: dict[tuple[str, str], int] = {}
    for head, foot in margins:
        for kind, strings in (("header", head), ("footer", foot)):
            for s in strings:
                counts[(kind, s)] = counts.get((kind, s), 0) + 1
    out = {"header_pages": 0, "header_leaked": 0, "footer_pages": 0, "footer_leaked": 0}
    for (kind, s), pages in counts.items():
        if re.fullmatch(r"\d+ / \d+", s):
            a, b = s.split(" / ")
            pattern = re.compile(rf"(?<!\d){a}\s*/\s*{b}(?!\d)")
        else:
            body = r"\s*".join(re.escape(w) for w in _norm(s).split(" "))
            edge = r"\b" if s[:1].isalnum() and s.isascii() else ""
            pattern = re.compile(edge + body + (r"\b" if s[-1:].isalnum() and s.isascii() else ""))
        extra = len(pattern.findall(flat)) - len(pattern.findall(reference))
        out[f"{kind}_pages"] += pages
        out[f"{kind}_leaked"] += min(pages, max(0, extra))
    return out


def _chunks(pieces: list[str], counter: Any) -> list[Chunk]:
    inputs = [s for s in map(rechunk.embedding_input, pieces) if s]
    counts = counter.count_many(inputs) if inputs else []
    return [Chunk(0, 0, s, n) for s, n in zip(inputs, counts)]


def _fresh(old: list[Chunk], new: list[Chunk]) -> tuple[float, int]:
    """R_c and the tokens it stands for."""
    seen = {c.text for c in old}
    distinct: dict[str, int] = {}
    for c in new:
        distinct.setdefault(c.text, c.tokens)
    fresh = sum(t for s, t in distinct.items() if s not in seen)
    return rechunk.recompute_fraction(old, new), fresh


def _source_chunks(pipeline: Pipeline, text: str, target: int, counter: Any) -> list[Chunk] | None:
    """The splitter's chunks of a source text; None when it fails on it (LlamaIndex's
    SentenceSplitter refuses a text holding a word longer than its target)."""
    try:
        return _chunks(pipeline.split_source(text, target), counter)
    except ValueError:
        return None


def _median_tokens(pipeline: Pipeline, texts: list[str], target: int, counter: Any) -> float:
    """The median chunk over the texts the splitter does not fail on (0 if none)."""
    tokens = [c.tokens for t in texts for c in (_source_chunks(pipeline, t, target, counter) or [])]
    return statistics.median(tokens) if tokens else 0.0


def calibrate(
    pipeline: Pipeline, texts: list[str], reference: float, counter: Any
) -> dict[str, Any]:
    """The grid target whose median on ``texts`` is closest to ``reference`` (bisection:
    a splitter's median grows with its target)."""
    tried: dict[int, float] = {}

    def median(target: int) -> float:
        if target not in tried:
            tried[target] = _median_tokens(pipeline, texts, target, counter)
        return tried[target]

    lo, hi = 8, 48  # x GRID tokens
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if median(mid * GRID) < reference:
            lo = mid
        else:
            hi = mid
    best = min((lo * GRID, hi * GRID), key=lambda t: (abs(median(t) - reference), t))
    return {"target": best, "median": median(best), "tried": dict(sorted(tried.items()))}


def measure(
    name: str,
    pairs: list[dict[str, Any]],
    formats: Sequence[str],
    repeat: int,
    reference: float | None,
) -> dict[str, Any]:
    """One pipeline on every render of ``formats`` (run in a process of its own)."""
    counter = resolve_tokenizer(None)
    t0 = time.perf_counter()
    try:
        pipeline = PIPELINES[name]()
    except Exception as exc:
        return {"name": name, "available": False, "reason": _error(exc)}
    setup = time.perf_counter() - t0
    sources = [p[v] for p in pairs for v in ("old", "new")]
    if pipeline.matched and reference is not None:
        calibration = calibrate(pipeline, sources, reference, counter)
    else:
        calibration = {"target": 0, "median": _median_tokens(pipeline, sources, 0, counter)}
    target = calibration["target"]
    source_chunks = {
        (p["id"], v): _source_chunks(pipeline, p[v], target, counter)
        for p in pairs
        for v in ("old", "new")
    }
    out: dict[str, Any] = {
        "name": name,
        "available": True,
        "setup_seconds": setup,
        "target": target,
        "source_median_tokens": calibration["median"],
        "calibration": calibration,
        "formats": {},
    }
    for fmt in formats:
        if fmt not in pipeline.formats:
            continue
        out["formats"][fmt] = _measure_format(
            pipeline, fmt, pairs, source_chunks, repeat, counter, target
        )
    return out


def _measure_format(
    pipeline: Pipeline,
    fmt: str,
    pairs: list[dict[str, Any]],
    source_chunks: dict[tuple[str, str], list[Chunk] | None],
    repeat: int,
    counter: Any,
    target: int,
    root: Path = DATA,
) -> dict[str, Any]:
    """One pipeline on the renders of one format (``root/<id>/{old,new}.<fmt>``)."""
    files = [(p, v, root / p["id"] / f"{v}.{fmt}") for p in pairs for v in ("old", "new")]
    size = sum(path.stat().st_size for _, _, path in files)
    natives: dict[tuple[str, str], Any] = {}
    errors: dict[tuple[str, str], str] = {}
    passes: list[float] = []
    texts_by_pass: list[dict[tuple[str, str], list[str]]] = []
    for _ in range(repeat):
        seconds = 0.0
        texts: dict[tuple[str, str], list[str]] = {}
        for pair, version, path in files:
            key = (pair["id"], version)
            t0 = time.perf_counter()
            try:
                native = pipeline.load(path, fmt)
            except Exception as exc:
                errors.setdefault(key, _error(exc))
                continue
            seconds += time.perf_counter() - t0
            natives.setdefault(key, native)
            texts[key] = pipeline.texts(native)
        passes.append(seconds)
        texts_by_pass.append(texts)
    nondeterministic = sum(
        1
        for key in texts_by_pass[0]
        if any(t.get(key) != texts_by_pass[0][key] for t in texts_by_pass[1:])
    )
    rows = []
    paragraph = line = chars = 0
    leaks = {"header_pages": 0, "header_leaked": 0, "footer_pages": 0, "footer_leaked": 0}
    render_tokens: list[int] = []
    foreign: list[float] = []
    for pair in pairs:
        keys = [(pair["id"], v) for v in ("old", "new")]
        if any(k in errors or k not in natives for k in keys):
            rows.append({"id": pair["id"], "error": next(errors[k] for k in keys if k in errors)})
            continue
        chunks = {}
        try:
            for key in keys:
                chunks[key[1]] = _chunks(pipeline.split(natives[key], target), counter)
        except Exception as exc:
            rows.append({"id": pair["id"], "error": f"split: {_error(exc)}"})
            errors.setdefault(keys[0], f"split: {_error(exc)}")
            continue
        rc, fresh = _fresh(chunks["old"], chunks["new"])
        old_source, new_source = source_chunks[keys[0]], source_chunks[keys[1]]
        if old_source is None or new_source is None:
            rows.append({"id": pair["id"], "error": "the splitter fails on the source text"})
            continue
        src_rc, src_fresh = _fresh(old_source, new_source)
        render_tokens += [c.tokens for c in chunks["new"]]
        text = texts_by_pass[0][keys[1]]
        p, ln, n = _breaks(text)
        paragraph, line, chars = paragraph + p, line + ln, chars + n
        foreign.append(foreign_share("\n".join(text), pair["new"]))
        if fmt == "pdf":
            for key in keys:
                found = leakage(
                    page_margins(root / key[0] / f"{key[1]}.pdf"),
                    "\n".join(texts_by_pass[0][key]),
                    pair[key[1]],
                )
                for k, v in found.items():
                    leaks[k] += v
        rows.append(
            {
                "id": pair["id"],
                "lang": pair["lang"],
                "band": pair["band"],
                "rc": rc,
                "rc_source": src_rc,
                "fresh": fresh,
                "fresh_source": src_fresh,
                "chunks_new": len(chunks["new"]),
            }
        )
    ok = [r for r in rows if "rc" in r]
    cells: dict[str, Any] = {}
    for lang in (*LANGS, "all"):
        for band in ("small", "all"):
            sel = [r for r in ok if lang in ("all", r["lang"]) and band in ("all", r["band"])]
            source_fresh = sum(r["fresh_source"] for r in sel)
            cells[f"{lang}/{band}"] = {
                "n": len(sel),
                "points": 100 * statistics.fmean(r["rc"] - r["rc_source"] for r in sel)
                if sel
                else None,
                "rc": statistics.fmean(r["rc"] for r in sel) if sel else None,
                "rc_source": statistics.fmean(r["rc_source"] for r in sel) if sel else None,
                "fresh": sum(r["fresh"] for r in sel),
                "fresh_source": source_fresh,
                "ratio": sum(r["fresh"] for r in sel) / source_fresh if source_fresh else None,
            }
    best = min(passes) if passes else 0.0
    done_bytes = sum(path.stat().st_size for p, v, path in files if (p["id"], v) not in errors)
    return {
        "files": len(files),
        "bytes": size,
        "failed_files": len(errors),
        "failed_pairs": len(rows) - len(ok),
        "failed_pair_errors": [r for r in rows if "error" in r],
        "first_error": next(iter(errors.values()), None),
        "nondeterministic_files": nondeterministic,
        "seconds": passes,
        "mbps": done_bytes / 1e6 / best if best > 0 else None,
        "cells": cells,
        "median_tokens": statistics.median(render_tokens) if render_tokens else None,
        "mid_sentence_paragraph_per_1k": 1000 * paragraph / chars if chars else None,
        "mid_sentence_line_per_1k": 1000 * line / chars if chars else None,
        "foreign_words": statistics.fmean(foreign) if foreign else None,
        "leakage": leaks if fmt == "pdf" else None,
        "pairs": rows,
    }


def _error(exc: BaseException) -> str:
    message = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {message[:200]}"


def source_reference(pairs: list[dict[str, Any]]) -> dict[str, Any]:
    """Mid-sentence breaks of the source texts themselves (new versions)."""
    paragraph = line = chars = 0
    for pair in pairs:
        p, ln, n = _breaks([pair["new"]])
        paragraph, line, chars = paragraph + p, line + ln, chars + n
    return {
        "mid_sentence_paragraph_per_1k": 1000 * paragraph / chars,
        "mid_sentence_line_per_1k": 1000 * line / chars,
    }


def interleaved_speed(
    pairs: list[dict[str, Any]],
    names: Sequence[str],
    formats: Sequence[str],
    step: int,
    rounds: int,
) -> dict[str, Any]:
    """Extraction speed of every pipeline's loader on the same files, interleaved: for each
    file, each loader reads it in turn (the order rotating by round), so machine load hits
    all alike; MB/s per loader from its fastest round. Every ``step``-th pair."""
    pipelines = {}
    for name in names:
        try:
            pipelines[name] = PIPELINES[name]()
        except Exception:
            continue
    chosen = pairs[::step]
    out: dict[str, Any] = {"pairs": len(chosen), "rounds": rounds, "mbps": {}}
    for fmt in formats:
        files = [DATA / p["id"] / f"{v}.{fmt}" for p in chosen for v in ("old", "new")]
        size = sum(f.stat().st_size for f in files)
        names_here = [n for n in pipelines if fmt in pipelines[n].formats]
        seconds = {n: [0.0] * rounds for n in names_here}
        failed = {n: False for n in names_here}
        for r in range(rounds):
            order = names_here[r % len(names_here) :] + names_here[: r % len(names_here)]
            for path in files:
                for n in order:
                    if failed[n]:
                        continue
                    t0 = time.perf_counter()
                    try:
                        pipelines[n].load(path, fmt)
                    except Exception:
                        failed[n] = True
                        continue
                    seconds[n][r] += time.perf_counter() - t0
        out["mbps"][fmt] = {
            n: (None if failed[n] else size / 1e6 / min(seconds[n])) for n in names_here
        }
        print(f"speed {fmt}: {out['mbps'][fmt]}", file=sys.stderr)
    return out


def _run_one(
    name: str,
    pairs: list[dict[str, Any]],
    formats: Sequence[str],
    repeat: int,
    reference: float | None,
) -> dict[str, Any]:
    return measure(name, pairs, formats, repeat, reference)


def run(names: Sequence[str], formats: Sequence[str], repeat: int) -> dict[str, Any]:
    pairs = load_pairs()
    load_before = os.getloadavg()[0]
    t0 = time.perf_counter()
    spawn = multiprocessing.get_context("spawn")
    results: list[dict[str, Any]] = []
    reference: float | None = None
    order = ["rechunk", *[n for n in names if n != "rechunk"]]
    for name in order:
        with ProcessPoolExecutor(max_workers=1, mp_context=spawn) as pool:
            result = pool.submit(_run_one, name, pairs, formats, repeat, reference).result()
        if name == "rechunk":
            reference = result.get("source_median_tokens")
            if "rechunk" not in names:
                continue
        results.append(result)
        print(f"{name}: done at {time.perf_counter() - t0:.0f} s", file=sys.stderr)
    with ProcessPoolExecutor(max_workers=1, mp_context=spawn) as pool:
        speed = pool.submit(
            interleaved_speed, pairs, names, formats, SPEED_STEP, SPEED_ROUNDS
        ).result()
    with ProcessPoolExecutor(max_workers=1, mp_context=spawn) as pool:
        cjk = pool.submit(cjk_recovery, pairs, names, formats).result()
    return {
        "speed": speed,
        "cjk": cjk,
        "benchmark": "formats",
        "machine": _report.machine(),
        "command": COMMAND,
        "dataset": {
            "path": "../shared/revisions/formats-dev/",
            "pairs": len(pairs),
            "small_pairs": sum(1 for p in pairs if p["band"] == "small"),
        },
        "formats": list(formats),
        "repeat": repeat,
        "reference_median_tokens": reference,
        "source": source_reference(pairs),
        "seconds_total": time.perf_counter() - t0,
        "load_average_1min": {"before": load_before, "after": os.getloadavg()[0]},
        "pipelines": results,
    }


# -- report ------------------------------------------------------------------------------------


def _pct(value: float | None) -> str:
    return "–" if value is None else f"{100 * value:.1f}%"


def _pct2(value: float | None) -> str:
    return "–" if value is None else f"{100 * value:.2f}%"


def _pts(value: float | None) -> str:
    return "–" if value is None else f"{value:+.1f}"


def _x(value: float | None) -> str:
    return "–" if value is None else f"{value:.2f}x"


def _num(value: float | None, digits: int = 2) -> str:
    return "–" if value is None else f"{value:.{digits}f}"


def _speeds(results: dict[str, Any], fmt: str) -> dict[str, float | None]:
    """MB/s per pipeline: the interleaved run's when there is one, else each pipeline's own."""
    interleaved = (results.get("speed") or {}).get("mbps", {}).get(fmt)
    if interleaved:
        return dict(interleaved)
    return {
        r["name"]: r["formats"][fmt]["mbps"]
        for r in results["pipelines"]
        if r["available"] and fmt in r["formats"]
    }


def _verdicts(results: dict[str, Any]) -> list[str]:
    ours = next(
        (r for r in results["pipelines"] if r["name"] == "rechunk" and r["available"]), None
    )
    if ours is None:
        return ["rechunk's pipeline did not run."]
    lines = []
    for fmt in results["formats"]:
        got = ours["formats"].get(fmt)
        if got is None:
            continue
        cells = got["cells"]["all/small"], got["cells"]["all/all"]
        small, overall = cells
        checks = [
            ("small-edit points", small["points"], TARGET_POINTS_SMALL, _pts),
            ("overall points", overall["points"], TARGET_POINTS_ALL, _pts),
            ("small-edit tokens vs source", small["ratio"], TARGET_RATIO_SMALL, _x),
        ]
        parts = []
        for label, value, bound, show in checks:
            verdict = "meets" if value is not None and value <= bound else "MISSES"
            parts.append(
                f"{label} {show(value)} ({verdict} <= {show(bound) if show is _x else f'{bound:g}'})"
            )
        speeds = _speeds(results, fmt)
        anchors = [
            v
            for name, v in speeds.items()
            if name != "rechunk" and (name, fmt) not in NOT_EXTRACTION and v
        ]
        ours_speed = speeds.get("rechunk")
        if anchors and ours_speed:
            fastest = max(anchors)
            speed = "at least as fast as" if ours_speed >= fastest else "SLOWER than"
            parts.append(
                f"extraction {ours_speed:.2f} MB/s, {speed} the fastest anchor ({fastest:.2f})"
            )
        if got["failed_files"]:
            parts.append(f"{got['failed_files']} files failed ({got['first_error']})")
        lines.append(f"- **{fmt.upper()}**: " + "; ".join(parts) + ".")
    return lines


def to_markdown(results: dict[str, Any]) -> str:
    ok = [r for r in results["pipelines"] if r["available"]]
    missing = [r for r in results["pipelines"] if not r["available"]]
    ds = results["dataset"]
    src = results["source"]
    lines = [
        "## Formats: what text extraction adds to re-embedding",
        "",
        f"Machine: {results['machine']}. Reproduce: `{results['command']}` (whole run "
        f"{results['seconds_total']:.0f} s; raw numbers in `benchmarks/results/formats.json`). "
        "1-minute load average before/after: "
        f"{results['load_average_1min']['before']:.2f}/{results['load_average_1min']['after']:.2f} "
        "(extraction speed is wall time on a shared machine).",
        "",
        f"{ds['pairs']} pairs of `{ds['path']}` ({ds['small_pairs']} small edits), each "
        "rendered as DOCX (pandoc), HTML (MkDocs Material) and PDF (WeasyPrint). Points "
        "added: the pipeline's R_c on the render minus the same splitter's R_c on the source "
        "text the render was made from, mean of per-pair differences. Tokens vs source: the "
        "tokens re-embedded over all small-edit pairs on the renders over those re-embedded on "
        "the sources. Anchor splitters are length-matched: their token target is chosen so "
        "that their median chunk on the source texts is closest to the structured policy's "
        f"({results['reference_median_tokens']:g} MiniLM tokens); the target and median are in "
        "the table. Extraction MB/s: render bytes over the loader's time; alone: each "
        f"pipeline in its own process over all renders, fastest of {results['repeat']} passes "
        "(pipelines run one after the other, so each meets a different machine load); "
        "interleaved: all loaders in one process reading the same files in turn (every "
        f"{SPEED_STEP}th pair, fastest of {SPEED_ROUNDS} rounds), the figure the verdicts "
        "use. Mid-sentence breaks: paragraph breaks (blank lines and "
        "the boundaries between the documents a loader returns, such as PDF pages) and line "
        "breaks inside a sentence, per 1,000 characters of extracted text; the source texts' "
        f"own rates are {src['mid_sentence_paragraph_per_1k']:.2f} (paragraph) and "
        f"{src['mid_sentence_line_per_1k']:.2f} (line: the sources are hard-wrapped). Foreign "
        "words: the share of extracted words that never occur in the source (template, "
        "navigation, headers, footers, page numbers). Header / footer leakage (PDF): the "
        "share of (page, running header or footer string) instances, read from the page "
        "margins with PDFium, found in the extracted text beyond their count in the source. "
        "How each measure is made: the docstring of `benchmarks/formats.py`.",
        "",
        "Against the targets (per format: at most +1 point on small edits, +2 overall, "
        "1.15x the source's small-edit tokens; extraction at least as fast as the fastest "
        "anchor):",
        "",
        *_verdicts(results),
        "",
    ]
    for fmt in results["formats"]:
        lines += [
            f"### {fmt.upper()}",
            "",
            "| pipeline | target / median tok (source) | median tok (render) | points all | "
            "points small | small-edit tokens vs source | en small | zh small | MB/s alone | "
            "MB/s interleaved | "
            "same text every pass | mid-sentence /1k (para / line) | foreign words |"
            + (" header leak | footer leak |" if fmt == "pdf" else "")
            + " failed files / pairs left out |",
            "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|:---:|---:|---:|"
            + ("---:|---:|" if fmt == "pdf" else "")
            + "---:|",
        ]
        for r in ok:
            got = r["formats"].get(fmt)
            if got is None:
                continue
            c = got["cells"]
            target = f"{r['target']} / " if r["target"] else "policy / "
            varied = got["nondeterministic_files"]
            same = "yes" if not varied else f"no ({varied} files)"
            leak = ""
            if fmt == "pdf":
                lk = got["leakage"]
                leak = (
                    f" {_pct(lk['header_leaked'] / lk['header_pages'] if lk['header_pages'] else None)} |"
                    f" {_pct(lk['footer_leaked'] / lk['footer_pages'] if lk['footer_pages'] else None)} |"
                )
            lines.append(
                f"| {LABELS.get(r['name'], r['name'])} | {target}{r['source_median_tokens']:g} | "
                f"{_num(got['median_tokens'], 0)} | {_pts(c['all/all']['points'])} | "
                f"{_pts(c['all/small']['points'])} | {_x(c['all/small']['ratio'])} | "
                f"{_pts(c['en/small']['points'])} | {_pts(c['zh/small']['points'])} | "
                f"{_num(got['mbps'])} | {_num(_speeds(results, fmt).get(r['name']))} | {same} | "
                f"{_num(got['mid_sentence_paragraph_per_1k'])} / {_num(got['mid_sentence_line_per_1k'])} | "
                f"{_pct(got['foreign_words'])} |{leak} {got['failed_files']} / {got['failed_pairs']} |"
            )
        for r in missing:
            lines.append(f"| {LABELS.get(r['name'], r['name'])} | unavailable: {r['reason']} |")
        lines.append("")
        notes = [
            f"`{r['name']}`: {r['formats'][fmt]['failed_pairs']} pairs left out "
            f"({r['formats'][fmt]['failed_pair_errors'][0]['error']})"
            for r in ok
            if fmt in r["formats"] and r["formats"][fmt]["failed_pairs"]
        ]
        if any(name == "llamaindex" and f == fmt for name, f in NOT_EXTRACTION):
            notes.append(
                "`llamaindex`: SimpleDirectoryReader has no HTML reader by default and reads "
                "the page's markup as text (its speed is not an extraction speed and is left "
                "out of the comparison)"
            )
        if notes:
            lines += ["Notes: " + "; ".join(notes) + ".", ""]
        cjk = (results.get("cjk") or {}).get(fmt)
        if cjk:
            parts = [
                f"{name} {_pct2(got['share'])} (lowest file {_pct2(got['lowest'])}; "
                f"{got['under_half']} under half, {got['under_98']} under 98%"
                + (f"; {got['failed_files']} not read" if got["failed_files"] else "")
                + ")"
                for name, got in cjk.items()
            ]
            files = max(got["files"] + got["failed_files"] for got in cjk.values())
            lines += [
                f"Chinese text recovered ({files} renders of the zh pairs; share of the "
                "source's CJK characters the loader's text holds, pooled): "
                + "; ".join(parts)
                + "."
                + (
                    " The DOCX renders lack what the source holds as raw HTML (figure "
                    "captions in `<figcaption>`), which pandoc leaves out: no loader can "
                    "read it."
                    if fmt == "docx"
                    else ""
                ),
                "",
            ]
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument(
        "--formats", nargs="+", choices=FORMATS, help="only these formats; write nothing"
    )
    parser.add_argument(
        "--only", nargs="+", choices=list(PIPELINES), help="only these pipelines; write nothing"
    )
    parser.add_argument(
        "--repeat", type=int, default=REPEAT, help=f"extraction passes (default {REPEAT})"
    )
    parser.add_argument(
        "--speed-only",
        action="store_true",
        help="re-measure only the interleaved extraction speed into the saved results",
    )
    parser.add_argument(
        "--cjk-only",
        action="store_true",
        help="re-measure only the Chinese text each loader recovers into the saved results",
    )
    args = parser.parse_args(argv)
    if args.cjk_only:
        results = json.loads(RESULTS.read_text(encoding="utf-8"))
        results["cjk"] = cjk_recovery(load_pairs(), list(PIPELINES), results["formats"])
        RESULTS.write_text(
            json.dumps(results, indent=1, ensure_ascii=False) + "\n", encoding="utf-8"
        )
        _report.write_section("formats", to_markdown(results))
        print(to_markdown(results))
        return 0
    if args.speed_only:
        results = json.loads(RESULTS.read_text(encoding="utf-8"))
        results["speed"] = interleaved_speed(
            load_pairs(), list(PIPELINES), results["formats"], SPEED_STEP, SPEED_ROUNDS
        )
        RESULTS.write_text(
            json.dumps(results, indent=1, ensure_ascii=False) + "\n", encoding="utf-8"
        )
        _report.write_section("formats", to_markdown(results))
        print(to_markdown(results))
        return 0
    formats = args.formats or list(FORMATS)
    names = args.only or list(PIPELINES)
    results = run(names, formats, max(1, args.repeat))
    markdown = to_markdown(results)
    if args.formats or args.only:
        print(markdown)
        return 0
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(results, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    _report.write_section("formats", markdown)
    print(markdown)
    print(f"wrote {RESULTS} and the formats section of {_report.DOCS}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
