"""Model-check benchmark: what the sync's model check costs, and what it tells apart.

A sync with a model rechunk does not know by its weights (an OpenAI-compatible server, a
framework's embeddings object) embeds once more one input the collection or the cache
holds, and refuses the sync when the new vector is below cosine 0.95 of the held one
(:mod:`rechunk.sync.model_check`). On the revision pairs of ``../shared/revisions/``
(``dev.jsonl``: prose, structured policy; ``code-dev.jsonl``: code, the code policy of each
file's language), sized for all-MiniLM-L6-v2 as ``rechunk sync`` sizes them:

* **cost**: the OLD side of every pair synced in one call, then each NEW side in a sync
  of its own (as ``benchmarks/sync.py`` attributes each revision), and, in a second
  collection, every NEW side in one sync (a folder's sync): the tokens the check embedded
  beside the tokens the revisions embedded. The vectors there come from a hash of each
  text (the cost does not depend on them).
* **tells apart**: the check inputs those per-revision syncs chose, embedded by the
  packaged all-MiniLM-L6-v2 (torch, mean pooling: what the collection holds), then by the
  same weights on ONNX Runtime (the same model on another runtime: must pass), in float16
  (another precision: must pass), with CLS pooling instead of mean pooling (another
  model on the same weights, a near miss: should be refused), and by the hash "model"
  (an unrelated model of the same dimension: must be refused). The cosine of each to
  the held vector, and how many would be refused.

    python benchmarks/model_check.py   # writes docs/benchmarks.md + results/model_check.json
"""

from __future__ import annotations

import hashlib
import json
import statistics
import sys
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _report import ROOT, load_revisions, machine, write_section

import rechunk
from rechunk.integrations.sentence_transformers import SentenceTransformerEmbedder
from rechunk.sync.model_check import SAME_MODEL_COSINE, cosine

CODE = ROOT.parent / "shared" / "revisions" / "code-dev.jsonl"


class HashModel:
    """A model that is not pinned by its weights (so the check runs), with MiniLM's window
    and tokenizer; each vector comes from a hash of its text. Records what it embeds."""

    def __init__(self, st: SentenceTransformerEmbedder) -> None:
        self.model_id = "bench/hash-model"
        self.dimension = st.dimension
        self.max_input_tokens = st.max_input_tokens
        self.special_tokens = st.special_tokens
        self.tokenizer = st.tokenizer
        self.embedded: list[str] = []

    def embed(self, texts: list[str]) -> npt.NDArray[np.float32]:
        self.embedded.extend(texts)
        rows = []
        for text in texts:
            seed = int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "big")
            row = np.random.default_rng(seed).standard_normal(self.dimension)
            rows.append(row / np.linalg.norm(row))
        return np.asarray(rows, dtype=np.float32).reshape(len(texts), self.dimension)


def store(name: str, dimension: int) -> Any:
    from qdrant_client import QdrantClient

    from rechunk.adapters.qdrant import QdrantStore

    made = QdrantStore(QdrantClient(":memory:"), name)
    made.ensure_collection(dimension)
    return made


def cost(
    pairs: list[dict[str, Any]], st: SentenceTransformerEmbedder, pick: Any
) -> tuple[dict[str, Any], list[str]]:
    """The check's tokens beside the revisions', per revision and in one sync; the inputs
    the per-revision checks chose."""
    model = HashModel(st)
    chunker = rechunk.policy_for(st)
    one = store("per_revision", model.dimension)
    rechunk.sync([rechunk.Document(p["id"], p["old"]) for p in pairs], one, chunker=chunker,
                 embedder=model, chunker_for=pick)  # fmt: skip
    embedded = checked = passed = 0
    chosen: list[str] = []
    per: list[float] = []
    for pair in pairs:
        model.embedded.clear()
        report = rechunk.sync([rechunk.Document(pair["id"], pair["new"])], one, chunker=chunker,
                              embedder=model, chunker_for=pick)  # fmt: skip
        embedded += report.tokens_embedded
        checked += report.model_check_tokens
        if report.model_check == "passed":
            passed += 1
            chosen.append(model.embedded[0])  # the check runs before anything else
            if report.tokens_embedded:
                per.append(report.model_check_tokens / report.tokens_embedded)
    folder = store("one_sync", model.dimension)
    rechunk.sync([rechunk.Document(p["id"], p["old"]) for p in pairs], folder, chunker=chunker,
                 embedder=model, chunker_for=pick)  # fmt: skip
    whole = rechunk.sync([rechunk.Document(p["id"], p["new"]) for p in pairs], folder,
                         chunker=chunker, embedder=model, chunker_for=pick)  # fmt: skip
    return {
        "pairs": len(pairs),
        "per_revision": {
            "syncs_checked": passed,
            "tokens_embedded": embedded,
            "check_tokens": checked,
            "check_share_of_embedded": round(checked / embedded, 4) if embedded else None,
            "median_check_share_per_revision": round(statistics.median(per), 4) if per else None,
        },
        "one_sync": {
            "tokens_embedded": whole.tokens_embedded,
            "check_tokens": whole.model_check_tokens,
            "check_share_of_embedded": round(whole.model_check_tokens / whole.tokens_embedded, 4),
        },
    }, chosen


def tells_apart(texts: list[str], st: SentenceTransformerEmbedder) -> dict[str, Any]:
    """The cosine of each other answer to the held (torch, mean pooling) vector."""
    from sentence_transformers import SentenceTransformer, models

    from rechunk.integrations.onnx import OnnxEmbedder

    held = st.embed(texts)
    word = models.Transformer(str(st.folder))
    cls = SentenceTransformer(
        modules=[word, models.Pooling(word.get_word_embedding_dimension(), "cls"), models.Normalize()],
        device="cpu",
    )
    answers = {
        "same weights, ONNX Runtime": OnnxEmbedder().embed(texts),
        "same model, float16": held.astype(np.float16).astype(np.float32),
        "same weights, CLS pooling": cls.encode(texts, convert_to_numpy=True),
        "another model (hash)": HashModel(st).embed(texts),
    }
    out: dict[str, Any] = {}
    for name, vectors in answers.items():
        cosines = [cosine(a, b) for a, b in zip(vectors, held)]
        out[name] = {
            "min": round(min(cosines), 4),
            "median": round(statistics.median(cosines), 4),
            "max": round(max(cosines), 4),
            "refused": sum(c < SAME_MODEL_COSINE for c in cosines),
            "of": len(cosines),
        }
    return out


def main() -> None:
    st = SentenceTransformerEmbedder()
    prose = load_revisions()
    results: dict[str, Any] = {"machine": machine(), "threshold": SAME_MODEL_COSINE}
    results["prose"], chosen = cost(prose, st, None)
    if CODE.exists():
        code = load_revisions(CODE)
        language = {p["id"]: p["lang"] for p in code}
        made: dict[str, Any] = {}

        def pick(doc: rechunk.Document) -> Any:  # each file's language's code policy
            lang = language[doc.doc_id]
            if lang not in made:
                made[lang] = rechunk.policy_for(st, "code", language=lang)
            return made[lang]

        results["code"], chosen_code = cost(code, st, pick)
        chosen += chosen_code
    results["tells_apart"] = tells_apart(chosen, st)
    out = ROOT / "benchmarks" / "results" / "model_check.json"
    out.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    write_section("model_check", markdown(results))
    print(json.dumps(results, indent=2))


def markdown(results: dict[str, Any]) -> str:
    lines = [
        "## The model check (dev)",
        "",
        "`python benchmarks/model_check.py` (results/model_check.json; "
        f"{results['machine']}). A sync with a model not known by its weights embeds once "
        "more one input the collection or the cache holds and refuses the sync below cosine "
        f"{results['threshold']} (see [Limits](limits.md#a-server-that-changes-its-model-under-the-same-name-one-input-embedded-again-per-sync)). "
        "What it costs on the dev revision pairs (tokens; each revision in a sync of its "
        "own, then all of them in one sync):",
        "",
        "| pairs | revision syncs checked | revisions' tokens | check's tokens | share | median share per revision | one sync: tokens | check's tokens |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for name in ("prose", "code"):
        if name not in results:
            continue
        r = results[name]
        per, one = r["per_revision"], r["one_sync"]
        lines.append(
            f"| {name} ({r['pairs']}) | {per['syncs_checked']} | {per['tokens_embedded']:,} | "
            f"{per['check_tokens']:,} | {per['check_share_of_embedded']:.1%} | "
            f"{per['median_check_share_per_revision']:.1%} | {one['tokens_embedded']:,} | "
            f"{one['check_tokens']:,} |"
        )
    lines += [
        "",
        "What it tells apart: the inputs those checks chose, embedded by the packaged "
        "all-MiniLM-L6-v2 (torch, mean pooling: the vectors held), then answered otherwise "
        "(cosine to the held vector):",
        "",
        "| answered by | min | median | max | refused |",
        "|---|---|---|---|---|",
    ]
    for name, r in results["tells_apart"].items():
        lines.append(f"| {name} | {r['min']} | {r['median']} | {r['max']} | {r['refused']} of {r['of']} |")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
