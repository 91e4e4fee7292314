"""Retrieval benchmark: known-item recall per chunker, one embedder, one token budget.

A proxy for "does a chunker that re-embeds less still retrieve as well?". For
every revision pair of ``../shared/revisions/dev.jsonl``:

* queries: sentences of the NEW version that lie in a region the revision
  changed (a line-level diff of old and new), of ordinary prose length; each is
  asked twice, as the sentence itself (``full``) and with its first and last few
  words removed (``trimmed``: 3 words each side in English, a sixth of the
  characters each side in Chinese). At most ``--max-queries`` sentences per
  document (a fixed-seed sample when more qualify);
* evidence: that sentence's character span in the new version;
* pool: the new version of EVERY document, chunked by the chunker under test;
* ranking: cosine similarity of query and chunk vectors, all-MiniLM-L6-v2 for
  everything (``rechunk.integrations.sentence_transformers``), vectors reused
  through ``rechunk.CachedEmbedder`` + ``SQLiteCache(benchmarks/.cache/retrieval.sqlite)``
  so that a chunk produced by several chunkers, or by a re-run, is embedded once;
* packing: whole chunks in rank order into a 1,024-token budget (the first chunk
  that does not fit ends the context);
* score: 1 if the packed chunks cover the evidence span (every non-space
  character of the sentence lies in a packed chunk's span; chunks separated only
  by whitespace count as contiguous).

Chunkers are sized for MiniLM's 256-token window: rechunk's policies via
``rechunk.policy_for(embedder, kind)`` (fixed 150, recursive 198, cdc 87/174,
structured 138/198, hard maximum 254) and the anchors at the same ~200-token
target (steadlith's CDC at cdc's 87/176). Anchors return strings; their source
spans are recovered in order on whitespace-collapsed text (a chunk that cannot
be found is scored by containment of the sentence in its text). Recall is the
share of queries scored 1, with a 95% bootstrap interval over documents
(2,000 resamples, seed 7).

    python benchmarks/retrieval.py                  # full run: docs section, JSON, chart
    python benchmarks/retrieval.py --max-queries 2 --only rechunk-structured text-splitter-md
"""

from __future__ import annotations

import argparse
import difflib
import json
import random
import re
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

import rechunk
from rechunk import Chunk
from rechunk.chunking.tokens import resolve_tokenizer

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _report
import churn

ROOT = Path(__file__).resolve().parent
CACHE = ROOT / ".cache" / "retrieval.sqlite"
RESULTS = ROOT / "results" / "retrieval.json"
CHART = _report.ROOT / "docs" / "structured.png"
COMMAND = "python benchmarks/retrieval.py"
BUDGET = 1024
TARGET = 200  # anchors' token target, the MiniLM-scale equivalent of the churn run's 400
MAX_QUERIES = 8  # sentences per document
BOOTSTRAP = 2000
SEED = 7
REFERENCE = "rechunk-structured"  # paired differences are taken against it

ChunkFn = Callable[[str], list[Chunk]]


# -- chunkers ----------------------------------------------------------------------------


def _policy(kind: str) -> Callable[[Any], ChunkFn]:
    def make(embedder: Any) -> ChunkFn:
        if kind == "structured":
            try:
                return rechunk.policy_for(embedder, kind).chunk
            except rechunk.ConfigError:  # policy_for does not know it yet: scale by hand
                from rechunk.chunkers.structured import StructuredChunker

                scale = (embedder.max_input_tokens - embedder.special_tokens) / 512
                return StructuredChunker(
                    min_tokens=int(256 * scale),
                    max_tokens=int(400 * scale),
                    hard_max_tokens=embedder.max_input_tokens - embedder.special_tokens,
                    tokenizer=embedder.tokenizer,
                ).chunk
        return rechunk.policy_for(embedder, kind).chunk

    return make


def _spans(text: str, pieces: Sequence[str]) -> list[tuple[int, int] | None]:
    """Source spans of ``pieces`` (in order), matched on whitespace-collapsed text."""
    words = list(re.finditer(r"\S+", text))
    norm_parts: list[str] = []
    norm_start: list[int] = []
    position = 0
    for m in words:
        norm_start.append(position)
        norm_parts.append(m.group())
        position += len(m.group()) + 1
    norm = " ".join(norm_parts)
    src_start = [m.start() for m in words]

    def source(q: int) -> int:
        i = max(0, np.searchsorted(norm_start, q, side="right") - 1)
        return src_start[i] + min(q - norm_start[i], len(norm_parts[i]))

    out: list[tuple[int, int] | None] = []
    cursor = 0
    for piece in pieces:
        target = " ".join(piece.split())
        if not target:
            out.append(None)
            continue
        q = norm.find(target, cursor)
        if q < 0:
            q = norm.find(target)
        if q < 0:
            out.append(None)
            continue
        cursor = q + len(target)
        out.append((source(q), source(q + len(target) - 1) + 1))
    return out


class _SpanAnchor:
    """A third-party ``str -> list[str]`` splitter as chunks with recovered source spans."""

    def __init__(self, split: Callable[[str], Sequence[str]]) -> None:
        self._split = split
        self._counter = resolve_tokenizer(None)

    def __call__(self, text: str) -> list[Chunk]:
        pieces = [p for p in self._split(text) if rechunk.embedding_input(p)]
        inputs = [rechunk.embedding_input(p) for p in pieces]
        counts = self._counter.count_many(inputs)
        spans = _spans(text, pieces)
        return [
            Chunk(-1, -1, s, n) if span is None else Chunk(span[0], span[1], s, n)
            for s, n, span in zip(inputs, counts, spans)
        ]


def _langchain(embedder: Any) -> ChunkFn:
    from langchain_text_splitters import RecursiveCharacterTextSplitter
    from transformers import PreTrainedTokenizerFast

    tok = PreTrainedTokenizerFast(tokenizer_object=churn._fresh_tokenizer())
    splitter = RecursiveCharacterTextSplitter.from_huggingface_tokenizer(
        tok, chunk_size=TARGET, chunk_overlap=0
    )
    return _SpanAnchor(splitter.split_text)


def _llamaindex(embedder: Any) -> ChunkFn:
    from llama_index.core.node_parser import SentenceSplitter

    tok = churn._fresh_tokenizer()
    splitter = SentenceSplitter(
        chunk_size=TARGET,
        chunk_overlap=0,
        tokenizer=lambda s: tok.encode(s, add_special_tokens=False).ids,
    )
    return _SpanAnchor(splitter.split_text)


def _steadlith(embedder: Any) -> ChunkFn:
    from steadlith.chunk import CDCChunker, CDCParams

    counter = churn._fresh_counter()
    chunker = CDCChunker(
        CDCParams(min_tokens=87, max_tokens=176, tokenizer_id=counter.identity),
        token_counter=lambda w: max(1, counter.count_many([w])[0]),
    )

    def split(text: str) -> list[str]:
        return [
            text[c.metadata["start_offset"] : c.metadata["end_offset"]] for c in chunker.split(text)
        ]

    return _SpanAnchor(split)


def _chonkie(embedder: Any) -> ChunkFn:
    from chonkie import RecursiveChunker

    chunker = RecursiveChunker(tokenizer=churn._fresh_tokenizer(), chunk_size=TARGET)
    return _SpanAnchor(lambda text: [c.text for c in chunker.chunk(text)])


def _text_splitter(embedder: Any) -> ChunkFn:
    from semantic_text_splitter import MarkdownSplitter

    splitter = MarkdownSplitter.from_huggingface_tokenizer(churn._fresh_tokenizer(), TARGET)
    return _SpanAnchor(splitter.chunks)


#: name -> factory(embedder) -> chunk function
CHUNKERS: dict[str, Callable[[Any], ChunkFn]] = {
    "rechunk-fixed": _policy("fixed"),
    "rechunk-recursive": _policy("recursive"),
    "rechunk-cdc": _policy("cdc"),
    "rechunk-structured": _policy("structured"),
    "langchain-recursive-200": _langchain,
    "llamaindex-sentence-200": _llamaindex,
    "steadlith-cdc-87-176": _steadlith,
    "chonkie-recursive-200": _chonkie,
    "text-splitter-md-200": _text_splitter,
}


# -- queries -----------------------------------------------------------------------------

_SENTENCE = re.compile(r"[^.!?。！？\n]*(?:[.!?](?=\s)|[。！？]|$)")
_CJK = re.compile(r"[\u3400-\u9fff]")


def _fences(text: str) -> list[tuple[int, int]]:
    """Character ranges of fenced code blocks (``` or ~~~), for skipping code."""
    out = []
    opened = -1
    for m in re.finditer(r"(?m)^ {0,3}(?:```|~~~)", text):
        if opened < 0:
            opened = m.start()
        else:
            out.append((opened, m.end()))
            opened = -1
    if opened >= 0:
        out.append((opened, len(text)))
    return out


def _sentences(text: str) -> list[tuple[int, int]]:
    """Prose sentences of ``text`` as stripped spans; hard-wrapped lines are joined."""
    spans = []
    for block in re.finditer(r"(?:[^\n]+\n?)+", text):  # paragraphs (no blank line inside)
        body = block.group().replace("\n", " ")
        base = block.start()
        for m in _SENTENCE.finditer(body):
            raw = m.group()
            if not raw.strip():
                continue
            lead = len(raw) - len(raw.lstrip())
            start = base + m.start() + lead
            end = base + m.start() + len(raw.rstrip())
            spans.append((start, end))
    return spans


def _good(sentence: str, lang: str) -> bool:
    if re.search(r"[`|{}<>\[\]=#*_\\]", sentence):
        return False  # markup or code
    if lang == "zh":
        return len(_CJK.findall(sentence)) >= 12 and len(sentence) <= 160
    words = sentence.split()
    letters = sum(c.isalpha() for c in sentence)
    return 10 <= len(words) <= 60 and letters >= 0.6 * len(sentence.replace(" ", ""))


def _changed(old: str, new: str) -> list[tuple[int, int]]:
    """Character ranges of the new text on lines that the revision added or changed."""
    a, b = old.splitlines(keepends=True), new.splitlines(keepends=True)
    offsets = [0]
    for line in b:
        offsets.append(offsets[-1] + len(line))
    matcher = difflib.SequenceMatcher(None, a, b, autojunk=False)
    return [
        (offsets[j1], offsets[j2])
        for tag, _, _, j1, j2 in matcher.get_opcodes()
        if tag in ("replace", "insert") and j2 > j1
    ]


def _trim(sentence: str, lang: str) -> str:
    if lang == "zh":
        cut = max(2, len(sentence) // 6)
        return sentence[cut:-cut]
    words = sentence.split()
    return " ".join(words[3:-3])


def make_queries(pairs: list[dict[str, Any]], per_doc: int) -> list[dict[str, Any]]:
    """Queries from changed regions of each new version (see the module docstring)."""
    queries = []
    for doc, pair in enumerate(pairs):
        new, lang = pair["new"], pair["lang"]
        changed = _changed(pair["old"], new)
        code = _fences(new)
        found = []
        for start, end in _sentences(new):
            if not any(s < end and start < e for s, e in changed):
                continue
            if any(s <= start < e for s, e in code):
                continue
            text = " ".join(new[start:end].split())
            if _good(text, lang):
                found.append((start, end, text))
        if len(found) > per_doc:
            found = sorted(random.Random(f"{SEED}/{pair['id']}").sample(found, per_doc))
        for start, end, text in found:
            for variant, query in (("full", text), ("trimmed", _trim(text, lang))):
                queries.append(
                    {
                        "doc": doc,
                        "pair": pair["id"],
                        "lang": lang,
                        "variant": variant,
                        "query": query,
                        "evidence": (start, end),
                    }
                )
    return queries


# -- scoring -----------------------------------------------------------------------------


def _covered(text: str, evidence: tuple[int, int], chunks: list[Chunk]) -> bool:
    """True if the chunks' spans (merged across whitespace) cover the evidence span."""
    spans = sorted((c.start, c.end) for c in chunks if c.start >= 0)
    merged: list[list[int]] = []
    for s, e in spans:
        if merged and (s <= merged[-1][1] or not text[merged[-1][1] : s].strip()):
            merged[-1][1] = max(merged[-1][1], e)
        else:
            merged.append([s, e])
    es, ee = evidence
    if any(s <= es and ee <= e for s, e in merged):
        return True
    sentence = " ".join(text[es:ee].split())
    return any(c.start < 0 and sentence in " ".join(c.text.split()) for c in chunks)


def _pack(order: np.ndarray, tokens: list[int]) -> list[int]:
    used = 0
    out = []
    for index in order.tolist():
        if used + tokens[index] > BUDGET:
            break
        used += tokens[index]
        out.append(index)
    return out


def evaluate(
    name: str,
    chunk: ChunkFn,
    pairs: list[dict[str, Any]],
    queries: list[dict[str, Any]],
    query_vectors: np.ndarray,
    embedder: Any,
) -> dict[str, Any]:
    t0 = time.perf_counter()
    pool: list[tuple[int, Chunk]] = []
    failed: list[str] = []
    rc: dict[str, list[float]] = {}
    for doc, pair in enumerate(pairs):
        try:
            new = chunk(pair["new"])
        except Exception as exc:  # a document the chunker cannot chunk is not in its index
            failed.append(f"{pair['id']}: {type(exc).__name__}: {str(exc)[:120]}")
            continue
        pool.extend((doc, c) for c in new)
        try:
            value = rechunk.recompute_fraction(chunk(pair["old"]), new)
        except Exception:
            continue
        for cell in (pair["lang"], f"{pair['lang']}/{pair['band']}"):
            rc.setdefault(cell, []).append(value)
    seconds_chunking = time.perf_counter() - t0
    t0 = time.perf_counter()
    before = embedder.stats
    vectors = embedder.embed([c.text for _, c in pool])
    after = embedder.stats
    seconds_embedding = time.perf_counter() - t0
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    tokens = [c.tokens for _, c in pool]
    scores = query_vectors @ vectors.T
    hits = []
    for q, row in zip(queries, scores):
        order = np.argsort(-row, kind="stable")
        packed = [pool[i] for i in _pack(order, tokens)]
        own = [c for doc, c in packed if doc == q["doc"]]
        hits.append(int(_covered(pairs[q["doc"]]["new"], q["evidence"], own)))
    located = sum(1 for _, c in pool if c.start >= 0)
    return {
        "name": name,
        "chunks": len(pool),
        "located": located,
        "median_tokens": statistics.median(tokens) if tokens else None,
        "max_tokens": max(tokens) if tokens else None,
        "hits": hits,
        "failed_docs": failed,
        "rc": {cell: statistics.fmean(values) for cell, values in sorted(rc.items())},
        "embedded_now": after.inputs_embedded - before.inputs_embedded,
        "seconds_chunking": seconds_chunking,
        "seconds_embedding": seconds_embedding,
    }


def bootstrap(
    hits: list[int], docs: list[int], n_docs: int, rounds: int = BOOTSTRAP, seed: int = SEED
) -> tuple[float, float, float]:
    """Recall and its 95% percentile interval, resampling documents with replacement."""
    per_doc_hits = np.zeros(n_docs)
    per_doc_n = np.zeros(n_docs)
    for h, d in zip(hits, docs):
        per_doc_hits[d] += h
        per_doc_n[d] += 1
    rng = np.random.default_rng(seed)
    samples = rng.integers(0, n_docs, size=(rounds, n_docs))
    totals = per_doc_n[samples].sum(axis=1)
    values = per_doc_hits[samples].sum(axis=1) / np.maximum(totals, 1)
    recall = per_doc_hits.sum() / max(1.0, per_doc_n.sum())
    low, high = np.percentile(values, [2.5, 97.5])
    return float(recall), float(low), float(high)


def paired(
    hits: list[int], reference: list[int], docs: list[int], n_docs: int, seed: int = SEED
) -> tuple[float, float, float]:
    """Recall minus the reference chunker's on the same queries, with a 95% interval
    from resampling documents (the same resamples for both, so document difficulty cancels)."""
    diff = np.zeros(n_docs)
    count = np.zeros(n_docs)
    for h, r, d in zip(hits, reference, docs):
        diff[d] += h - r
        count[d] += 1
    rng = np.random.default_rng(seed)
    samples = rng.integers(0, n_docs, size=(BOOTSTRAP, n_docs))
    values = diff[samples].sum(axis=1) / np.maximum(count[samples].sum(axis=1), 1)
    low, high = np.percentile(values, [2.5, 97.5])
    return float(diff.sum() / max(1.0, count.sum())), float(low), float(high)


def run(names: Sequence[str] | None, per_doc: int) -> dict[str, Any]:
    from rechunk.integrations.sentence_transformers import SentenceTransformerEmbedder

    names = list(CHUNKERS) if names is None else list(names)
    pairs = _report.load_revisions()
    CACHE.parent.mkdir(parents=True, exist_ok=True)
    model = SentenceTransformerEmbedder()
    embedder = rechunk.CachedEmbedder(model, rechunk.SQLiteCache(CACHE))
    t_start = time.perf_counter()
    queries = make_queries(pairs, per_doc)
    query_vectors = embedder.embed([q["query"] for q in queries])
    query_vectors /= np.linalg.norm(query_vectors, axis=1, keepdims=True)
    results = []
    for name in names:
        started = time.perf_counter()
        row = evaluate(name, CHUNKERS[name](model), pairs, queries, query_vectors, embedder)
        docs = [q["doc"] for q in queries]
        row["recall"] = bootstrap(row["hits"], docs, len(pairs))
        for key, keep in (
            ("full", lambda q: q["variant"] == "full"),
            ("trimmed", lambda q: q["variant"] == "trimmed"),
            ("en", lambda q: q["lang"] == "en"),
            ("zh", lambda q: q["lang"] == "zh"),
        ):
            picked = [(h, q["doc"]) for h, q in zip(row["hits"], queries) if keep(q)]
            row[f"recall_{key}"] = bootstrap(
                [h for h, _ in picked], [d for _, d in picked], len(pairs)
            )
        row["seconds"] = time.perf_counter() - started
        print(
            f"{name:26s} recall {row['recall'][0]:.3f} [{row['recall'][1]:.3f}, "
            f"{row['recall'][2]:.3f}]  chunks {row['chunks']}  median {row['median_tokens']}  "
            f"embedded {row['embedded_now']}  {row['seconds']:.0f} s",
            file=sys.stderr,
            flush=True,
        )
        results.append(row)
    reference = next((r for r in results if r["name"] == REFERENCE), None)
    if reference is not None:
        docs = [q["doc"] for q in queries]
        for row in results:
            row["vs_structured"] = paired(row["hits"], reference["hits"], docs, len(pairs))
    return {
        "benchmark": "retrieval",
        "machine": _report.machine(),
        "command": COMMAND,
        "model": model.model_id,
        "budget_tokens": BUDGET,
        "per_doc": per_doc,
        "pairs": len(pairs),
        "queries": len(queries),
        "query_sentences": len(queries) // 2,
        "queries_by_lang": {
            lang: sum(1 for q in queries if q["lang"] == lang) for lang in ("en", "zh")
        },
        "docs_with_queries": len({q["doc"] for q in queries}),
        "seconds_total": time.perf_counter() - t_start,
        "chunkers": results,
        "query_list": [
            {k: q[k] for k in ("pair", "lang", "variant", "query", "evidence")} for q in queries
        ],
    }


# -- report ------------------------------------------------------------------------------


def _ci(cell: Sequence[float]) -> str:
    return f"{100 * cell[0]:.1f}% [{100 * cell[1]:.1f}, {100 * cell[2]:.1f}]"


def _diff(cell: Sequence[float] | None) -> str:
    if cell is None:
        return "–"
    return f"{100 * cell[0]:+.1f} [{100 * cell[1]:+.1f}, {100 * cell[2]:+.1f}]"


def to_markdown(results: dict[str, Any], chart: str | None = "structured.png") -> str:
    rows = results["chunkers"]
    lines = [
        "## Retrieval: known-item recall per chunker (all-MiniLM-L6-v2, 1,024-token context)",
        "",
        f"Machine: {results['machine']}. Reproduce: `{results['command']}` (whole run "
        f"{results['seconds_total']:.0f} s with the embedding cache as it was; raw numbers and the "
        "query list in `benchmarks/results/retrieval.json`).",
        "",
        f"Queries: {results['query_sentences']} sentences from regions the revision changed in the new "
        f"version of {results['docs_with_queries']} of the {results['pairs']} dev documents (at most "
        f"{results['per_doc']} per document; en {results['queries_by_lang']['en'] // 2}, zh "
        f"{results['queries_by_lang']['zh'] // 2}), each asked as the full sentence and with its "
        "first and last few words removed. Pool: the new version of every document, chunked by "
        "the chunker under test. Chunks ranked by cosine (model "
        f"`{results['model']}`), whole chunks packed in rank order into {results['budget_tokens']} "
        "tokens; a query scores 1 if the packed chunks cover the sentence's span. Chunkers are sized "
        "for MiniLM's 254 content tokens: `rechunk.policy_for` (fixed 150, recursive 198, cdc 87/174, "
        "structured 138/198) and the anchors at a 200-token target (steadlith 87/176). Intervals: "
        "95% bootstrap over documents (2,000 resamples, seed 7); the paired column is the "
        "chunker's recall minus `rechunk-structured`'s on the same queries, resampling "
        "documents for both at once.",
        "",
        "| chunker | recall | minus structured's (paired) | full sentence | trimmed | en | zh | chunks | median tok | located spans | failed docs |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    cost = [
        "",
        "R_c at these sizes (the same chunkers on old and new versions of all 60 pairs, "
        "macro-averaged per language and band as in the churn section):",
        "",
        "| chunker | R_c en | R_c zh | R_c en small | R_c zh small | median tok |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        cells = [r["rc"].get(c) for c in ("en", "zh", "en/small", "zh/small")]
        cost.append(
            f"| `{r['name']}` | "
            + " | ".join("–" if v is None else f"{100 * v:.1f}%" for v in cells)
            + f" | {r['median_tokens']:g} |"
        )
    for r in rows:
        lines.append(
            f"| `{r['name']}` | {_ci(r['recall'])} | {_diff(r.get('vs_structured'))} | "
            f"{_ci(r['recall_full'])} | "
            f"{_ci(r['recall_trimmed'])} | {_ci(r['recall_en'])} | {_ci(r['recall_zh'])} | "
            f"{r['chunks']} | {r['median_tokens']:g} | {r['located']}/{r['chunks']} | "
            f"{len(r['failed_docs'])} |"
        )
    best = max(rows, key=lambda r: r["recall"][0])
    structured = next((r for r in rows if r["name"] == "rechunk-structured"), None)
    reading = [
        f"Highest recall: `{best['name']}` ({100 * best['recall'][0]:.1f}%)."
    ]
    if structured is not None:
        better = [f"`{r['name']}`" for r in rows if r.get("vs_structured", (0, 0, 0))[1] > 0]
        worse = [f"`{r['name']}`" for r in rows if r.get("vs_structured", (0, 0, 0))[2] < 0]
        reading.append(
            f"`rechunk-structured`: {100 * structured['recall'][0]:.1f}%. Paired over the same "
            "queries (document resamples), its recall is significantly above that of "
            + (", ".join(worse) if worse else "no other chunker")
            + " and significantly below that of "
            + (", ".join(better) if better else "none")
            + "; every other difference's 95% interval includes 0."
        )
    reading.append(
        "Smaller chunks pack more distinct passages into the same budget, so read recall next to "
        "the median chunk length; `located spans` counts anchor chunks whose source span was "
        "recovered (the rest are scored by text containment); a document a chunker fails on is "
        "missing from its index, so its queries score 0."
    )
    lines += ["", " ".join(reading), *cost, ""]
    if chart:
        lines += [f"![R_c by edit band and recall per chunker]({chart})", ""]
    return "\n".join(lines) + "\n"


def plot(results: dict[str, Any], path: Path = CHART) -> None:
    """R_c by edit band per policy (from the churn results) and recall with intervals."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    churn_results = json.loads(churn.RESULTS.read_text(encoding="utf-8"))
    fig, axes = plt.subplots(1, 3, figsize=(17, 4.8), gridspec_kw={"width_ratios": [1, 1, 1.1]})
    for ax, lang in zip(axes[:2], churn.LANGS):
        churn.rc_panel(ax, churn_results, lang, f"{lang}: R_c by edit band (study-scale sizes)")
    axes[0].set_ylabel("R_c, % of new tokens re-embedded")
    axes[1].legend(fontsize=7, loc="upper left")
    ax = axes[2]
    rows = results["chunkers"]
    ys = [100 * r["recall"][0] for r in rows]
    errors = [
        [100 * (r["recall"][0] - r["recall"][1]) for r in rows],
        [100 * (r["recall"][2] - r["recall"][0]) for r in rows],
    ]
    colors = ["tab:red" if r["name"] == "rechunk-structured" else "tab:blue" for r in rows]
    ax.barh(range(len(rows)), ys, xerr=errors, color=colors, alpha=0.8, capsize=3)
    ax.set_yticks(range(len(rows)), [r["name"] for r in rows], fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel("recall, % (95% bootstrap interval over documents)")
    ax.set_title(f"known-item recall, MiniLM sizes, {results['budget_tokens']}-token context")
    ax.grid(axis="x", alpha=0.3)
    low = min(100 * r["recall"][1] for r in rows)
    ax.set_xlim(max(0, low - 10), 100)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--only", nargs="+", choices=list(CHUNKERS), metavar="NAME", help="these chunkers; write nothing"
    )
    parser.add_argument(
        "--max-queries",
        type=int,
        default=MAX_QUERIES,
        help=f"sentences per document (default {MAX_QUERIES})",
    )
    args = parser.parse_args(argv)
    results = run(args.only, args.max_queries)
    if args.only:
        print(to_markdown(results, chart=None))
        return 0
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(results, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    plot(results)
    _report.write_section("retrieval", to_markdown(results))
    print(f"wrote {RESULTS}, {CHART} and the retrieval section of {_report.DOCS}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
