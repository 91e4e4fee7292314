"""Overlap benchmark: what ``chunk_overlap`` costs in R_c for the framework adapters.

``RechunkTextSplitter(chunk_size=..., chunk_overlap=...)`` (the LangChain adapter;
RechunkNodeParser shares the code) on every revision pair of
``../shared/revisions/dev.jsonl``: R_c = ``rechunk.recompute_fraction`` over the
chunks' ``page_content`` (what LangChain embeds), macro-averaged over pairs per
language, for overlaps of 0, 10% and 20% of ``chunk_size`` (all-MiniLM-L6-v2 tokens).
The stock ``RecursiveCharacterTextSplitter`` with the same sizes and overlaps
(length counted with the same tokenizer) is measured beside it.

    python benchmarks/overlap.py      # writes docs/benchmarks.md and results/overlap.json
"""

from __future__ import annotations

import json
import os
import statistics
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _report import ROOT, load_revisions, machine, write_section

import rechunk
from rechunk.adapters.langchain import RechunkTextSplitter
from rechunk.chunking.tokens import resolve_tokenizer

CHUNK_SIZE = 200
OVERLAPS = (0, 20, 40)


def chunks(texts: list[str]) -> list[rechunk.Chunk]:
    counts = resolve_tokenizer(None).count_many(texts)
    return [rechunk.Chunk(0, len(t), t, n) for t, n in zip(texts, counts)]


def main() -> None:
    from langchain_text_splitters import RecursiveCharacterTextSplitter

    pairs = load_revisions()
    counter = resolve_tokenizer(None)

    def count(text: str) -> int:
        return counter.count_many([text])[0]

    splitters: dict[str, Any] = {}
    for overlap in OVERLAPS:
        for policy in ("structured", "recursive"):
            splitters[f"rechunk {policy} {CHUNK_SIZE}, overlap {overlap}"] = RechunkTextSplitter(
                policy, chunk_size=CHUNK_SIZE, chunk_overlap=overlap
            )
        splitters[f"LangChain RecursiveCharacter {CHUNK_SIZE}, overlap {overlap}"] = (
            RecursiveCharacterTextSplitter(
                chunk_size=CHUNK_SIZE, chunk_overlap=overlap, length_function=count
            )
        )
    results: dict[str, dict[str, float]] = {}
    for name, splitter in splitters.items():
        per_lang: dict[str, list[float]] = {}
        for pair in pairs:
            old = chunks(splitter.split_text(pair["old"]))
            new = chunks(splitter.split_text(pair["new"]))
            assert rechunk.recompute_fraction(old, old) == 0.0
            per_lang.setdefault(pair["lang"], []).append(rechunk.recompute_fraction(old, new))
        results[name] = {lang: statistics.mean(v) for lang, v in sorted(per_lang.items())}
        print(name, {k: f"{v:.1%}" for k, v in results[name].items()}, flush=True)
    load = os.getloadavg()
    rows = "\n".join(
        f"| {name} | {r.get('en', 0):.1%} | {r.get('zh', 0):.1%} |" for name, r in results.items()
    )
    markdown = f"""## Overlap: R_c of `chunk_overlap` in the framework adapters (`benchmarks/overlap.py`)

dev: {len(pairs)} revision pairs, mean R_c per pair (tokens of new `page_content` inputs
absent from the old revision's), chunk_size {CHUNK_SIZE} all-MiniLM-L6-v2 tokens.
Overlap makes a chunk's input include the end of the chunk before it, so an edit there
changes two inputs. {machine()}, load average {load[0]:.2f}.

| splitter | R_c en | R_c zh |
|---|---|---|
{rows}
"""
    write_section("overlap", markdown)
    out = ROOT / "benchmarks" / "results" / "overlap.json"
    out.write_text(json.dumps({"chunk_size": CHUNK_SIZE, "results": results}, indent=2) + "\n")
    print(markdown)


if __name__ == "__main__":
    main()
