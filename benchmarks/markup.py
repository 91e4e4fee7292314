"""Markup benchmark: what reading a LaTeX, Org, RTF or ODT file adds to re-embedding,
beside the splitters a LangChain or LlamaIndex user would reach for.

Every ``../shared/revisions/dev.jsonl`` pair is rendered to LaTeX, Org, RTF and ODT by pandoc 3.9
(PyPI ``pypandoc-binary`` 1.17, the tool that made the DOCX renders of ``formats-dev/``;
its gfm reader for Markdown, its rst reader for the PEPs, ``--standalone``, so each LaTeX
file has pandoc's full preamble and each Org headline its property drawer), into a
temporary folder. Then, per format and pipeline, the measures of the formats benchmark
(``benchmarks/formats.py``), on these renders:

* **points added**: R_c on the renders minus R_c of the same splitter on the source texts,
  mean over pairs, all pairs and small edits (edit fraction <= 5%);
* **small-edit tokens vs source**: tokens re-embedded over the small-edit pairs on the
  renders, divided by the same splitter's on the source texts;
* **foreign words**: the share of extracted words that never occur in the source text
  (the preamble, macro and environment names, drawers);
* **median chunk** on the renders, **extraction MB/s** (fastest of ``--repeat`` passes;
  the machine is shared, so it moves with load) and whether every pass gave the same text.

Pipelines: ``rechunk`` (``rechunk.sources.parse_file``, then the structured policy sized by
``rechunk.policy_for`` for all-MiniLM-L6-v2); ``langchain`` (``TextLoader``, then
``RecursiveCharacterTextSplitter.from_language(Language.LATEX)`` for LaTeX, its default
separators for Org and RTF, which ``Language`` does not name; on the MiniLM tokenizer);
``llamaindex`` (``SimpleDirectoryReader``, which reads all three as text, then
``SentenceSplitter``). The anchors are length-matched on the source texts as in the
formats benchmark. ODT has no anchor: LangChain's ODT loader (``UnstructuredODTLoader``)
needs the ``unstructured`` package, which is not installed here, and
``SimpleDirectoryReader`` has no ODT reader (it would read the ZIP package as text).

    python benchmarks/markup.py             # writes docs + results
    python benchmarks/markup.py --no-write  # prints only
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from collections.abc import Sequence
from importlib import metadata
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _report
import formats

RESULTS = Path(__file__).resolve().parent / "results" / "markup.json"
COMMAND = "python benchmarks/markup.py"
# suffix -> (pandoc's writer, the name in the report)
FORMATS = {
    "tex": ("latex", "LaTeX"),
    "org": ("org", "Org"),
    "rtf": ("rtf", "RTF"),
    "odt": ("odt", "ODT"),
}
BINARY = {"odt"}  # pandoc writes these to a file, not as text
NO_ANCHOR = {
    "odt": "no anchor reads ODT here: LangChain's `UnstructuredODTLoader` needs the "
    "`unstructured` package (not installed), and LlamaIndex's `SimpleDirectoryReader` has "
    "no ODT reader"
}
PANDOC_EPOCH = "1700000000"


def render(pairs: Sequence[dict[str, Any]], root: Path) -> dict[str, str]:
    """Both versions of every pair in every format, as ``root/<id>/{old,new}.<suffix>``;
    the tools' versions."""
    import pypandoc

    os.environ["SOURCE_DATE_EPOCH"] = PANDOC_EPOCH
    for pair in pairs:
        reader = "gfm" if pair["source_ext"] == ".md" else "rst"
        folder = root / pair["id"]
        folder.mkdir(parents=True, exist_ok=True)
        for suffix, (writer, _) in FORMATS.items():
            for version in ("old", "new"):
                path = folder / f"{version}.{suffix}"
                args = ["--standalone", "--quiet"]
                if suffix in BINARY:
                    pypandoc.convert_text(
                        pair[version], writer, format=reader, extra_args=args, outputfile=str(path)
                    )
                    continue
                text = pypandoc.convert_text(pair[version], writer, format=reader, extra_args=args)
                path.write_text(text, encoding="utf-8")
    return {
        "pandoc": pypandoc.get_pandoc_version(),
        "pypandoc-binary": metadata.version("pypandoc-binary"),
    }


def _pipelines(suffix: str) -> dict[str, formats.Pipeline]:
    """The three pipelines, reading files of ``suffix`` (rechunk's alone where no anchor
    reads them: ``NO_ANCHOR``)."""
    rechunk = formats._rechunk_pipeline()
    rechunk.formats = (suffix,)
    if suffix in NO_ANCHOR:
        return {"rechunk": rechunk}

    from langchain_community.document_loaders import TextLoader
    from langchain_text_splitters import Language, RecursiveCharacterTextSplitter
    from transformers import PreTrainedTokenizerFast

    tok = PreTrainedTokenizerFast(tokenizer_object=formats._tokenizer())
    splitters: dict[int, Any] = {}
    separators = (
        RecursiveCharacterTextSplitter.get_separators_for_language(Language.LATEX)
        if suffix == "tex"
        else None  # LangChain names no Org or RTF separators: its defaults
    )

    def splitter(target: int) -> Any:
        if target not in splitters:
            splitters[target] = RecursiveCharacterTextSplitter.from_huggingface_tokenizer(
                tok, chunk_size=target, chunk_overlap=0, separators=separators
            )
        return splitters[target]

    langchain = formats.Pipeline(
        "langchain",
        (suffix,),
        lambda path, fmt: TextLoader(str(path), encoding="utf-8").load(),
        lambda docs: [d.page_content for d in docs],
        lambda docs, target: [d.page_content for d in splitter(target).split_documents(docs)],
        lambda text, target: splitter(target).split_text(text),
    )
    llamaindex = formats._llamaindex_pipeline()
    llamaindex.formats = (suffix,)
    return {"rechunk": rechunk, "langchain": langchain, "llamaindex": llamaindex}


LABELS = {
    "rechunk": "rechunk: `parse_file` + structured (`policy_for`, MiniLM)",
    "langchain": "LangChain: TextLoader + RecursiveCharacter",
    "llamaindex": "LlamaIndex: SimpleDirectoryReader + SentenceSplitter",
}


def measure(
    suffix: str, pairs: list[dict[str, Any]], root: Path, repeat: int, counter: Any
) -> list[dict[str, Any]]:
    """Every pipeline on the renders of one format; the anchors length-matched to the
    structured policy's median on the source texts."""
    sources = [p[v] for p in pairs for v in ("old", "new")]
    results = []
    reference: float | None = None
    for name, pipeline in _pipelines(suffix).items():
        if pipeline.matched and reference is not None:
            calibration = formats.calibrate(pipeline, sources, reference, counter)
        else:
            median = formats._median_tokens(pipeline, sources, 0, counter)
            calibration = {"target": 0, "median": median}
            reference = median
        target = calibration["target"]
        source_chunks = {
            (p["id"], v): formats._source_chunks(pipeline, p[v], target, counter)
            for p in pairs
            for v in ("old", "new")
        }
        measured = formats._measure_format(
            pipeline, suffix, pairs, source_chunks, repeat, counter, target, root
        )
        results.append({"name": name, "calibration": calibration, **measured})
    return results


def run(repeat: int) -> dict[str, Any]:
    import warnings

    warnings.filterwarnings("ignore")
    from rechunk.chunking.tokens import resolve_tokenizer

    pairs = formats.load_pairs()
    load_before = os.getloadavg()[0]
    t0 = time.perf_counter()
    counter = resolve_tokenizer(None)
    by_format = {}
    with tempfile.TemporaryDirectory(prefix="rechunk-markup-") as folder:
        root = Path(folder)
        tools = render(pairs, root)
        render_seconds = time.perf_counter() - t0
        for suffix in FORMATS:
            by_format[suffix] = measure(suffix, pairs, root, repeat, counter)
            print(f"{suffix}: done at {time.perf_counter() - t0:.0f} s", file=sys.stderr)
    return {
        "benchmark": "markup",
        "machine": _report.machine(),
        "command": COMMAND,
        "tools": tools,
        "render_seconds": render_seconds,
        "dataset": {
            "path": "../shared/revisions/dev.jsonl",
            "pairs": len(pairs),
            "small_pairs": sum(1 for p in pairs if p["band"] == "small"),
        },
        "repeat": repeat,
        "seconds_total": time.perf_counter() - t0,
        "load_average_1min": {"before": load_before, "after": os.getloadavg()[0]},
        "formats": by_format,
    }


def _table(pipelines: list[dict[str, Any]], fmt: str) -> list[str]:
    pct, pts, x = formats._pct, formats._pts, formats._x
    lines = [
        f"### {FORMATS[fmt][1]}",
        "",
        "| pipeline | target | median chunk (renders) | points added: all / small | "
        "R_c on renders: all / small | small-edit tokens vs source | foreign words | "
        "MB/s | same text every pass | failed files |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for p in pipelines:
        all_, small = p["cells"]["all/all"], p["cells"]["all/small"]
        label = LABELS[p["name"]]
        if p["name"] == "langchain":
            label += " (`from_language(Language.LATEX)`)" if fmt == "tex" else " (defaults)"
        lines.append(
            f"| {label} | {p['calibration']['target'] or '–'} | {p['median_tokens']:.0f} | "
            f"{pts(all_['points'])} / {pts(small['points'])} | "
            f"{pct(all_['rc'])} / {pct(small['rc'])} | {x(small['ratio'])} | "
            f"{pct(p['foreign_words'])} | {formats._num(p['mbps'])} | "
            f"{'yes' if p['nondeterministic_files'] == 0 else 'no'} | {p['failed_files']} |"
        )
    rechunk = next(p for p in pipelines if p["name"] == "rechunk")
    anchors = [p for p in pipelines if p["name"] != "rechunk"]
    if not anchors:
        lines += [
            "",
            f"On small edits rechunk re-embeds {x(rechunk['cells']['all/small']['ratio'])} the "
            f"tokens it re-embeds on the source texts; {NO_ANCHOR[fmt]}.",
            "",
        ]
        return lines
    best = min(anchors, key=lambda p: p["cells"]["all/small"]["ratio"])
    lines += [
        "",
        f"On small edits rechunk re-embeds {x(rechunk['cells']['all/small']['ratio'])} the "
        f"tokens it re-embeds on the source texts, the best anchor ({best['name']}) "
        f"{x(best['cells']['all/small']['ratio'])}; {pct(best['foreign_words'])} of the "
        f"anchor's words are markup, not in the source (rechunk: "
        f"{pct(rechunk['foreign_words'])}).",
        "",
    ]
    return lines


def section(r: dict[str, Any]) -> str:
    lines = [
        "## LaTeX, Org, RTF and ODT: what reading the markup adds to re-embedding",
        "",
        f"Machine: {r['machine']}. Reproduce: `{r['command']}` (whole run "
        f"{r['seconds_total']:.0f} s, of it {r['render_seconds']:.0f} s rendering; raw "
        "numbers in `benchmarks/results/markup.json`). 1-minute load average before/after: "
        f"{r['load_average_1min']['before']:.2f}/{r['load_average_1min']['after']:.2f}.",
        "",
        f"The {r['dataset']['pairs']} pairs of `dev.jsonl` (dev; {r['dataset']['small_pairs']} "
        f"small edits) rendered to LaTeX, Org, RTF and ODT by pandoc {r['tools']['pandoc']} (PyPI "
        f"`pypandoc-binary` {r['tools']['pypandoc-binary']}; gfm reader for Markdown, rst "
        "for the PEPs; `--standalone`, so every LaTeX file has pandoc's preamble and every "
        "Org headline its property drawer; ODT is pandoc's own writer, not an office "
        "program's). Points added: R_c on the renders minus the same "
        "splitter's R_c on the source texts (mean over pairs). Tokens vs source: what the "
        "small-edit pairs re-embed on the renders over what they re-embed on the sources: "
        "what an edit costs. Foreign words: extracted words that never occur in the "
        "source. Anchors are length-matched on the source texts to the structured policy's "
        "median. An anchor's R_c on the renders can be below its R_c on the sources "
        "(negative points): markup the renders repeat in both versions (the preamble) "
        "becomes chunks of its own, the same in both, which dilute the share without being "
        "text anyone searches.",
        "",
    ]
    for fmt, pipelines in r["formats"].items():
        lines += _table(pipelines, fmt)
    return "\n".join(lines).rstrip()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--repeat", type=int, default=formats.REPEAT, help="extraction passes")
    parser.add_argument("--no-write", action="store_true", help="print only")
    args = parser.parse_args(argv)
    results = run(max(1, args.repeat))
    text = section(results)
    print(text)
    if not args.no_write:
        RESULTS.parent.mkdir(parents=True, exist_ok=True)
        RESULTS.write_text(
            json.dumps(results, indent=1, ensure_ascii=False) + "\n", encoding="utf-8"
        )
        _report.write_section("markup", text)
        print(f"wrote {RESULTS} and the markup section of {_report.DOCS}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
