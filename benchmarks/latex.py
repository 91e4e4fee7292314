"""LaTeX benchmark: what reading a LaTeX source adds to re-embedding, beside LaTeX splitters.

Every ``../shared/revisions/dev.jsonl`` pair is rendered to LaTeX by pandoc 3.9 (PyPI
``pypandoc-binary`` 1.17, the tool that made the DOCX renders of ``formats-dev/``; its gfm
reader for Markdown, its rst reader for the PEPs, ``--standalone``, so each file has
pandoc's full preamble), into a temporary folder. Then, per pipeline, the measures of the
formats benchmark (``benchmarks/formats.py``), on these renders:

* **points added**: R_c on the renders minus R_c of the same splitter on the source texts,
  mean over pairs, all pairs and small edits (edit fraction <= 5%);
* **small-edit tokens vs source**: tokens re-embedded over the small-edit pairs on the
  renders, divided by the same splitter's on the source texts;
* **foreign words**: the share of extracted words that never occur in the source text
  (the preamble, macro names, environment names);
* **median chunk** on the renders, **extraction MB/s** (fastest of ``--repeat`` passes;
  the machine is shared, so it moves with load) and whether every pass gave the same text.

Pipelines: ``rechunk`` (``rechunk.sources.parse_file``, then the structured policy sized by
``rechunk.policy_for`` for all-MiniLM-L6-v2); ``langchain`` (``TextLoader``, then
``RecursiveCharacterTextSplitter.from_language(Language.LATEX)`` on the MiniLM tokenizer:
what LangChain offers for LaTeX); ``llamaindex`` (``SimpleDirectoryReader``, which reads a
``.tex`` file as text, then ``SentenceSplitter``). The anchors are length-matched on the
source texts as in the formats benchmark.

    python benchmarks/latex.py             # writes docs + results
    python benchmarks/latex.py --no-write  # prints only
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _report
import formats

RESULTS = Path(__file__).resolve().parent / "results" / "latex.json"
COMMAND = "python benchmarks/latex.py"
FORMAT = "tex"
PANDOC_EPOCH = "1700000000"


def render(pairs: Sequence[dict[str, Any]], root: Path) -> dict[str, str]:
    """Both versions of every pair as ``root/<id>/{old,new}.tex``; the tools' versions."""
    import pypandoc

    os.environ["SOURCE_DATE_EPOCH"] = PANDOC_EPOCH
    for pair in pairs:
        reader = "gfm" if pair["source_ext"] == ".md" else "rst"
        folder = root / pair["id"]
        folder.mkdir(parents=True, exist_ok=True)
        for version in ("old", "new"):
            latex = pypandoc.convert_text(
                pair[version], "latex", format=reader, extra_args=["--standalone", "--quiet"]
            )
            (folder / f"{version}.tex").write_text(latex, encoding="utf-8")
    return {"pandoc": pypandoc.get_pandoc_version(), "pypandoc-binary": _version("pypandoc")}


def _version(package: str) -> str:
    from importlib.metadata import version

    for name in (f"{package}-binary", f"{package}_binary", package):
        try:
            return version(name)
        except Exception:
            continue
    return "?"


def _pipelines() -> dict[str, formats.Pipeline]:
    """The three pipelines, each reading ``.tex``."""
    rechunk = formats._rechunk_pipeline()
    rechunk.formats = (FORMAT,)

    from langchain_community.document_loaders import TextLoader
    from langchain_text_splitters import Language, RecursiveCharacterTextSplitter
    from transformers import PreTrainedTokenizerFast

    tok = PreTrainedTokenizerFast(tokenizer_object=formats._tokenizer())
    splitters: dict[int, Any] = {}

    def splitter(target: int) -> Any:
        if target not in splitters:
            separators = RecursiveCharacterTextSplitter.get_separators_for_language(Language.LATEX)
            splitters[target] = RecursiveCharacterTextSplitter.from_huggingface_tokenizer(
                tok, chunk_size=target, chunk_overlap=0, separators=separators
            )
        return splitters[target]

    langchain = formats.Pipeline(
        "langchain",
        (FORMAT,),
        lambda path, fmt: TextLoader(str(path), encoding="utf-8").load(),
        lambda docs: [d.page_content for d in docs],
        lambda docs, target: [d.page_content for d in splitter(target).split_documents(docs)],
        lambda text, target: splitter(target).split_text(text),
    )
    llamaindex = formats._llamaindex_pipeline()
    llamaindex.formats = (FORMAT,)
    return {"rechunk": rechunk, "langchain": langchain, "llamaindex": llamaindex}


LABELS = {
    "rechunk": "rechunk: `parse_file` + structured (`policy_for`, MiniLM)",
    "langchain": "LangChain: TextLoader + `from_language(Language.LATEX)`",
    "llamaindex": "LlamaIndex: SimpleDirectoryReader + SentenceSplitter",
}


def run(repeat: int) -> dict[str, Any]:
    import warnings

    warnings.filterwarnings("ignore")
    from rechunk.chunking.tokens import resolve_tokenizer

    pairs = formats.load_pairs()
    load_before = os.getloadavg()[0]
    t0 = time.perf_counter()
    counter = resolve_tokenizer(None)
    sources = [p[v] for p in pairs for v in ("old", "new")]
    results = []
    with tempfile.TemporaryDirectory(prefix="rechunk-latex-") as folder:
        root = Path(folder)
        tools = render(pairs, root)
        render_seconds = time.perf_counter() - t0
        reference: float | None = None
        for name, pipeline in _pipelines().items():
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
                pipeline, FORMAT, pairs, source_chunks, repeat, counter, target, root
            )
            results.append({"name": name, "calibration": calibration, **measured})
            print(f"{name}: done at {time.perf_counter() - t0:.0f} s", file=sys.stderr)
    return {
        "benchmark": "latex",
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
        "pipelines": results,
    }


def section(r: dict[str, Any]) -> str:
    pct, pts, x = formats._pct, formats._pts, formats._x
    lines = [
        "## LaTeX: what reading a `.tex` source adds to re-embedding",
        "",
        f"Machine: {r['machine']}. Reproduce: `{r['command']}` (whole run "
        f"{r['seconds_total']:.0f} s, of it {r['render_seconds']:.0f} s rendering; raw "
        "numbers in `benchmarks/results/latex.json`). 1-minute load average before/after: "
        f"{r['load_average_1min']['before']:.2f}/{r['load_average_1min']['after']:.2f}.",
        "",
        f"The {r['dataset']['pairs']} pairs of `dev.jsonl` (dev; {r['dataset']['small_pairs']} "
        f"small edits) rendered to LaTeX by pandoc {r['tools']['pandoc']} (PyPI "
        f"`pypandoc-binary` {r['tools']['pypandoc-binary']}; gfm reader for Markdown, rst "
        "for the PEPs; `--standalone`, so every file has pandoc's preamble). Points added: "
        "R_c on the renders minus the same splitter's R_c on the source texts (mean over "
        "pairs). Tokens vs source: what the small-edit pairs re-embed on the renders over "
        "what they re-embed on the sources. Foreign words: extracted words that never occur "
        "in the source. Anchors are length-matched on the source texts to the structured "
        "policy's median.",
        "",
        "| pipeline | target | median chunk (renders) | points added: all / small | "
        "R_c on renders: all / small | small-edit tokens vs source | foreign words | "
        "MB/s | same text every pass | failed files |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for p in r["pipelines"]:
        all_, small = p["cells"]["all/all"], p["cells"]["all/small"]
        median = p["median_tokens"]
        lines.append(
            f"| {LABELS[p['name']]} | {p['calibration']['target'] or '–'} | "
            f"{median:.0f} | {pts(all_['points'])} / {pts(small['points'])} | "
            f"{pct(all_['rc'])} / {pct(small['rc'])} | {x(small['ratio'])} | "
            f"{pct(p['foreign_words'])} | {formats._num(p['mbps'])} | "
            f"{'yes' if p['nondeterministic_files'] == 0 else 'no'} | {p['failed_files']} |"
        )
    rechunk = next(p for p in r["pipelines"] if p["name"] == "rechunk")
    best = min(
        (p for p in r["pipelines"] if p["name"] != "rechunk"),
        key=lambda p: p["cells"]["all/small"]["rc"],
    )
    lines += [
        "",
        f"On small edits rechunk re-embeds {pct(rechunk['cells']['all/small']['rc'])} of "
        f"the LaTeX files' tokens, {x(rechunk['cells']['all/small']['ratio'])} what it "
        "re-embeds on the source texts; the best anchor, "
        f"{best['name']}, {pct(best['cells']['all/small']['rc'])}. An anchor reads the "
        f"markup as text: {pct(best['foreign_words'])} of its words are not in the source "
        f"(rechunk: {pct(rechunk['foreign_words'])}). The anchors' R_c on the renders can "
        "be below their R_c on the sources (negative points): the preamble pandoc writes "
        "into every version becomes chunks of its own, the same in both, which dilute the "
        "share without being text anyone searches. The tokens vs source column is what an "
        "edit costs.",
    ]
    return "\n".join(lines)


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
        _report.write_section("latex", text)
        print(f"wrote {RESULTS} and the latex section of {_report.DOCS}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
