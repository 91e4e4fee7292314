"""rechunk eval, run for real: examples/docs (and a copy of one of them) synced into embedded
Qdrant with the real default model (ONNX all-MiniLM-L6-v2), a shadow generation built by
``rechunk reindex``, queries written here, miss rates and duplicate ratios worked out by
hand from what the collections hold."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rechunk.live.evaluation import (
    ABSENT,
    EvalQuery,
    duplicate_of,
    read_queries,
)
from rechunk.sync.store import PointPayload, StoredPoint

pytestmark = pytest.mark.timeout(180)

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "examples" / "docs"


def point(text: str, key: str | None = None, doc_id: str = "d", policy: str = "p") -> StoredPoint:
    payload = PointPayload(
        doc_id=doc_id,
        revision="r",
        policy=policy,
        input_key=key or f"key-{hash(text)}",
        model_id="m",
        ordinal=0,
        start=0,
        end=len(text),
        tokens=len(text.split()),
        text=text,
    )
    return StoredPoint(id=f"id-{key or hash(text)}", payload=payload)


# -- the duplicate rule --------------------------------------------------------------------


def test_duplicate_rule() -> None:
    words = [f"w{i}" for i in range(20)]
    a = point(" ".join(words))
    # the same input key: duplicates whatever the text says
    assert duplicate_of(point("one text", key="k"), point("another", key="k"))
    # one text inside the other (whitespace and case aside)
    assert duplicate_of(a, point("W3  w4\nw5 w6"))
    # b has 16 words, 12 grams; sharing half of them (6) with a is heavy overlap, 5 is not
    other = [f"u{i}" for i in range(8)]
    assert duplicate_of(a, point(" ".join(words[:10] + other[:6])))  # 6 of 12 grams shared
    assert not duplicate_of(a, point(" ".join(words[:9] + other[:7])))  # 5 of 12
    assert not duplicate_of(a, point("something else entirely, five words or more"))
    # as whole words: "x" is not repeated by "Fine text here." (it was, as a substring)
    assert not duplicate_of(point("Fine text here."), point("x"))
    assert duplicate_of(point("Fine text here."), point("text"))
    assert duplicate_of(point("Fine text here."), point("here."))


def test_a_fragment_is_found_as_whole_words() -> None:
    from rechunk.live.evaluation import EvalQuery, _answers

    chunk = point("We concatenate the parts; the cat sat.")
    assert _answers(chunk, EvalQuery("q", "d", "the CAT  sat", 1))
    assert _answers(chunk, EvalQuery("q", "d", "cat", 1))  # the word, not "concatenate"
    assert not _answers(point("We concatenate the parts."), EvalQuery("q", "d", "cat", 1))
    assert _answers(point("the parts; the"), EvalQuery("q", "d", "; the", 1))


@given(st.text(min_size=1), st.text(min_size=1))
def test_duplicate_rule_is_symmetric_and_reflexive(x: str, y: str) -> None:
    a, b = point(x, key="a"), point(y, key="b")
    assert duplicate_of(a, b) == duplicate_of(b, a)
    assert duplicate_of(a, point(x, key="c")) or not " ".join(x.split())


def test_read_queries(tmp_path: Path) -> None:
    from rechunk.errors import InputError

    path = tmp_path / "q.jsonl"
    path.write_text('{"query": "a", "doc_id": "x"}\n\n{"query": "b", "doc_id": "y", '
                    '"fragment": "f"}\n', encoding="utf-8")
    assert read_queries(path) == [EvalQuery("a", "x", None, 1), EvalQuery("b", "y", "f", 3)]
    for bad in ('{"query": "a"}', "[1]", "{", '{"query": "", "doc_id": "x"}',
                '{"query": "a", "doc_id": "x", "fragment": 3}'):
        path.write_text(bad + "\n", encoding="utf-8")
        with pytest.raises(InputError, match="line 1"):
            read_queries(path)


# -- the command, on real collections --------------------------------------------------------


class Workdir:
    def __init__(self, path: Path, shadow: str, live: str) -> None:
        self.path = path
        self.shadow = shadow  # the structured generation reindex left behind
        self.live = live  # the fixed generation the alias now points at
        self.texts = {p.name: p.read_text(encoding="utf-8") for p in (path / "docs").iterdir()}

    def points(self, collection: str) -> list[Any]:
        from rechunk.adapters.uri import open_store

        opened = open_store("qdrant:.rechunk/qdrant", collection, create=False)
        try:
            return [p for doc in sorted(opened.store.doc_ids())
                    for p in opened.store.get_points(doc)]
        finally:
            opened.close()


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Workdir]:
    from rechunk.cli import main

    pytest.importorskip("qdrant_client")
    path = tmp_path_factory.mktemp("eval")
    shutil.copytree(DOCS, path / "docs")
    # a copy of one document: its chunks repeat the original's, input key for input key
    shutil.copy(path / "docs" / "reuse-cache.md", path / "docs" / "copy-of-reuse.md")
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(path)
        assert main(["sync", "docs", "--policy", "structured"]) == 0
        import contextlib
        import io

        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            assert main(["reindex", "--policy", "fixed", "--json"]) == 0
        result = json.loads(out.getvalue())
        assert result["switched"]
        yield Workdir(path, result["previous"], result["collection"])


def write_queries(workdir: Workdir, rows: list[dict[str, Any]]) -> Path:
    path = workdir.path / "queries.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def run(capsys: pytest.CaptureFixture[str], workdir: Workdir, *args: str) -> str:
    from rechunk.cli import main

    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(workdir.path)
        capsys.readouterr()
        assert main(["eval", *args]) == 0
    return capsys.readouterr().out


def by_doc(points: list[Any], doc_id: str) -> list[Any]:
    return sorted((p for p in points if p.payload.doc_id == doc_id), key=lambda p: p.payload.start)


def test_eval_miss_rate_and_duplicates(workdir: Workdir,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    shadow = workdir.points(workdir.shadow)  # the structured generation
    assert {p.payload.policy.split("-")[0] for p in shadow} == {"structured"}
    started = by_doc(shadow, "getting-started.md")[0].payload.text
    sync_chunk = by_doc(shadow, "sync-guide.md")[1].payload.text
    fragment = " ".join(sync_chunk.split()[3:12])
    guide = by_doc(shadow, "chunking-guide.md")[0].payload.text
    queries = [
        # a chunk's own text: its chunk is the nearest, rank 1
        {"query": started, "doc_id": "getting-started.md"},
        {"query": sync_chunk, "doc_id": "sync-guide.md", "fragment": fragment},
        # the right chunk, but the wrong doc_id: a miss at k=1, found when k covers all
        {"query": sync_chunk, "doc_id": "chunking-guide.md"},
        # a document the collection does not hold: a miss whatever k
        {"query": "how is the cache kept safe", "doc_id": "nowhere.md"},
        # a fragment no chunk holds: a miss whatever k
        {"query": guide, "doc_id": "chunking-guide.md", "fragment": "zebra quantum marmalade"},
    ]
    path = write_queries(workdir, queries)

    top1 = json.loads(run(capsys, workdir, str(path), "--collection", workdir.shadow,
                          "-k", "1", "--json"))
    (gen,) = top1["generations"]
    assert gen["collection"] == workdir.shadow
    assert [q["rank"] for q in gen["per_query"]] == [1, 1, None, None, None]
    assert (gen["misses"], gen["miss_rate"]) == (3, 0.6)
    assert (gen["chunks"], gen["duplicates"], gen["duplicate_ratio"]) == (5, 0, 0.0)
    structured = next(p for p in gen["policies"] if p != ABSENT)
    assert gen["policies"][ABSENT] == {"queries": 1, "misses": 1, "miss_rate": 1.0,
                                       "chunks": 0, "duplicates": 0, "duplicate_ratio": None}
    assert gen["policies"][structured]["queries"] == 4
    assert gen["policies"][structured]["miss_rate"] == 0.5

    # k covering every chunk: each query returns all of them; the copy's chunks (or the
    # original's, whichever ranks lower) are the duplicates, nothing else repeats
    everything = len(shadow)
    copies = len(by_doc(shadow, "copy-of-reuse.md"))
    assert copies == len(by_doc(shadow, "reuse-cache.md")) >= 1
    all_k = json.loads(run(capsys, workdir, str(path), "--collection", workdir.shadow,
                           "-k", str(everything), "--json"))
    (gen,) = all_k["generations"]
    assert [q["rank"] is None for q in gen["per_query"]] == [False, False, False, True, True]
    assert (gen["misses"], gen["miss_rate"]) == (2, 0.4)
    assert [q["duplicates"] for q in gen["per_query"]] == [copies] * 5
    assert gen["chunks"] == 5 * everything
    assert gen["duplicate_ratio"] == round(copies / everything, 4)


def test_eval_compare_generations_without_text(workdir: Workdir,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    shadow, live = workdir.points(workdir.shadow), workdir.points(workdir.live)
    sync_chunk = by_doc(shadow, "sync-guide.md")[1].payload.text
    fragment = " ".join(sync_chunk.split()[3:9])
    queries = [
        {"query": "what happens when a sync crashes?", "doc_id": "sync-guide.md",
         "fragment": fragment},
        {"query": "how are vectors reused", "doc_id": "reuse-cache.md"},
        {"query": "which chunking policy should I use", "doc_id": "nowhere.md"},
    ]
    path = write_queries(workdir, queries)
    k = max(len(shadow), len(live))
    # the alias (the fixed generation) beside the structured one it replaced
    data = json.loads(run(capsys, workdir, str(path), "--compare", workdir.shadow,
                          "-k", str(k), "--json"))
    assert data["k"] == k and data["queries"] == 3
    fixed, structured = data["generations"]
    assert fixed["collection"] == "rechunk" and structured["collection"] == workdir.shadow
    for gen, points in ((fixed, live), (structured, shadow)):
        # by hand: every chunk is returned, so the first query hits iff a chunk of
        # sync-guide.md holds the whole fragment in this generation
        held = any(" ".join(fragment.split()).casefold() in " ".join(p.payload.text.split())
                   .casefold() for p in by_doc(points, "sync-guide.md"))
        assert [q["rank"] is None for q in gen["per_query"]] == [not held, False, True]
        copies = len(by_doc(points, "copy-of-reuse.md"))
        assert gen["duplicates"] == 3 * copies
        assert gen["duplicate_ratio"] == round(copies / len(points), 4)
        assert {p.split("-")[0] for p in gen["policies"]} - {ABSENT} == {
            p.payload.policy.split("-")[0] for p in points}
    assert {p.split("-")[0] for p in fixed["policies"]} == {"fixed", ABSENT}
    assert {p.split("-")[0] for p in structured["policies"]} == {"structured", ABSENT}

    plain = run(capsys, workdir, str(path), "--compare", workdir.shadow, "-k", "3")
    assert "miss rate" in plain and workdir.shadow in plain and "duplicate ratio" in plain

    # no 40-character piece of any document or query in the output without --show-text
    secrets = [*workdir.texts.values(), *(q["query"] for q in queries), sync_chunk]
    pieces = {s[i:i + 40] for s in secrets for i in range(max(0, len(s) - 39))}
    pieces |= {q["doc_id"] for q in queries} | {fragment}
    for out in (json.dumps(data), plain, run(capsys, workdir, str(path), "-k", "2")):
        leaked = [p for p in pieces if p in out]
        assert not leaked, leaked[:3]

    shown = run(capsys, workdir, str(path), "--compare", workdir.shadow, "--show-text")
    assert queries[0]["query"] in shown and "nowhere.md" in shown and fragment in shown
    shown_json = json.loads(run(capsys, workdir, str(path), "--show-text", "--json"))
    assert shown_json["generations"][0]["per_query"][1]["query"] == queries[1]["query"]


def test_eval_refusals(workdir: Workdir, capsys: pytest.CaptureFixture[str]) -> None:
    from rechunk.cli import main

    path = write_queries(workdir, [{"query": "q", "doc_id": "d"}])
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(workdir.path)
        assert main(["eval", str(path), "--compare", "rechunk"]) == 2
        assert main(["eval", str(path), "--compare", "no-such-generation"]) == 3
        assert "no-such-generation" in capsys.readouterr().err
        assert main(["eval", str(path), "-k", "0"]) == 2
        assert main(["eval", "missing.jsonl"]) == 2
