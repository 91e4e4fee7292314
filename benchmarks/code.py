"""Code benchmark: R_c of the code policy and the code splitters on real commits.

On the source-code revision pairs of ``../shared/revisions/code-dev.jsonl`` (60 pairs
of one file each, in Python, JavaScript, Go, Rust, Java and C), every splitter is
length-matched twice: re-sized until the median of its chunks (all old and new
versions, all-MiniLM-L6-v2 tokens) is as close as its size parameter allows to 150
and then to 300 tokens. At each size it reports:

* R_c = ``rechunk.recompute_fraction(old_chunks, new_chunks)`` per pair, averaged over
  pairs overall, per language and per edit band, with paired bootstrap intervals of
  each splitter's difference from the code policy;
* drift: the tokens of new chunks lying wholly before the first change or wholly
  after the last change that have no byte-identical old chunk (unchanged text
  re-embedded only because a boundary moved), over all new tokens; and the same
  tokens over the tokens lying wholly before / after. Of the drift, the *held* part:
  text that lay in an old chunk spanning the first or the last change (the edit
  changed that input, so no chunking of the new version could have kept the text's
  vector; it counts as drift when the new version cuts at the change). The rest is
  drift a boundary choice could have avoided;
* whether the chunks tile the file byte for byte (their strings, joined, give it back);
* chunking speed (MB/s of UTF-8 input, the fastest of ``--repeat`` cold passes with a
  fresh splitter object and a fresh tokenizer copy);
* the share of chunks over MiniLM's 254 content tokens (they would be truncated).

Anchors: LangChain ``RecursiveCharacterTextSplitter.from_language`` and with its
default separators, semantic-text-splitter ``CodeSplitter`` (with the grammar
wheels), LlamaIndex ``CodeSplitter`` (token mode, with a parser built from the
grammar wheels). chonkie's ``CodeChunker`` and CocoIndex are reported as not run,
with the reason. Every chunk string goes through ``rechunk.embedding_input`` and is
counted with the same tokenizer, so only the boundaries differ.

    python benchmarks/code.py                    # full run; writes docs + results
    python benchmarks/code.py --only rechunk-code  # print the section, write nothing
    python benchmarks/code.py --sensitivity      # the code policy near its matched sizes
    python benchmarks/code.py --grid             # the ideal grid's expected R_c (a reference)
    python benchmarks/code.py --fallback         # the no-grammar fallback's chunk size
"""

from __future__ import annotations

import argparse
import bisect
import difflib
import json
import os
import random
import re
import statistics
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import rechunk
from rechunk import Chunk
from rechunk.chunkers import code_chunker_for
from rechunk.chunkers.code_languages import LANGUAGES
from rechunk.chunking.tokens import HFTokenCounter, default_tokenizer_path, resolve_tokenizer

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _report

PAIRS_PATH = _report.ROOT.parent / "shared" / "revisions" / "code-dev.jsonl"
RESULTS = Path(__file__).resolve().parent / "results" / "code.json"
COMMAND = "python benchmarks/code.py"
#: the order tables show languages in (the code policy's)
LANGS = tuple(name for name in LANGUAGES if name != "tsx")
BANDS = ("small", "medium", "large", "extreme")
TARGETS = (150, 300)
WINDOW = 254  # MiniLM's content tokens: longer chunks are truncated
REPEAT = 2
BOOTSTRAP = 2000
SEED = 7
#: the code policy's min_tokens as a share of its max_tokens (the one size knob scales both)
CODE_MIN_SHARE = 0.6
REFERENCE = "rechunk-code"

# -- tokenizer ---------------------------------------------------------------------------


def _fresh_counter() -> HFTokenCounter:
    """A new counter over all-MiniLM-L6-v2's tokenizer.json (empty memo: a cold pass)."""
    from tokenizers import Tokenizer

    return HFTokenCounter(Tokenizer.from_file(str(default_tokenizer_path())))


def _fresh_tokenizer() -> Any:
    """A ``tokenizers.Tokenizer`` copy with truncation and padding off."""
    return _fresh_counter().tokenizer


def _grammar(lang: str) -> Any:
    """The tree-sitter language capsule of a grammar wheel (what the anchors take)."""
    import importlib

    spec = LANGUAGES[lang]
    return getattr(importlib.import_module(spec.module), spec.function)()


# -- splitters ---------------------------------------------------------------------------
#
# A splitter factory takes the size parameter and returns ``split(text, lang)``, which
# gives either rechunk Chunks (with spans) or the splitter's own strings.

Split = Callable[[str, str], Sequence[Any]]


def _per_language(make: Callable[[str], Callable[[str], Sequence[Any]]]) -> Split:
    """One splitter object per language, built at first use (inside the timed pass)."""
    made: dict[str, Callable[[str], Sequence[Any]]] = {}

    def split(text: str, lang: str) -> Sequence[Any]:
        fn = made.get(lang)
        if fn is None:
            fn = made[lang] = make(lang)
        return fn(text)

    return split


def _rechunk_code(size: int) -> Split:
    """What ``rechunk sync`` gives a source file: the code policy of its language, or the
    recursive policy (``max_tokens`` its target) for a language with no grammar here."""
    counter = _fresh_counter()
    low = max(1, round(size * CODE_MIN_SHARE))

    def make(lang: str) -> Callable[[str], Sequence[Any]]:
        chunker, _ = code_chunker_for(
            lang,
            min_tokens=low,
            max_tokens=size,
            tokenizer=counter,
            hard_max_tokens=max(512, size),
        )
        return chunker.chunk

    return _per_language(make)


def _rechunk_structured(size: int) -> Split:
    chunker = rechunk.StructuredChunker(
        min_tokens=max(1, round(size * 0.69)),
        max_tokens=size,
        tokenizer=_fresh_counter(),
        hard_max_tokens=max(512, size),
    )
    return lambda text, lang: chunker.chunk(text)


def _token_length() -> Callable[[str], int]:
    tok = _fresh_tokenizer()

    def length(text: str) -> int:
        return len(tok.encode(text, add_special_tokens=False).ids)

    return length


_LANGCHAIN = {
    "python": "PYTHON",
    "javascript": "JS",
    "go": "GO",
    "rust": "RUST",
    "java": "JAVA",
    "c": "C",
    "typescript": "TS",
    "cpp": "CPP",
    "csharp": "CSHARP",
    "kotlin": "KOTLIN",
    "swift": "SWIFT",
    "scala": "SCALA",
    "php": "PHP",
    "ruby": "RUBY",
    "lua": "LUA",
}


def _langchain_language(size: int) -> Split:
    from langchain_text_splitters import Language, RecursiveCharacterTextSplitter

    length = _token_length()

    def make(lang: str) -> Callable[[str], Sequence[Any]]:
        splitter = RecursiveCharacterTextSplitter.from_language(
            Language[_LANGCHAIN[lang]], chunk_size=size, chunk_overlap=0, length_function=length
        )
        return splitter.split_text

    return _per_language(make)


def _langchain_default(size: int) -> Split:
    from langchain_text_splitters import RecursiveCharacterTextSplitter

    splitter = RecursiveCharacterTextSplitter(
        chunk_size=size, chunk_overlap=0, length_function=_token_length()
    )
    return lambda text, lang: splitter.split_text(text)


def _text_splitter(size: int) -> Split:
    from semantic_text_splitter import CodeSplitter

    tok = _fresh_tokenizer()

    def make(lang: str) -> Callable[[str], Sequence[Any]]:
        splitter = CodeSplitter.from_huggingface_tokenizer(_grammar(lang), tok, size)
        return splitter.chunks

    return _per_language(make)


def _llamaindex(size: int) -> Split:
    from llama_index.core.node_parser import CodeSplitter
    from tree_sitter import Language, Parser

    tok = _fresh_tokenizer()

    def ids(text: str) -> list[int]:
        out: list[int] = tok.encode(text, add_special_tokens=False).ids
        return out

    def make(lang: str) -> Callable[[str], Sequence[Any]]:
        splitter = CodeSplitter(
            language=lang,
            count_mode="token",
            max_tokens=size,
            tokenizer=ids,
            parser=Parser(Language(_grammar(lang))),
        )
        return splitter.split_text

    return _per_language(make)


#: name -> (factory of a split function from a size, what the size parameter is)
SPLITTERS: dict[str, tuple[Callable[[int], Split], str]] = {
    REFERENCE: (_rechunk_code, f"max_tokens (min_tokens = {CODE_MIN_SHARE:g} of it)"),
    "rechunk-structured": (_rechunk_structured, "max_tokens (min_tokens = 0.69 of it)"),
    "langchain-from-language": (_langchain_language, "chunk_size (MiniLM tokens)"),
    "langchain-default": (_langchain_default, "chunk_size (MiniLM tokens)"),
    "text-splitter-code": (_text_splitter, "capacity (MiniLM tokens)"),
    "llamaindex-code": (_llamaindex, "max_tokens (count_mode='token')"),
}
#: anchors of issue #38 that are not run here, and why
NOT_RUN = {
    "chonkie-code": (
        "chonkie 1.7's CodeChunker imports tree-sitter-language-pack 1.x and calls its "
        "download_all() (grammars fetched at first use), which cannot run offline here; "
        "the grammar wheels cannot be handed to it"
    ),
    "cocoindex-recursive": "CocoIndex is not installed in this environment",
}
ANCHORS = [n for n in SPLITTERS if not n.startswith("rechunk-")]


# -- measuring ---------------------------------------------------------------------------


def _error(exc: BaseException) -> str:
    message = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {message[:200]}"


def _as_chunks(raw: Sequence[Any], counter: Any) -> tuple[list[Chunk], list[str] | None]:
    """rechunk Chunks as they are; strings as embedding inputs counted by ``counter``."""
    if raw and isinstance(raw[0], Chunk):
        return list(raw), None
    strings = [str(s) for s in raw]
    inputs = [s for s in map(rechunk.embedding_input, strings) if s]
    counts = counter.count_many(inputs)
    return [Chunk(-1, -1, s, n) for s, n in zip(inputs, counts)], strings


def _chunk_all(
    name: str, size: int, pairs: list[dict[str, Any]]
) -> tuple[list[list[Chunk] | None], list[bool | None], float, list[str | None]]:
    """Chunk every old and new text once with a fresh splitter: chunks (None on failure),
    lossless tiling per text, seconds of the splitter's own calls, errors."""
    factory, _ = SPLITTERS[name]
    counter = resolve_tokenizer(None)
    split = factory(size)
    outputs: list[list[Chunk] | None] = []
    tiles: list[bool | None] = []
    errors: list[str | None] = []
    seconds = 0.0
    for pair in pairs:
        for version in ("old", "new"):
            text = pair[version]
            t0 = time.perf_counter()
            try:
                raw = split(text, pair["lang"])
            except Exception as exc:  # an anchor that raises on a file: counted, not fatal
                seconds += time.perf_counter() - t0
                outputs.append(None)
                tiles.append(None)
                errors.append(_error(exc))
                continue
            seconds += time.perf_counter() - t0
            chunks, strings = _as_chunks(raw, counter)
            if strings is None:
                bounds = [c.start for c in chunks] + [chunks[-1].end if chunks else 0]
                ok = bool(chunks) and bounds[0] == 0 and bounds[-1] == len(text)
                ok = ok and all(a.end == b.start for a, b in zip(chunks, chunks[1:]))
            else:
                ok = "".join(strings) == text
            outputs.append(chunks)
            tiles.append(ok)
            errors.append(None)
    return outputs, tiles, seconds, errors


def _median(outputs: list[list[Chunk] | None]) -> float:
    tokens = [c.tokens for out in outputs if out for c in out]
    return float(statistics.median(tokens)) if tokens else 0.0


def _match(name: str, target: int, pairs: list[dict[str, Any]]) -> tuple[int, dict[int, float]]:
    """The size whose median chunk is closest to ``target``, and every size tried with its
    median. Proportional steps first (the median grows about linearly with the size), then
    bisection between the closest sizes below and above the target."""
    tried: dict[int, float] = {}

    def median(size: int) -> float:
        if size not in tried:
            tried[size] = _median(_chunk_all(name, size, pairs)[0])
        return tried[size]

    size = round(1.3 * target)
    for _ in range(4):
        got = median(size)
        step = max(1, round(size * target / got)) if got else size * 2
        if step == size:
            break
        size = step
    for _ in range(12):
        below = [s for s, m in tried.items() if m < target]
        above = [s for s, m in tried.items() if m >= target]
        if not above:
            median(max(tried) * 2)
            continue
        if not below:
            median(max(1, min(tried) // 2))
            continue
        lo, hi = max(below), min(above)
        if hi - lo <= 1 or lo > hi:
            break
        median((lo + hi) // 2)
    best = min(tried, key=lambda s: (abs(tried[s] - target), s))
    return best, tried


def _common_ends(old: str, new: str) -> tuple[int, int]:
    """Lengths of the common prefix and the common suffix (not overlapping it)."""
    limit = min(len(old), len(new))
    prefix = 0
    step = 4096
    while prefix < limit:
        end = min(limit, prefix + step)
        if old[prefix:end] == new[prefix:end]:
            prefix = end
            continue
        while old[prefix] == new[prefix]:
            prefix += 1
        break
    suffix = 0
    while suffix < limit - prefix and old[-1 - suffix] == new[-1 - suffix]:
        suffix += 1
    return prefix, suffix


def _located(text: str, chunks: list[Chunk]) -> Iterator[tuple[Chunk, int]]:
    """Each distinct chunk once, with where it lies in ``text`` (-1: not found), the chunks
    located in order, so every splitter is measured the same way whether or not it
    reports offsets."""
    seen: set[str] = set()
    cursor = 0
    for chunk in chunks:
        at = text.find(chunk.text, cursor)
        if at >= 0:
            cursor = at + len(chunk.text)
        if chunk.text not in seen:
            seen.add(chunk.text)
            yield chunk, at


def _drift(old_text: str, new_text: str, old: list[Chunk], new: list[Chunk]) -> dict[str, float]:
    """Tokens of distinct new inputs lying wholly before the first change / after the last
    change of the (embedding-input) text, of those the ones with no identical old input
    (moved), and of those the share, by characters, that lay in an old input spanning
    that change (held: the edit changed that input, so its text was re-embedded whatever
    the new boundaries).

    Chunks are located in the version's embedding input (:func:`_located`).
    """
    before_text = rechunk.embedding_input(old_text)
    after_text = rechunk.embedding_input(new_text)
    prefix, suffix = _common_ends(before_text, after_text)
    tail = len(after_text) - suffix
    old_tail = len(before_text) - suffix
    shift = old_tail - tail  # from an offset after the last change to the old text's
    olds = {c.text for c in old}
    # old inputs spanning the first change / the last change, as (start, end) in the old text
    spans = [(at, at + len(c.text)) for c, at in _located(before_text, old) if at >= 0]
    first = [(s, e) for s, e in spans if s < prefix < e]
    last = [(s, e) for s, e in spans if s < old_tail < e]

    def held(start: int, end: int, spanning: list[tuple[int, int]]) -> float:
        inside = sum(max(0, min(e, end) - max(s, start)) for s, e in spanning)
        return min(1.0, inside / (end - start)) if end > start else 0.0

    out: dict[str, float] = dict.fromkeys(
        ("total", "before", "before_moved", "before_held", "after", "after_moved", "after_held"),
        0,
    )
    for chunk, at in _located(after_text, new):
        out["total"] += chunk.tokens
        if at < 0:
            continue
        end = at + len(chunk.text)
        moved = chunk.text not in olds
        if end <= prefix:
            out["before"] += chunk.tokens
            if moved:
                out["before_moved"] += chunk.tokens
                out["before_held"] += chunk.tokens * held(at, end, first)
        elif at >= tail:
            out["after"] += chunk.tokens
            if moved:
                out["after_moved"] += chunk.tokens
                out["after_held"] += chunk.tokens * held(at + shift, end + shift, last)
    return out


def _changed_spans(old_text: str, new_text: str) -> list[tuple[int, int]]:
    """The lines of ``new_text`` that a line diff from ``old_text`` marks changed, as
    character spans; a deletion is an empty span where the deleted lines were."""
    old_lines = old_text.splitlines(keepends=True)
    new_lines = new_text.splitlines(keepends=True)
    starts = [0]
    for line in new_lines:
        starts.append(starts[-1] + len(line))
    opcodes = difflib.SequenceMatcher(None, old_lines, new_lines, autojunk=False).get_opcodes()
    return [(starts[j1], starts[j2]) for tag, _, _, j1, j2 in opcodes if tag != "equal"]


def _holding(old_text: str, new_text: str, old: list[Chunk], new: list[Chunk]) -> dict[str, int]:
    """Tokens of distinct new inputs with no identical old input, split by whether the
    input holds a changed line (or the place of deleted lines) of the new version: those
    are re-embedded whatever the boundaries, the rest only because a boundary moved.

    Chunks are located in the new version's embedding input (:func:`_located`).
    """
    after_text = rechunk.embedding_input(new_text)
    spans = _changed_spans(rechunk.embedding_input(old_text), after_text)
    olds = {c.text for c in old}
    out = {"holding": 0, "elsewhere": 0}
    for chunk, at in _located(after_text, new):
        if chunk.text in olds:
            continue
        end = at + len(chunk.text)
        holds = at < 0 or any(
            (at < e and s < end) if e > s else (at <= s <= end) for s, e in spans
        )
        out["holding" if holds else "elsewhere"] += chunk.tokens
    return out


def _grid_costs(
    old_text: str, new_text: str, sizes: Sequence[int], tokenizer: Any
) -> list[float]:
    """The expected R_c of an ideal chunker on one pair, for each of ``sizes``: chunks of
    exactly that many tokens at an offset drawn at random, whose boundaries neither move
    with the edit nor know where it is. A chunk is new when it holds a changed line of
    the new version (or the place of deleted lines), so the expected tokens re-embedded
    are the measure of the union of ``[start - size, end]`` over the changed spans (in
    tokens, within the file). The diff and the tokens are computed once for all sizes.
    """
    text = rechunk.embedding_input(new_text)
    spans = _changed_spans(rechunk.embedding_input(old_text), text)
    starts = [a for a, _ in tokenizer.encode(text, add_special_tokens=False).offsets]
    total = len(starts)
    if not total:
        return [0.0 for _ in sizes]
    bounds = [
        (bisect.bisect_left(starts, s), bisect.bisect_left(starts, max(e, s + 1)))
        for s, e in spans
    ]
    costs = []
    for size in sizes:
        covered, until = 0, 0
        for low, high in sorted((max(0, lo - size), hi) for lo, hi in bounds):
            low = max(low, until)
            if high > low:
                covered += high - low
                until = high
        costs.append(min(total, covered) / total)
    return costs


def grid_reference(pairs: list[dict[str, Any]], targets: Sequence[int]) -> dict[str, Any]:
    """Per target: the ideal grid's expected R_c (:func:`_grid_costs`) over all pairs, per
    band and per language, as the splitters' R_c is summarised: what chunk size alone
    costs, beside which a splitter's boundaries can be judged."""
    tokenizer = _fresh_tokenizer()
    costs = [_grid_costs(p["old"], p["new"], targets, tokenizer) for p in pairs]
    return {
        str(target): _summary_rc(
            [{"lang": p["lang"], "band": p["band"], "rc": c[k]} for p, c in zip(pairs, costs)]
        )
        for k, target in enumerate(targets)
    }


def fallback_reference(pairs: list[dict[str, Any]], sizes: dict[str, Any]) -> dict[str, Any]:
    """Per target: the median chunk of these files under the recursive policy a language
    without a grammar gets (:func:`rechunk.chunkers.code_chunker_for`) at the code policy's
    matched sizes, its target halfway between ``min_tokens`` and ``max_tokens`` (now) and
    ``max_tokens`` (before), beside the code policy's median: whether a SQL file is cut
    about as finely as the code beside it."""
    counter = _fresh_counter()
    texts = [p[v] for p in pairs for v in ("old", "new")]
    out: dict[str, Any] = {}
    for target, block in sizes.items():
        ref = next((r for r in block["splitters"] if r["name"] == REFERENCE), None)
        if not ref or not ref.get("size"):
            continue
        size = int(ref["size"])
        low = max(1, round(size * CODE_MIN_SHARE))
        medians = {}
        for rule, fallback_target in (("now", None), ("before", size)):
            chunker, _ = code_chunker_for(
                "no-grammar.sql",
                min_tokens=low,
                max_tokens=size,
                tokenizer=counter,
                hard_max_tokens=max(512, size),
                fallback_target_tokens=fallback_target,
            )
            medians[rule] = statistics.median(c.tokens for t in texts for c in chunker.chunk(t))
        out[target] = {"code_median": ref["median_tokens"], "target": (low + size) // 2, **medians}
    return out


#: a year, the words of a copyright or licence notice, and a comment line
_YEAR = re.compile(r"\b(19|20)\d\d\b")
_NOTICE = re.compile(r"copyright|licen[cs]e|spdx|\(c\)|\u00a9", re.I)
_COMMENT = re.compile(r"\s*(#|//|/\*|\*|--|;|<!--)")


def year_bumped(text: str) -> str | None:
    """``text`` with the first year on a notice line (``Copyright 2024 ...``) of its
    leading comments one higher: what every January's commit does to many files. None
    when its leading comments have no such line (a year in code is never touched).
    """
    at = 0
    for line in text.splitlines(keepends=True):
        if line.strip() and not _COMMENT.match(line):
            return None  # the leading comments ended
        year = _YEAR.search(line)
        if year and _NOTICE.search(line):
            start, end = at + year.start(), at + year.end()
            return f"{text[:start]}{int(year.group()) + 1}{text[end:]}"
        at += len(line)
    return None


def _year_bump(
    name: str, size: int, pairs: list[dict[str, Any]], outputs: list[list[Chunk] | None]
) -> dict[str, int]:
    """Tokens re-embedded when the notice's year is bumped in each old text that has one
    (a synthetic edit of real files): files, tokens re-embedded, tokens of the new texts."""
    split = SPLITTERS[name][0](size)
    counter = resolve_tokenizer(None)
    out = {"files": 0, "tokens": 0, "of": 0}
    for k, pair in enumerate(pairs):
        bumped, old = year_bumped(pair["old"]), outputs[2 * k]
        if bumped is None or old is None:
            continue
        try:
            new, _ = _as_chunks(split(bumped, pair["lang"]), counter)
        except Exception:  # an anchor that fails on a file: left out, as in the R_c
            continue
        olds = {c.text for c in old}
        out["files"] += 1
        out["tokens"] += sum(c.tokens for c in new if c.text not in olds)
        out["of"] += sum(c.tokens for c in new)
    return out


def _measure(name: str, size: int, pairs: list[dict[str, Any]], repeat: int) -> dict[str, Any]:
    runs = [_chunk_all(name, size, pairs) for _ in range(repeat)]
    outputs, tiles, _, errors = runs[0]
    texts = [p[v] for p in pairs for v in ("old", "new")]
    done = [out is not None for out in outputs]
    nbytes = sum(len(t.encode("utf-8")) for t, ok in zip(texts, done) if ok)
    best = min(seconds for _, _, seconds, _ in runs)
    deterministic = all(
        [None if o is None else [c.text for c in o] for o in run[0]]
        == [None if o is None else [c.text for c in o] for o in outputs]
        for run in runs[1:]
    )
    rows: list[dict[str, Any]] = []
    for k, pair in enumerate(pairs):
        old, new = outputs[2 * k], outputs[2 * k + 1]
        row: dict[str, Any] = {
            "id": pair["id"],
            "lang": pair["lang"],
            "band": pair["band"],
            "edit_fraction": pair["edit_fraction"],
        }
        if old is None or new is None:
            row["error"] = errors[2 * k] or errors[2 * k + 1]
        else:
            row["rc"] = rechunk.recompute_fraction(old, new)
            row["control"] = rechunk.recompute_fraction(old, old)
            row["drift"] = _drift(pair["old"], pair["new"], old, new)
            row["holding"] = _holding(pair["old"], pair["new"], old, new)
        rows.append(row)
    tokens = [c.tokens for out in outputs if out for c in out]
    return {
        "name": name,
        "size": size,
        "median_tokens": statistics.median(tokens) if tokens else None,
        "token_weighted_mean": sum(t * t for t in tokens) / sum(tokens) if tokens else None,
        "chunks": len(tokens),
        "max_tokens": max(tokens) if tokens else None,
        "over_window": sum(1 for t in tokens if t > WINDOW) / len(tokens) if tokens else None,
        "tiles": all(t for t in tiles if t is not None) if any(t is not None for t in tiles) else None,
        "tiling_texts": sum(1 for t in tiles if t),
        "texts": len(texts),
        "failed_pairs": [r["id"] for r in rows if "error" in r],
        "first_error": next((r["error"] for r in rows if "error" in r), None),
        "deterministic": deterministic,
        "mbps": nbytes / 1e6 / best if best > 0 else None,
        "seconds": [run[2] for run in runs],
        "pairs": rows,
        "year_bump": _year_bump(name, size, pairs, outputs),
        **_summary(rows),
    }


def _mean(values: list[float]) -> float | None:
    return statistics.fmean(values) if values else None


def _present(rows: list[dict[str, Any]]) -> list[str]:
    """The languages ``rows`` (pairs or their results) are in: those of :data:`LANGS` in
    its order, then any other (a language with no grammar here) by name."""
    found = {r["lang"] for r in rows}
    return [lang for lang in LANGS if lang in found] + sorted(found - set(LANGS))


def _summary_rc(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Mean R_c of the pairs measured: all, per language, per band, small edits per language."""
    ok = [r for r in rows if "rc" in r]
    cells: dict[str, Any] = {"all": _mean([r["rc"] for r in ok])}
    for lang in _present(rows):
        cells[lang] = _mean([r["rc"] for r in ok if r["lang"] == lang])
    for band in BANDS:
        cells[band] = _mean([r["rc"] for r in ok if r["band"] == band])
    for lang in _present(rows):
        cells[f"{lang}/small"] = _mean(
            [r["rc"] for r in ok if r["lang"] == lang and r["band"] == "small"]
        )
    return cells


def _summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    ok = [r for r in rows if "rc" in r]
    cells = _summary_rc(rows)

    def share(part: str, whole: str) -> float | None:
        total = sum(r["drift"][whole] for r in ok)
        return sum(r["drift"][part] for r in ok) / total if total else None

    drift = {
        # the target's measure: moved tokens before + after, over all new tokens (mean of pairs)
        "moved_of_new": _mean(
            [
                (r["drift"]["before_moved"] + r["drift"]["after_moved"]) / r["drift"]["total"]
                for r in ok
                if r["drift"]["total"]
            ]
        ),
        # of it, text that lay in an old input spanning the change (see _drift)
        "held_of_new": _mean(
            [
                (r["drift"]["before_held"] + r["drift"]["after_held"]) / r["drift"]["total"]
                for r in ok
                if r["drift"]["total"]
            ]
        ),
        "small_moved_of_new": _mean(
            [
                (r["drift"]["before_moved"] + r["drift"]["after_moved"]) / r["drift"]["total"]
                for r in ok
                if r["drift"]["total"] and r["band"] == "small"
            ]
        ),
        # the issue's framing: moved tokens over the tokens lying there (pooled over pairs)
        "before_share": share("before_moved", "before"),
        "after_share": share("after_moved", "after"),
    }
    split: dict[str, float | None] = {}
    for part in ("holding", "elsewhere"):
        for band in ("all", "small"):
            split[f"{part}/{band}"] = _mean(
                [
                    r["holding"][part] / r["drift"]["total"]
                    for r in ok
                    if r["drift"]["total"] and band in ("all", r["band"])
                ]
            )
    return {
        "rc": cells,
        "drift": drift,
        # R_c in inputs holding a changed line / elsewhere (mean of pairs)
        "rc_split": split,
        "control_max": max((r["control"] for r in ok), default=None),
    }


def _paired(results: list[dict[str, Any]], reference: str) -> dict[str, Any]:
    """Each splitter's R_c minus the reference's, per pair, with 95% bootstrap intervals
    over pairs (resampled with replacement), overall, per language and per band."""
    by_name = {r["name"]: r for r in results}
    ref = {row["id"]: row for row in by_name[reference]["pairs"] if "rc" in row}
    rng = random.Random(SEED)
    out: dict[str, Any] = {}
    for name, r in by_name.items():
        if name == reference:
            continue
        cells: dict[str, Any] = {}
        for cell in ("all", *_present(r["pairs"]), *BANDS):
            diffs = [
                row["rc"] - ref[row["id"]]["rc"]
                for row in r["pairs"]
                if "rc" in row
                and row["id"] in ref
                and cell in ("all", row["lang"], row["band"])
            ]
            if not diffs:
                cells[cell] = None
                continue
            means = sorted(
                statistics.fmean(rng.choices(diffs, k=len(diffs))) for _ in range(BOOTSTRAP)
            )
            cells[cell] = {
                "n": len(diffs),
                "diff": statistics.fmean(diffs),
                "low": means[int(0.025 * BOOTSTRAP)],
                "high": means[int(0.975 * BOOTSTRAP) - 1],
            }
        out[name] = cells
    return out


def load_pairs(path: Path = PAIRS_PATH) -> list[dict[str, Any]]:
    if not path.exists():
        raise SystemExit(f"code revision pairs not found at {path} (the shared/ folder is absent)")
    with path.open(encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


def run(
    names: Sequence[str] | None = None,
    pairs: list[dict[str, Any]] | None = None,
    repeat: int = REPEAT,
    targets: Sequence[int] = TARGETS,
    path: str = "../shared/revisions/code-dev.jsonl",
) -> dict[str, Any]:
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    names = list(SPLITTERS) if names is None else list(names)
    pairs = load_pairs() if pairs is None else pairs
    load_before = os.getloadavg()[0]
    t0 = time.perf_counter()
    sizes: dict[str, Any] = {}
    for target in targets:
        results: list[dict[str, Any]] = []
        for name in names:
            try:
                size, tried = _match(name, target, pairs)
            except Exception as exc:
                results.append({"name": name, "available": False, "reason": _error(exc)})
                continue
            result = _measure(name, size, pairs, repeat)
            if result["median_tokens"] is None:  # it failed on every file (no such language)
                results.append({"name": name, "available": False, "reason": result["first_error"]})
                continue
            result["available"] = True
            result["tried"] = {str(k): v for k, v in sorted(tried.items())}
            results.append(result)
            print(
                f"{target}: {name} size {size} median {result['median_tokens']} "
                f"R_c {100 * (result['rc']['all'] or 0):.1f}",
                file=sys.stderr,
            )
        ok = [r for r in results if r["available"]]
        anchors = [r for r in ok if r["name"] in ANCHORS and r["rc"]["all"] is not None]
        best = min(anchors, key=lambda r: r["rc"]["all"])["name"] if anchors else None
        sizes[str(target)] = {
            "splitters": results,
            "best_anchor": best,
            "paired": _paired(ok, REFERENCE) if any(r["name"] == REFERENCE for r in ok) else {},
        }
    return {
        "benchmark": "code",
        "machine": _report.machine(),
        "command": COMMAND,
        "dataset": {
            "path": path,
            "pairs": len(pairs),
            "bytes": sum(len(p[k].encode("utf-8")) for p in pairs for k in ("old", "new")),
            "n": {
                key: sum(1 for p in pairs if key in (p["lang"], p["band"]))
                for key in (*_present(pairs), *BANDS)
            },
        },
        "tokenizer": f"all-MiniLM-L6-v2 tokenizer.json ({resolve_tokenizer(None).identity}), "
        "no special tokens",
        "repeat": repeat,
        "targets": list(targets),
        "not_run": NOT_RUN,
        "code_min_share": CODE_MIN_SHARE,
        "seconds_total": time.perf_counter() - t0,
        "load_average_1min": {"before": load_before, "after": os.getloadavg()[0]},
        "sizes": sizes,
        "grid": grid_reference(pairs, targets),
        "fallback": fallback_reference(pairs, sizes),
    }


def sensitivity(saved: dict[str, Any], pairs: list[dict[str, Any]] | None = None) -> None:
    """Measure the code policy at every 3rd size within 5% of its matched size (one pass
    each, no timing) and store, per target, the median, R_c and drift at each size: how much
    the one-size figures move with the size. Written into ``saved`` in place."""
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    pairs = load_pairs() if pairs is None else pairs
    load_before = os.getloadavg()[0]
    for block in saved["sizes"].values():
        ref = next((r for r in block["splitters"] if r["name"] == REFERENCE), None)
        if ref is None or not ref.get("available"):
            continue
        matched = ref["size"]
        rows = []
        for size in range(round(0.95 * matched), round(1.05 * matched) + 1, 3):
            r = _measure(REFERENCE, size, pairs, 1)
            rows.append(
                {
                    "size": size,
                    "median_tokens": r["median_tokens"],
                    "rc": r["rc"]["all"],
                    "small": r["rc"]["small"],
                    "drift": r["drift"]["moved_of_new"],
                }
            )
        block["sensitivity"] = {
            "sizes": rows,
            "load_average_1min": {"before": load_before, "after": os.getloadavg()[0]},
        }


def _year_line(target: str, block: dict[str, Any]) -> str | None:
    """The year-bump edit (see :func:`year_bumped`) per splitter, or None if not measured."""
    cells = [(r["name"], r["year_bump"]) for r in block["splitters"] if r.get("year_bump")]
    if not cells or not cells[0][1]["files"]:
        return None
    files = cells[0][1]["files"]
    shares = ", ".join(
        f"`{name}` {c['tokens'] / c['files']:.0f} ({100 * c['tokens'] / c['of']:.1f}%)"
        for name, c in cells
        if c["files"] and c["of"]
    )
    return (
        f"- A year bumped in the copyright or licence notice of each old file that has one "
        f"({files} files; a synthetic edit, as every January's commit makes), at {target}: "
        f"tokens re-embedded a file (and % of those files' tokens): {shares}."
    )


def _sensitivity_line(target: str, block: dict[str, Any]) -> str | None:
    sens = block.get("sensitivity")
    if not sens or not sens["sizes"]:
        return None
    rows = sens["sizes"]

    def span(key: str, digits: int = 1) -> str:
        values = [r[key] for r in rows if r[key] is not None]
        return f"{_pct(min(values), digits)}-{_pct(max(values), digits)}%"

    load = sens["load_average_1min"]
    return (
        f"- Sensitivity at {target} (dev): `{REFERENCE}` at {len(rows)} sizes from "
        f"{rows[0]['size']} to {rows[-1]['size']} (medians {rows[0]['median_tokens']:g}-"
        f"{rows[-1]['median_tokens']:g}): drift {span('drift', 2)}, R_c {span('rc')}, small "
        f"edits {span('small')} (one pass each; load {load['before']:.1f}/{load['after']:.1f}). "
        "A figure at one matched size moves by this much with the size alone."
    )


# -- report ------------------------------------------------------------------------------


def _pct(value: float | None, digits: int = 1) -> str:
    return "–" if value is None else f"{100 * value:.{digits}f}"


def _interval(cell: dict[str, Any] | None) -> str:
    if cell is None:
        return "–"
    return f"{100 * cell['diff']:+.1f} [{100 * cell['low']:+.1f}, {100 * cell['high']:+.1f}]"


def _drift_pairs(result: dict[str, Any]) -> str:
    """Where a splitter's drift lies: how many pairs carry it, before and after the change."""
    rows = [r for r in result["pairs"] if "drift" in r]
    before = [r["drift"]["before_moved"] for r in rows if r["drift"]["before_moved"]]
    after = [r["drift"]["after_moved"] for r in rows if r["drift"]["after_moved"]]
    carrying = sum(1 for r in rows if r["drift"]["before_moved"] or r["drift"]["after_moved"])
    return (
        f"moved tokens in {carrying} of {len(rows)} pairs: before the first change in "
        f"{len(before)} ({sum(before)} tokens), after the last in {len(after)} "
        f"({sum(after)} tokens)"
    )


def _held_line(block: dict[str, Any], ref: dict[str, Any]) -> str:
    """How much of the code policy's drift is held (see _drift), beside the anchors'."""
    held = ref["drift"].get("held_of_new")
    anchors = [
        r["drift"].get("held_of_new")
        for r in block["splitters"]
        if r.get("available") and r["name"] != REFERENCE and r["name"] in ANCHORS
    ]
    if held is None or not anchors or None in anchors:
        return ""
    avoidable = ref["drift"]["moved_of_new"] - held
    return (
        f"; {_pct(held, 2)} points of it are held (the anchors' held drift: "
        f"{_pct(min(anchors), 2)}-{_pct(max(anchors), 2)}), which leaves "
        f"{_pct(avoidable, 2)}% that a boundary choice could have avoided"
    )


def _targets(results: dict[str, Any]) -> list[str]:
    """One line per target of issue #38: met or not, with the numbers."""
    lines = []
    sizes = results["sizes"]
    lowest_everywhere = []
    for target, block in sizes.items():
        ok = {r["name"]: r for r in block["splitters"] if r.get("available")}
        ref = ok.get(REFERENCE)
        if ref is None:
            continue
        lost = [
            f"{lang} ({name} {_pct(r['rc'][lang])} < {_pct(ref['rc'][lang])})"
            for lang in _present(ref["pairs"])
            for name, r in ok.items()
            if name in ANCHORS and r["rc"][lang] is not None and r["rc"][lang] < ref["rc"][lang]
        ]
        lowest_everywhere.append((target, lost))
    for target, lost in lowest_everywhere:
        lines.append(
            f"- Lowest R_c in every language at {target}: "
            + ("**met**." if not lost else "**not met**: " + "; ".join(lost) + ".")
        )
    for target, block in sizes.items():
        best = block["best_anchor"]
        cell = block["paired"].get(best, {}).get("all") if best else None
        if cell is None:
            continue
        met = cell["diff"] >= 0.03 and cell["low"] > 0
        lines.append(
            f"- Overall at least 3 points below the best anchor (`{best}`) with the interval "
            f"above zero, at {target}: {'**met**' if met else '**not met**'} "
            f"({_interval(cell)} points)."
        )
    block = sizes.get("150")
    if block:
        ref = next((r for r in block["splitters"] if r["name"] == REFERENCE), None)
        if ref and ref.get("available"):
            small = ref["rc"]["small"]
            lines.append(
                f"- Small edits at 150 at most 10%: {'**met**' if small <= 0.10 else '**not met**'} "
                f"({_pct(small)}%)."
            )
    grid = results.get("grid")
    if grid:
        lines.append(
            "- Reference, not a bound: chunks of exactly the target's size whose boundaries "
            "neither move with an edit nor know where it is would be expected to re-embed "
            + ", ".join(
                f"{_pct(cells['small'])}% on small edits and {_pct(cells['all'])}% overall at "
                f"{target}"
                for target, cells in grid.items()
            )
            + " (from each pair's line diff). A splitter of the same median does better only "
            "with cuts where edits are less likely, or with more of its text in chunks below "
            "the median."
        )
    for target, cell in results.get("fallback", {}).items():
        lines.append(
            f"- A language without a grammar here (SQL, Perl, ...) gets the recursive policy, its "
            f"target halfway between the code policy's sizes ({cell['target']} at {target}): on "
            f"these files its median chunk is {cell['now']:g} tokens against the code policy's "
            f"{cell['code_median']:g} (with `max_tokens` as its target, as before: "
            f"{cell['before']:g})."
        )
    for target, block in sizes.items():
        ref = next((r for r in block["splitters"] if r["name"] == REFERENCE), None)
        if ref and ref.get("available"):
            moved = ref["drift"]["moved_of_new"]
            lines.append(
                f"- Drift under 1% at {target}: {'**met**' if moved < 0.01 else '**not met**'} "
                f"({_pct(moved, 2)}% of new tokens; {_pct(ref['drift']['before_share'])}% of the "
                f"tokens before the first change and {_pct(ref['drift']['after_share'])}% of those "
                f"after the last; {_drift_pairs(ref)}){_held_line(block, ref)}."
            )
    for target, block in sizes.items():
        line = _year_line(target, block)
        if line:
            lines.append(line)
    for target, block in sizes.items():
        line = _sensitivity_line(target, block)
        if line:
            lines.append(line)
    for target, block in sizes.items():
        measured = [r for r in block["splitters"] if r.get("available")]
        ref = next((r for r in measured if r["name"] == REFERENCE), None)
        fastest = max(
            (r for r in measured if r["name"] in ANCHORS and r["mbps"]),
            key=lambda r: r["mbps"],
            default=None,
        )
        if ref and fastest:
            met = ref["mbps"] >= fastest["mbps"]
            lines.append(
                f"- Chunking at least as fast as the fastest anchor at {target}: "
                f"{'**met**' if met else '**not met**'} ({ref['mbps']:.2f} MB/s against "
                f"`{fastest['name']}` {fastest['mbps']:.2f})."
            )
    return lines


#: what the dev figures say about where the code policy's lead comes from
DEV_READING = (
    "The code policy's lead is on medium and large edits, where its content-chosen "
    "cuts stay put while the text around them changes (drift above), and at the head of "
    "a file, whose licence header, imports and code it always cuts apart; it does not "
    "come from smaller chunks (the chunk a random token sits in is no smaller). On small "
    "edits, which touch one or a few places, every splitter pays about the chunks those "
    "places sit in: the R_c split below each table shows how much lies in inputs holding "
    "a changed line, which no choice of boundaries avoids at a given chunk size. Where "
    "the code policy's drift comes from: between two anchors more "
    "than `max_tokens` apart its cuts are chosen left to right, so after a change the "
    "piece up to the next anchor is cut anew (drift after the last change), and a chunk "
    "before a change whose `max_tokens` reach includes it may end at a different "
    "boundary (drift before the first change); see Limits in `docs/limits.md`. The same "
    "splitters on releases of other packages, on configuration files, and in Ruby, PHP, Lua "
    "and shell: the sections after this one (sets a to e)."
)


def to_markdown(
    results: dict[str, Any],
    title: str = "Code: R_c of the code policy and the code splitters on real commits",
    results_file: str = "benchmarks/results/code.json",
    intro: str = "",
    discussion: str = DEV_READING,
) -> str:
    ds = results["dataset"]
    langs = [key for key in ds["n"] if key not in BANDS]  # in _present's order
    reading = []
    for target, block in results["sizes"].items():
        ok = {r["name"]: r for r in block["splitters"] if r.get("available")}
        ref, best = ok.get(REFERENCE), ok.get(block["best_anchor"] or "")
        if ref is None or best is None:
            continue
        reading.append(
            f"At {target}: `{REFERENCE}` {_pct(ref['rc']['all'])}% overall and "
            f"{_pct(ref['rc']['small'])}% on small edits, the best anchor `{best['name']}` "
            f"{_pct(best['rc']['all'])}% and {_pct(best['rc']['small'])}%; the chunk a random "
            f"token sits in holds {ref['token_weighted_mean']:.0f} tokens against "
            f"{best['token_weighted_mean']:.0f}, and drift is {_pct(ref['drift']['moved_of_new'], 2)}% "
            f"of new tokens against {_pct(best['drift']['moved_of_new'], 2)}%."
        )
    lines = [
        f"## {title}",
        "",
        f"Machine: {results['machine']}. Reproduce: `{results['command']}` (whole run "
        f"{results['seconds_total']:.0f} s; raw numbers in `{results_file}`). "
        "1-minute load average before/after: "
        f"{results['load_average_1min']['before']:.2f}/{results['load_average_1min']['after']:.2f}.",
        "",
        f"{ds['pairs']} revision pairs of source files from "
        + (f"`{ds['path']}`" if "/" in ds["path"] else ds["path"])
        + " "
        f"({ds['bytes'] / 1e6:.2f} MB of old+new text; "
        + ", ".join(f"{lang} {ds['n'][lang]}" for lang in langs)
        + "; bands "
        + ", ".join(f"{band} {ds['n'][band]}" for band in BANDS)
        + f"). Tokenizer for every splitter: {results['tokenizer']}. Every splitter is "
        "length-matched: its size parameter is bisected until the median of its chunks (old "
        "and new versions of all pairs) is as close to the target as the parameter allows. "
        f"The code policy's one size knob is `max_tokens`, with `min_tokens` = "
        f"{results['code_min_share']:g} of it. R_c is the mean of per-pair R_c; chunk strings "
        "go through `rechunk.embedding_input` and are counted with the same tokenizer. "
        "Not run: "
        + "; ".join(f"`{name}`: {why}" for name, why in results["not_run"].items())
        + ".",
        "",
        *([intro, ""] if intro else []),
        "### Targets of issue #38",
        "",
        *_targets(results),
        "",
        " ".join([*reading, discussion]),
        "",
    ]
    for target, block in results["sizes"].items():
        measured = [r for r in block["splitters"] if r.get("available")]
        missing = [r for r in block["splitters"] if not r.get("available")]
        best = block["best_anchor"]
        lines += [
            f"### Median chunk {target} tokens",
            "",
            "Weighted tok: the mean size of the chunk a random token sits in (sum of squared "
            "chunk sizes over the sum of sizes), about what an edit at one point re-embeds. "
            "R_c in % (mean over pairs); drift: tokens of new chunks wholly before the first "
            "or after the last change with no identical old chunk, % of new tokens (mean over "
            "pairs); held: the part of the drift whose text lay in an old chunk spanning the "
            "change (that input changed, so no chunking keeps it; it is drift when the new "
            "version cuts at the change); before / after: the drift's tokens as % of the "
            f"tokens lying there (pooled); >{WINDOW}: % of chunks MiniLM would truncate.",
            "",
            "| splitter | size | median tok | weighted tok | R_c all | small | medium | large "
            f"| extreme | drift | held | before / after | >{WINDOW} | tiles | MB/s | failed pairs |",
            "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|:---:|---:|---:|",
        ]
        for r in measured:
            rc, drift = r["rc"], r["drift"]
            failed = len(r["failed_pairs"])
            lines.append(
                f"| `{r['name']}` | {r['size']} | {r['median_tokens']:g} | "
                f"{r['token_weighted_mean']:.0f} | **{_pct(rc['all'])}** | "
                f"{_pct(rc['small'])} | {_pct(rc['medium'])} | {_pct(rc['large'])} | "
                f"{_pct(rc['extreme'])} | {_pct(drift['moved_of_new'], 2)} | "
                f"{_pct(drift.get('held_of_new'), 2)} | "
                f"{_pct(drift['before_share'])} / {_pct(drift['after_share'])} | "
                f"{_pct(r['over_window'])} | {'yes' if r['tiles'] else 'no'} | "
                f"{r['mbps']:.2f} | {failed} |"
            )
        for r in missing:
            lines.append(f"| `{r['name']}` | unavailable: {r['reason']} |" + " |" * 15)
        lines += [
            "",
            "R_c per language (%):",
            "",
            "| splitter | " + " | ".join(langs) + " |",
            "|---|" + "---:|" * len(langs),
        ]
        for r in measured:
            lines.append(
                f"| `{r['name']}` | " + " | ".join(_pct(r["rc"][lang]) for lang in langs) + " |"
            )
        lines += [
            "",
            "R_c split by where the new inputs lie (% of new tokens, mean over pairs): in "
            "inputs holding a changed line or the place of deleted lines (re-embedded whatever "
            "the boundaries; at a given chunk size, only smaller chunks around the changes "
            "lower it) and elsewhere (re-embedded only because a boundary moved):",
            "",
            "| splitter | holding a change: all | small edits | elsewhere: all | small edits |",
            "|---|---:|---:|---:|---:|",
        ]
        for r in measured:
            split = r.get("rc_split")
            if split:
                lines.append(
                    f"| `{r['name']}` | {_pct(split['holding/all'])} | "
                    f"{_pct(split['holding/small'])} | {_pct(split['elsewhere/all'])} | "
                    f"{_pct(split['elsewhere/small'])} |"
                )
        paired = block["paired"]
        if paired:
            cells = ("all", *langs, *BANDS)
            lines += [
                "",
                f"Paired differences, each splitter's R_c minus `{REFERENCE}`'s, in points, with "
                f"95% bootstrap intervals over pairs ({BOOTSTRAP} resamples, seed {SEED}); "
                f"positive: the code policy re-embeds less. Best anchor at this size: `{best}`.",
                "",
                "| splitter | " + " | ".join(cells) + " |",
                "|---|" + "---:|" * len(cells),
            ]
            for name, row in paired.items():
                lines.append(
                    f"| `{name}` | " + " | ".join(_interval(row[c]) for c in cells) + " |"
                )
        notes = []
        for r in measured:
            if r["first_error"]:
                notes.append(
                    f"`{r['name']}` failed on {', '.join(r['failed_pairs'])}: "
                    + r["first_error"].rstrip(".")
                )
            if not r["deterministic"]:
                notes.append(f"`{r['name']}` chunked some text differently in two passes")
            if r["control_max"]:
                notes.append(f"`{r['name']}` no-edit control not zero ({r['control_max']})")
        lines += ["", "Notes: " + ("; ".join(notes) if notes else "no failures; every splitter "
                  "deterministic; no-edit control exactly 0 for all") + ".", ""]
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--only", nargs="+", choices=list(SPLITTERS), help="these splitters only; write nothing")
    parser.add_argument("--repeat", type=int, default=REPEAT, help="timed passes (fastest counts)")
    parser.add_argument("--targets", nargs="+", type=int, default=list(TARGETS))
    parser.add_argument("--json", action="store_true", help="print the raw results as JSON")
    parser.add_argument(
        "--report", action="store_true", help="rewrite the docs section from the saved results"
    )
    parser.add_argument(
        "--sensitivity",
        action="store_true",
        help="measure the code policy at sizes near its matched size; add to the saved results",
    )
    parser.add_argument(
        "--grid",
        action="store_true",
        help="compute the ideal grid's expected R_c (grid_reference); add to the saved results",
    )
    parser.add_argument(
        "--fallback",
        action="store_true",
        help="measure the no-grammar fallback's chunk size (fallback_reference); add to the "
        "saved results",
    )
    args = parser.parse_args(argv)
    added = args.grid or args.sensitivity or args.fallback
    if added or args.report:  # from the saved results
        saved = json.loads(RESULTS.read_text(encoding="utf-8"))
        if args.grid:
            saved["grid"] = grid_reference(load_pairs(), [int(t) for t in saved["sizes"]])
        if args.sensitivity:
            sensitivity(saved)
        if args.fallback:
            saved["fallback"] = fallback_reference(load_pairs(), saved["sizes"])
        if added:
            RESULTS.write_text(json.dumps(saved, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
        _report.write_section("code", to_markdown(saved))
        return 0
    if args.only and REFERENCE not in args.only:
        args.only = [REFERENCE, *args.only]
    results = run(args.only, repeat=args.repeat, targets=args.targets)
    if args.only or tuple(args.targets) != TARGETS:
        print(to_markdown(results))
    else:
        sensitivity(results)
        RESULTS.parent.mkdir(parents=True, exist_ok=True)
        RESULTS.write_text(json.dumps(results, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
        _report.write_section("code", to_markdown(results))
        print(f"wrote {RESULTS} and the code section of {_report.DOCS}", file=sys.stderr)
    if args.json:
        print(json.dumps(results, indent=1, ensure_ascii=False))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
