"""A sentence-transformers model folder run by ONNX Runtime: no torch at run time.

:class:`OnnxEmbedder` reads the same folder facts as the torch backend
(:class:`~rechunk.integrations.sentence_transformers.SentenceTransformerEmbedder`:
pooling, normalisation, window, default prompt, tokenizer) and runs the
folder's transformer as an ONNX graph with ``onnxruntime``; pooling and
normalisation are done in numpy as the folder's modules say. Importing this
module imports neither onnxruntime, torch nor transformers; onnxruntime loads
on the first :meth:`OnnxEmbedder.embed` that has something to embed.

The ONNX file comes from a one-time export of the local folder
(:func:`export_onnx`, or ``python -m rechunk.integrations.onnx export
[FOLDER]``), which needs torch, sentence-transformers and onnx (the ``st``
extra). It is kept in a per-user cache (:func:`onnx_cache_dir`) under a key
hashed from the weights' identity, the model config and the export recipe:
never downloaded, never written into a project. Every export is checked
against the torch backend on fixed probe texts before it is kept; an export
whose vectors differ by more than :data:`PARITY_TOLERANCE` is refused. So an
ONNX export shares the torch backend's ``model_id`` and switching backend
re-embeds nothing. (A quantised graph would give other vectors and would
need an identity of its own; rechunk does not make one.)

An export is checked again every time it is loaded, so a graph changed after
its export (damaged bytes, a truncated copy, edited weights) never gives
vectors under the model's identity. Its sidecar ``export.json`` records the
file's size and sha256 and the torch model's vectors of two short probe texts
(:data:`LOAD_PROBES`); a load hashes the file (~0.07 s for MiniLM's 90 MB) and
embeds the probes in one tiny batch, which must match with cosine above
:data:`LOAD_MIN_COSINE`. A graph that fails is moved aside (its folder renamed
``<key>.damaged-<time>``, never deleted) and exported again where torch is
installed (an :class:`OnnxExportWarning` says so); elsewhere the load raises an
:class:`~rechunk.errors.EmbeddingError` naming the export command. An export
made by an older rechunk records no checksum: where torch is installed it is
compared with the torch model on every probe text and, if it matches, its
sidecar is completed; elsewhere it is refused with the same command (it is
not known to be damaged, so it stays where it is).
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import logging
import os
import shutil
import sys
import tempfile
import threading
import time
import warnings
from collections.abc import Iterator, Sequence
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import numpy as np

from rechunk._optional import require
from rechunk.errors import ConfigError, EmbeddingError, MissingDependencyError
from rechunk.integrations._st_folder import (
    DEFAULT_MODEL,
    ModelFolder,
    _file_sha256,
    _read_json,
    default_threads,
)
from rechunk.reuse.embedding import check_texts
from rechunk.reuse.identity import hash_fields

if TYPE_CHECKING:
    import numpy.typing as npt

__all__ = [
    "LOAD_MIN_COSINE",
    "LOAD_PROBES",
    "PARITY_TOLERANCE",
    "OnnxEmbedder",
    "OnnxExportWarning",
    "export_onnx",
    "exported_onnx",
    "onnx_cache_dir",
    "onnx_export_possible",
    "onnxruntime_installed",
]

log = logging.getLogger(__name__)

#: Version of the export recipe (graph inputs/outputs, opset, checks); part of the cache key.
EXPORT_RECIPE = "rechunk/onnx-export/v1"
OPSET = 17
#: Largest absolute difference allowed between an export's vectors and the torch
#: backend's on the probe texts (unit vectors; float32 noise is ~1e-7).
PARITY_TOLERANCE = 1e-5
_SUPPORTED_MODULES = ("Transformer", "Pooling", "Normalize")
_SUPPORTED_POOLING = ("cls", "mean", "max", "mean_sqrt_len")
_INPUT_NAMES = ("input_ids", "attention_mask", "token_type_ids")
#: Texts every export is checked on: short, long, punctuation, non-Latin scripts.
_PROBES = (
    "a",
    "How a sync publishes changes: chunk, plan, embed, publish, verify.",
    "Boundary drift, not edit size, drives most of the re-embedding cost. " * 12,
    "修订感知的分块：只重新嵌入逐字节的新输入。",
    "Ein Absatz auf Deutsch, mit Umlauten: äöü ß — und Zahlen 1,234.5!",
    "def f(x):\n    return {'key': [x, x * 2]}  # code, too",
)
#: Texts whose torch vectors an export records and every load embeds again (one tiny batch).
LOAD_PROBES = (_PROBES[1], _PROBES[3])
#: Smallest cosine allowed, at load, between a graph's vectors of :data:`LOAD_PROBES` and
#: the ones its export recorded (float32 noise is ~1e-7; weights scaled by 1.3 give ~0.99).
LOAD_MIN_COSINE = 0.99999


class OnnxExportWarning(UserWarning):
    """An exported graph failed its check at load and was moved aside and exported again."""


def onnx_cache_dir() -> Path:
    """Where exported ONNX files are kept: ``$RECHUNK_CACHE_DIR/onnx``, else
    ``$XDG_CACHE_HOME/rechunk/onnx``, else ``~/.cache/rechunk/onnx``."""
    root = os.environ.get("RECHUNK_CACHE_DIR")
    if root:
        return Path(root).expanduser() / "onnx"
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".cache"
    return base / "rechunk" / "onnx"


def onnxruntime_installed() -> bool:
    """Whether ``onnxruntime`` can be imported (found, not imported)."""
    return importlib.util.find_spec("onnxruntime") is not None


def onnx_export_possible() -> bool:
    """Whether this environment can export a folder (torch, sentence-transformers, onnx)."""
    return all(
        importlib.util.find_spec(name) is not None
        for name in ("torch", "sentence_transformers", "onnx")
    )


def _folder_of(model: str | os.PathLike[str] | ModelFolder | None) -> ModelFolder:
    return model if isinstance(model, ModelFolder) else ModelFolder(model)


def _check_exportable(folder: ModelFolder) -> None:
    """ConfigError for a folder this backend cannot run exactly as sentence-transformers does."""
    kinds = [kind for kind, _ in folder.modules]
    others = sorted({kind for kind in kinds if kind not in _SUPPORTED_MODULES})
    if others or kinds[:1] != ["Transformer"]:
        raise ConfigError(
            f"model {folder.folder} has modules {kinds}; the ONNX backend runs Transformer, "
            "Pooling and Normalize only: use SentenceTransformerEmbedder"
        )
    modes = folder.pooling_modes
    if not modes or any(mode not in _SUPPORTED_POOLING for mode in modes):
        raise ConfigError(
            f"model {folder.folder} pools with {modes or 'nothing'}; the ONNX backend supports "
            f"{', '.join(_SUPPORTED_POOLING)}: use SentenceTransformerEmbedder"
        )
    pooling = folder.module_folder("Pooling")
    config = _read_json(pooling / "config.json") if pooling else None
    if folder.default_prompt and isinstance(config, dict) and config.get("include_prompt") is False:
        raise ConfigError(
            f"model {folder.folder} leaves its prompt out of pooling; the ONNX backend does not: "
            "use SentenceTransformerEmbedder"
        )


def _export_key(folder: ModelFolder) -> str:
    """The cache key of a folder's export: the model (the packaged one's weights identity;
    a local folder's whole model_id, so that two copies of one model under two names do
    not each find the other's export, fail its check and export again), model config
    and recipe."""
    transformer = folder.module_folder("Transformer") or folder.folder
    config = transformer / "config.json"
    model = folder.weights_identity if folder.packaged else folder.model_id
    fields = [EXPORT_RECIPE, model, str(OPSET)]
    fields.append(_file_sha256(config) if config.is_file() else "no-config")
    digest: str = hash_fields("rechunk/onnx-key/v1", fields)
    return digest[:32]


def _do_lower_case(folder: ModelFolder) -> bool:
    transformer = folder.module_folder("Transformer") or folder.folder
    for candidate in (transformer, folder.folder):
        config = _read_json(candidate / "sentence_bert_config.json")
        if isinstance(config, dict) and "do_lower_case" in config:
            return bool(config["do_lower_case"])
    return False


def exported_onnx(
    model: str | os.PathLike[str] | ModelFolder | None = None,
    *,
    cache_dir: str | os.PathLike[str] | None = None,
) -> Path | None:
    """The folder holding ``model.onnx`` and ``export.json`` for ``model``, or None if not
    exported yet (or exported for another model identity).

    A presence check only: the graph's bytes are checked when it is loaded (and by
    :func:`export_onnx`), see the module docstring."""
    folder = _folder_of(model)
    root = Path(cache_dir) if cache_dir is not None else onnx_cache_dir()
    target = root / _export_key(folder)
    meta = _read_meta(target)
    if meta is None or meta.get("model_id") != folder.model_id:
        return None
    return target


def _read_meta(target: Path) -> dict[str, Any] | None:
    """The export's metadata, or None when the export is absent or incomplete."""
    if not (target / "model.onnx").is_file():
        return None
    try:
        meta = _read_json(target / "export.json")
    except ConfigError:
        return None
    if not isinstance(meta, dict) or meta.get("recipe") != EXPORT_RECIPE:
        return None
    return meta


# --------------------------------------------------------------------------- checks at load


def _command(folder: ModelFolder) -> str:
    """The shell command that exports (or checks) ``folder``'s graph."""
    packaged = folder.name == DEFAULT_MODEL and folder.folder == _packaged_folder()
    where = "" if packaged else f" {folder.folder}"
    return f"`python -m rechunk.integrations.onnx export{where}`"


def _packaged_folder() -> Path | None:
    try:
        return ModelFolder(None).folder
    except (ConfigError, MissingDependencyError):
        return None


def _stat_key(path: Path) -> tuple[int, int, int, int] | None:
    """What tells one file from its replacement (device, inode, size, mtime)."""
    try:
        st = path.stat()
    except OSError:
        return None
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)


def _reference(meta: dict[str, Any]) -> tuple[list[str], npt.NDArray[np.float32]] | None:
    """The probe texts and torch vectors an export recorded, or None if absent or malformed."""
    ref = meta.get("reference")
    if not isinstance(ref, dict):
        return None
    texts, vectors = ref.get("texts"), ref.get("vectors")
    if (
        not isinstance(texts, list)
        or not texts
        or not all(isinstance(t, str) and t for t in texts)
        or not isinstance(vectors, list)
        or len(vectors) != len(texts)
    ):
        return None
    try:
        array = np.asarray(vectors, dtype=np.float64)
    except (TypeError, ValueError):
        return None
    if array.ndim != 2 or array.shape[1] == 0 or not np.isfinite(array).all():
        return None
    return texts, array.astype(np.float32)


def _integrity(meta: dict[str, Any]) -> tuple[str, int] | None:
    """The recorded sha256 and size of ``model.onnx``, or None (an export made before they
    were recorded)."""
    digest, size = meta.get("sha256"), meta.get("bytes")
    if not isinstance(digest, str) or type(size) is not int:
        return None
    return digest, size


def _min_cosine(got: npt.NDArray[np.float32], expected: npt.NDArray[np.float32]) -> float:
    a, b = got.astype(np.float64), expected.astype(np.float64)
    norms = np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1)
    cosines = np.sum(a * b, axis=1) / np.maximum(norms, 1e-300)
    return float(cosines.min()) if np.isfinite(cosines).all() else float("nan")


class _Untrusted(Exception):
    """The export in a folder is not the graph its sidecar describes; ``args[0]`` says why."""


def _check_file(target: Path, meta: dict[str, Any]) -> None:
    """Raise :class:`_Untrusted` unless ``model.onnx`` has the recorded size and sha256 (and
    the sidecar records probe vectors to check it against)."""
    recorded = _integrity(meta)
    if recorded is None:
        raise _Untrusted("its export.json records no checksum")
    digest, size = recorded
    path = target / "model.onnx"
    try:
        actual = path.stat().st_size
        if actual != size:
            raise _Untrusted(f"model.onnx has {actual} bytes, its export recorded {size}")
        if _file_sha256(path) != digest:
            raise _Untrusted("model.onnx's sha256 differs from the one its export recorded")
    except OSError as exc:
        raise _Untrusted(f"cannot read model.onnx: {exc.strerror or exc}") from exc
    if _reference(meta) is None:
        raise _Untrusted("its export.json records no valid probe vectors")


def _fitted(text: str, embedder: Any) -> str:
    """``text``, or its longest prefix of whole words that ``embedder``'s window holds (the
    long probe is about 216 tokens: a model of a 128-token window could not be exported)."""
    window = embedder.max_input_tokens - embedder.special_tokens
    if embedder.count_tokens(text) <= window:
        return text
    words = text.split(" ")
    low, high = 1, len(words)  # the longest prefix that fits, by bisection
    while low < high:
        middle = (low + high + 1) // 2
        if embedder.count_tokens(" ".join(words[:middle])) <= window:
            low = middle
        else:
            high = middle - 1
    return " ".join(words[:low])


def _torch_parity(
    folder: ModelFolder, path: Path, reference: Any = None
) -> tuple[float, float, npt.NDArray[np.float32]]:
    """Largest absolute difference and smallest cosine between the graph at ``path`` (run
    by onnxruntime) and the torch backend on every probe text, and the torch vectors."""
    if reference is None:
        from rechunk.integrations.sentence_transformers import SentenceTransformerEmbedder

        reference = SentenceTransformerEmbedder(folder.folder, threads=1)
    probe = OnnxEmbedder(folder.folder, threads=1, onnx_file=path)
    texts = [_fitted(text, reference) for text in _PROBES]
    expected = reference.embed(texts)
    # the long probe alone too: a batch padded to its length and one that is not
    got = np.concatenate([probe.embed(texts), probe.embed([texts[2]])])
    both = np.concatenate([expected, expected[2:3]])
    diff = float(np.abs(got - both).max())
    return diff, _min_cosine(got, both), expected


def _integrity_fields(path: Path, expected: npt.NDArray[np.float32]) -> dict[str, Any]:
    """The sidecar fields a load checks: size, sha256 and the torch vectors of LOAD_PROBES."""
    rows = [_PROBES.index(text) for text in LOAD_PROBES]
    return {
        "bytes": path.stat().st_size,
        "sha256": _file_sha256(path),
        "reference": {
            "texts": list(LOAD_PROBES),
            "vectors": [[float(x) for x in expected[row]] for row in rows],
        },
    }


def _write_json_atomically(path: Path, data: dict[str, Any]) -> None:
    """Write ``path`` through a temporary file in its folder and a rename: a reader sees the
    old file or the new one, never half of one."""
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}-", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(json.dumps(data, indent=2))
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def _adopt(folder: ModelFolder, target: Path, meta: dict[str, Any]) -> None:
    """Check an export made before sidecars recorded a checksum against the torch model on
    every probe text and, if it matches, record its checksum and probe vectors.

    Raises :class:`_Untrusted` when it does not match, and
    :class:`~rechunk.errors.EmbeddingError` (naming the export command) where torch is
    not installed: such a graph cannot be checked here, and it is not known to be damaged.
    """
    if not onnx_export_possible():
        raise EmbeddingError(
            f"the ONNX export of {folder.name} in {target} was made by an older rechunk and "
            f"records no checksum, so it cannot be checked here: run {_command(folder)} "
            "where torch is installed (pip install 'rechunk[st]') to check it"
        )
    path = target / "model.onnx"
    before = _stat_key(path)
    log.info("checking the ONNX export in %s against the torch backend (once)", target)
    try:
        diff, _, expected = _torch_parity(folder, path)
    except EmbeddingError as exc:
        raise _Untrusted(f"it cannot run: {exc}") from exc
    if not diff <= PARITY_TOLERANCE:
        raise _Untrusted(
            f"it differs from the torch backend by {diff:.2e} (more than {PARITY_TOLERANCE:g})"
        )
    fields = _integrity_fields(path, expected)
    if _stat_key(path) != before:  # replaced meanwhile: check whatever is there now
        raise _Untrusted("model.onnx changed while it was being checked")
    _write_json_atomically(target / "export.json", {**meta, **fields, "adopted": True})


def _set_aside(target: Path) -> Path:
    """Rename a failed export folder to ``<key>.damaged-<time>`` (kept, never deleted)."""
    stamp = time.strftime("%Y%m%dT%H%M%S")
    aside = target.with_name(f"{target.name}.damaged-{stamp}")
    n = 1
    while aside.exists():
        aside = target.with_name(f"{target.name}.damaged-{stamp}-{n}")
        n += 1
    os.rename(target, aside)
    return aside


def _checked_session(folder: ModelFolder, target: Path, runner: OnnxEmbedder) -> Any:
    """An onnxruntime session on ``target``'s graph once it passed every check, or
    :class:`_Untrusted` saying why it did not (``runner`` tokenises and pools the probes)."""
    meta = _read_meta(target)
    if meta is None:
        raise _Untrusted("its model.onnx or export.json is missing or unreadable")
    if meta.get("model_id") != folder.model_id:
        raise _Untrusted(f"its export.json names another model ({meta.get('model_id')})")
    if _integrity(meta) is None:
        _adopt(folder, target, meta)
        meta = _read_meta(target)
        if meta is None or _integrity(meta) is None:
            raise _Untrusted("its export.json could not be completed")
    _check_file(target, meta)
    session = runner._open_session(target / "model.onnx")
    texts, expected = _reference(meta) or ([], np.zeros((0, 0), dtype=np.float32))
    try:
        got = runner._run(session, [i.name for i in session.get_inputs()], texts)
    except EmbeddingError as exc:
        raise _Untrusted(f"it fails on the probe texts: {exc}") from exc
    cosine = _min_cosine(got, expected) if got.shape == expected.shape else float("nan")
    if not cosine > LOAD_MIN_COSINE:
        raise _Untrusted(
            f"its vectors of the probe texts differ from the recorded ones (cosine {cosine:.6f}, "
            f"at least {LOAD_MIN_COSINE} expected)"
        )
    return session


def _trusted_session(folder: ModelFolder, root: Path, runner: OnnxEmbedder, export: str) -> Any:
    """A checked session on ``folder``'s export under ``root``, or None (see ``export``).

    An export that fails its check is moved aside, then, by ``export``: ``"auto"``
    exports it again where torch is installed (an :class:`OnnxExportWarning`) and
    raises :class:`~rechunk.errors.EmbeddingError` naming the export command
    elsewhere; ``"never"`` raises that error; ``"caller"`` warns and returns None (the
    caller exports). A missing export is exported by ``"auto"``; the others return None.
    """
    target = root / _export_key(folder)
    problem = ""
    for _ in range(3):
        if not target.exists():
            if export != "auto":
                return None
            export_onnx(folder, cache_dir=root)
        checked = _stat_key(target / "model.onnx")
        try:
            return _checked_session(folder, target, runner)
        except _Untrusted as exc:
            problem = str(exc)
        if _stat_key(target / "model.onnx") != checked:
            continue  # replaced meanwhile (another process repaired it): check the new one
        try:
            aside = _set_aside(target)
        except FileNotFoundError:
            continue
        except OSError as exc:
            raise EmbeddingError(
                f"the ONNX export of {folder.name} in {target} failed its check ({problem}) "
                f"and cannot be moved aside: {exc.strerror or exc}"
            ) from exc
        failed = f"the ONNX export of {folder.name} failed its check ({problem}); it was moved "
        if export == "never" or (export == "auto" and not onnx_export_possible()):
            raise EmbeddingError(
                f"{failed}aside to {aside}: run {_command(folder)} where torch is installed "
                "(pip install 'rechunk[st]') to export it again"
            )
        again = " and is exported again" if onnx_export_possible() else ""
        warnings.warn(f"{failed}aside to {aside}{again}", OnnxExportWarning, 4)
        if export == "caller":
            return None
    raise EmbeddingError(
        f"the ONNX export of {folder.name} in {target} keeps failing its check ({problem}); "
        f"run {_command(folder)} --force"
    )


# --------------------------------------------------------------------------- export


def export_onnx(
    model: str | os.PathLike[str] | ModelFolder | None = None,
    *,
    cache_dir: str | os.PathLike[str] | None = None,
    force: bool = False,
) -> Path:
    """Export a local sentence-transformers folder to ONNX once; returns the export folder.

    Needs torch, sentence-transformers and onnx (``pip install rechunk[st]``). The
    transformer is exported with dynamic batch and sequence axes (opset 17), then
    run with onnxruntime on fixed probe texts and compared with the torch backend:
    a largest absolute difference above :data:`PARITY_TOLERANCE` is an
    :class:`~rechunk.errors.EmbeddingError` and nothing is kept. The file and an
    ``export.json`` (model id, versions, the measured difference, the file's size
    and sha256, the torch vectors of :data:`LOAD_PROBES`) are written into a
    temporary folder and renamed into place, so a crash or a concurrent export
    never leaves a half-written export.

    An existing export is checked as a load checks it (and one made by an older
    rechunk against the torch backend); it is returned as is if it passes, else it
    is moved aside (an :class:`OnnxExportWarning`) and exported again. ``force``
    exports again whatever is there.
    """
    folder = _folder_of(model)
    _check_exportable(folder)
    root = Path(cache_dir) if cache_dir is not None else onnx_cache_dir()
    target = root / _export_key(folder)
    if not force and target.exists() and onnxruntime_installed():
        runner = (
            folder if isinstance(folder, OnnxEmbedder) else OnnxEmbedder(folder.folder, threads=1)
        )
        if _trusted_session(folder, root, runner, "caller") is not None:
            return target
    elif not force and exported_onnx(folder, cache_dir=root) is not None:
        return target  # nothing here can check (or run) it: onnxruntime is absent
    if not onnx_export_possible():
        missing = next(
            name
            for name in ("torch", "sentence_transformers", "onnx")
            if importlib.util.find_spec(name) is None
        )
        raise MissingDependencyError(missing.replace("_", "-"), "st")
    if not onnxruntime_installed():
        raise MissingDependencyError("onnxruntime", "onnx")
    try:
        root.mkdir(parents=True, exist_ok=True)
        work = Path(tempfile.mkdtemp(prefix=f".{target.name}-", dir=root))
    except OSError as exc:
        raise ConfigError(f"cannot write the ONNX cache {root}: {exc.strerror or exc}") from exc
    try:
        meta = _export_into(folder, work / "model.onnx")
        (work / "export.json").write_text(json.dumps(meta, indent=2), encoding="utf-8")
        if force and target.exists():
            shutil.rmtree(target, ignore_errors=True)
        try:
            os.rename(work, target)
        except OSError:
            if exported_onnx(folder, cache_dir=root) is None:  # not another process's export
                raise
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return target


def _export_into(folder: ModelFolder, path: Path) -> dict[str, Any]:
    """Export ``folder``'s transformer to ``path``, check it, and return the export metadata."""
    from rechunk.integrations.sentence_transformers import SentenceTransformerEmbedder

    torch = require("torch", "st")
    require("onnx", "st")
    reference = SentenceTransformerEmbedder(folder.folder, threads=1)
    st_model = reference._load()
    transformer = st_model[0]
    auto_model = getattr(transformer, "auto_model", None) or getattr(transformer, "model", None)
    if auto_model is None:
        raise ConfigError(f"cannot find the transformer model inside {folder.folder}")
    import inspect

    accepted = inspect.signature(auto_model.forward).parameters
    names = [name for name in _INPUT_NAMES if name in accepted]
    if names[:2] != ["input_ids", "attention_mask"]:
        raise ConfigError(f"model {folder.folder} does not take input_ids and attention_mask")

    class _Hidden(torch.nn.Module):  # type: ignore[misc,name-defined]
        def __init__(self, inner: Any) -> None:
            super().__init__()
            self.inner = inner

        def forward(self, *inputs: Any) -> Any:
            out = self.inner(**dict(zip(names, inputs)), return_dict=True)
            return out.last_hidden_state

    sample = torch.ones((2, 8), dtype=torch.long)
    axes = {name: {0: "batch", 1: "sequence"} for name in [*names, "last_hidden_state"]}
    # path lies in a temporary folder of the cache, renamed into place when checked
    log.info(
        "exporting %s to ONNX once (later runs load it from %s)",
        folder.folder,
        path.parent.parent,
    )
    auto_model.eval()
    with torch.no_grad(), warnings.catch_warnings(), _quiet_stderr():
        warnings.simplefilter("ignore")
        try:
            torch.onnx.export(
                _Hidden(auto_model),
                tuple(sample if n != "token_type_ids" else torch.zeros_like(sample) for n in names),
                str(path),
                input_names=names,
                output_names=["last_hidden_state"],
                dynamic_axes=axes,
                opset_version=OPSET,
                do_constant_folding=True,
                dynamo=False,
            )
        except Exception as exc:
            raise EmbeddingError(f"cannot export {folder.folder} to ONNX: {exc}") from exc
    diff, cosine, expected = _torch_parity(folder, path, reference)
    if not diff <= PARITY_TOLERANCE:
        raise EmbeddingError(
            f"the ONNX export of {folder.folder} differs from the torch backend by {diff:.2e} "
            f"(more than {PARITY_TOLERANCE:g}); not kept: use SentenceTransformerEmbedder"
        )
    ort = require("onnxruntime", "onnx")
    return {
        "recipe": EXPORT_RECIPE,
        "model_id": folder.model_id,
        "source": str(folder.folder),
        "inputs": names,
        "opset": OPSET,
        "torch": str(torch.__version__),
        "onnxruntime": str(ort.__version__),
        "probe_max_abs_diff": diff,
        "probe_min_cosine": cosine,
        **_integrity_fields(path, expected),
    }


@contextlib.contextmanager
def _quiet_stderr() -> Any:
    """Silence the exporter's C++ diagnostics (written to fd 2, outside ``warnings``)."""
    try:
        saved = os.dup(2)
    except OSError:  # pragma: no cover - no fd 2
        yield
        return
    try:
        sys.stderr.flush()
        with open(os.devnull, "wb") as devnull:
            os.dup2(devnull.fileno(), 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


#: padded tokens in one run at most, with ``release_memory``: 8 inputs of 256 tokens (a
#: batch of 32 of them mapped some 250 MB while it ran; 8 at a time, about a quarter of
#: that, and on this 2-core machine 8 long inputs a run embedded faster than 32: 0.78x
#: the time, A/B at load 3)
RELEASED_RUN_TOKENS: Final = 2048


class OnnxEmbedder(ModelFolder):
    """An Embedder running a local sentence-transformers folder with ONNX Runtime on CPU.

    ``model``: as for
    :class:`~rechunk.integrations.sentence_transformers.SentenceTransformerEmbedder`
    (``None`` is the packaged all-MiniLM-L6-v2). ``model_id``, ``dimension``,
    ``max_input_tokens``, ``tokenizer``, :attr:`special_tokens` and
    :meth:`count_tokens` are the torch backend's, read from the same folder: the
    export is checked to give the same vectors (see the module docstring), so a
    collection or cache filled by one backend is reused by the other.

    ``export``: what the first embed does when the folder has no export in the
    cache yet: ``"auto"`` (default) exports it where torch, sentence-transformers
    and onnx are installed (a one-time cost of seconds) and otherwise raises
    :class:`~rechunk.errors.MissingDependencyError`; ``"never"`` raises
    :class:`~rechunk.errors.ConfigError` telling how to export.
    ``onnx_file``: run this exported graph instead of the cached export (the
    caller vouches that it is an export of this folder).

    ``threads``: onnxruntime intra-op threads (per embedder, not process-global);
    ``None`` means :func:`~rechunk.integrations.sentence_transformers.default_threads`.
    Inputs are embedded ``batch_size`` at a time, grouped by length so that
    little padding is computed; an input over the window is an
    :class:`~rechunk.errors.EmbeddingError` before anything runs.

    ``release_memory``: give the memory a batch's run took back after the run
    (see :attr:`release_memory`); off by default, on in ``rechunk watch``.
    """

    def __init__(
        self,
        model: str | os.PathLike[str] | None = None,
        *,
        batch_size: int = 32,
        threads: int | None = None,
        cache_dir: str | os.PathLike[str] | None = None,
        export: str = "auto",
        onnx_file: str | os.PathLike[str] | None = None,
        release_memory: bool = False,
    ) -> None:
        if type(batch_size) is not int or batch_size <= 0:
            raise ConfigError(f"batch_size must be a positive int, got {batch_size!r}")
        if threads is not None and (type(threads) is not int or threads <= 0):
            raise ConfigError(f"threads must be a positive int or None, got {threads!r}")
        if export not in ("auto", "never"):
            raise ConfigError(f"export must be 'auto' or 'never', got {export!r}")
        if not onnxruntime_installed():
            raise MissingDependencyError("onnxruntime", "onnx")
        super().__init__(model)
        _check_exportable(self)
        self.batch_size = batch_size
        self.threads = threads if threads is not None else default_threads()
        self.export = export
        self._cache_dir = Path(cache_dir) if cache_dir is not None else None
        self._onnx_file = Path(onnx_file) if onnx_file is not None else None
        self._lower = _do_lower_case(self)
        self._load_lock = threading.Lock()
        self._session: Any = None
        self._inputs: list[str] = []
        self._run_options: Any = None
        self.release_memory = release_memory

    @property
    def release_memory(self) -> bool:
        """Whether each run gives its working memory back when it ends.

        onnxruntime serves a run's tensors from a memory arena that grows to the largest
        run it has seen (the largest batch of the longest inputs: some hundreds of MB for
        a batch of 32 full-window inputs) and keeps it for the life of the session. A
        one-shot sync ends soon after; a process that embeds now and then for hours
        (``rechunk watch``) kept the high-water mark of the largest batch it happened to
        meet, and its resident memory stepped up whenever a larger one came. With this
        on, onnxruntime shrinks the arena back to its first region after every run
        (its ``memory.enable_memory_arena_shrinkage`` run option). Each run then maps its
        working memory afresh, and holds at most :data:`RELEASED_RUN_TOKENS` padded
        tokens (fewer inputs per run when they are long), so that what a run maps stays
        small too: attention takes memory in the square of the length."""
        return self._run_options is not None

    @release_memory.setter
    def release_memory(self, value: bool) -> None:
        if type(value) is not bool:
            raise ConfigError(f"release_memory must be a bool, got {value!r}")
        if not value:
            self._run_options = None
            return
        if self._run_options is None:
            options = require("onnxruntime", "onnx").RunOptions()
            options.add_run_config_entry("memory.enable_memory_arena_shrinkage", "cpu:0")
            self._run_options = options

    def __repr__(self) -> str:
        return f"OnnxEmbedder({self._name!r}, threads={self.threads})"

    @property
    def loaded(self) -> bool:
        """Whether the ONNX session has been created; only ``embed`` creates it."""
        return self._session is not None

    @property
    def exported(self) -> bool:
        """Whether the folder's export is in the cache (or ``onnx_file`` was given)."""
        if self._onnx_file is not None:
            return self._onnx_file.is_file()
        return exported_onnx(self, cache_dir=self._cache_dir) is not None

    def _load(self) -> Any:
        """The session to run: ``onnx_file`` as given, else the cached export once it passed
        its check (exported first, or again after a failed check, if allowed)."""
        with self._load_lock:
            if self._session is not None:
                return self._session
            if self._onnx_file is not None:
                if not self._onnx_file.is_file():
                    raise ConfigError(f"onnx_file {self._onnx_file} does not exist")
                session = self._open_session(self._onnx_file)
            else:
                root = self._cache_dir if self._cache_dir is not None else onnx_cache_dir()
                session = _trusted_session(self, root, self, self.export)
                if session is None:
                    raise ConfigError(
                        f"model {self._name} has no ONNX export in {root}; run `python -m "
                        f"rechunk.integrations.onnx export {self._folder}` where torch is "
                        "installed"
                    )
            self._inputs = [i.name for i in session.get_inputs()]
            self._session = session
            return session

    def _open_session(self, path: Path) -> Any:
        """An onnxruntime session on ``path`` (CPU, this embedder's threads), inputs checked."""
        ort = require("onnxruntime", "onnx")
        options = ort.SessionOptions()
        options.intra_op_num_threads = self.threads
        options.inter_op_num_threads = 1
        options.log_severity_level = 3
        # onnxruntime plans and keeps a memory pattern for every input shape it meets, and
        # inputs here come in every batch size and length: a long-running process (rechunk
        # watch) grew with each new shape (6 MB over 720 batches of 1-8 inputs of 5-120
        # words, after the largest shape had run; 1.7 MB without). No speed difference
        # showed beyond the machine's noise.
        options.enable_mem_pattern = False
        try:
            session = ort.InferenceSession(
                str(path), sess_options=options, providers=["CPUExecutionProvider"]
            )
        except Exception as exc:
            raise EmbeddingError(f"cannot load the ONNX model {path}: {exc}") from exc
        unknown = {i.name for i in session.get_inputs()} - set(_INPUT_NAMES)
        if unknown:
            raise EmbeddingError(f"the ONNX model {path} takes unknown inputs {unknown}")
        return session

    @cached_property
    def _pad_id(self) -> int:
        """The id padding is filled with (masked out; it matters only to models that derive
        positions from it, as RoBERTa does)."""
        for name in ("tokenizer_config.json", "special_tokens_map.json"):
            config = _read_json(self._folder / name)
            token = config.get("pad_token") if isinstance(config, dict) else None
            if isinstance(token, dict):
                token = token.get("content")
            found = self.tokenizer.token_to_id(token) if isinstance(token, str) else None
            if found is not None:
                return int(found)
        return 0

    def _encode(self, texts: list[str]) -> list[list[int]]:
        prompt = self.default_prompt
        prepared = [(prompt + t).lower() if self._lower else prompt + t for t in texts]
        return [e.ids for e in self.tokenizer.encode_batch(prepared, add_special_tokens=True)]

    def _pool(self, hidden: Any, mask: Any) -> npt.NDArray[np.float32]:
        mask_f = mask[:, :, None].astype(np.float32)
        counts = np.maximum(mask_f.sum(axis=1), 1e-9)
        parts = []
        for mode in self.pooling_modes:
            if mode == "cls":
                parts.append(hidden[np.arange(len(hidden)), mask.argmax(axis=1)])
            elif mode == "max":
                parts.append(np.where(mask_f > 0, hidden, -np.inf).max(axis=1))
            elif mode == "mean":
                parts.append((hidden * mask_f).sum(axis=1) / counts)
            else:  # mean_sqrt_len
                parts.append((hidden * mask_f).sum(axis=1) / np.sqrt(counts))
        pooled = np.concatenate(parts, axis=1) if len(parts) > 1 else parts[0]
        if self.normalize:
            norms = np.linalg.norm(pooled, axis=1, keepdims=True)
            pooled = pooled / np.maximum(norms, 1e-12)
        result: npt.NDArray[np.float32] = pooled.astype(np.float32, copy=False)
        return result

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        """Float32 vectors ``(len(texts), dimension)``; over-long inputs raise EmbeddingError.

        Lengths are checked for every input before the model is loaded or run.
        An empty list returns shape ``(0, dimension)`` without loading anything.
        """
        items = check_texts(texts)
        out = np.zeros((len(items), self.dimension), dtype=np.float32)
        if not items:
            return out
        self.check_lengths(items)
        session = self._load()
        return self._run(session, self._inputs, items)

    def _batches(self, order: list[int], ids: list[list[int]]) -> Iterator[list[int]]:
        """``order`` (shortest input first) in runs of at most ``batch_size`` inputs; with
        ``release_memory``, also of at most :data:`RELEASED_RUN_TOKENS` padded tokens."""
        cap = RELEASED_RUN_TOKENS if self.release_memory else None
        rows: list[int] = []
        for i in order:
            full = len(rows) == self.batch_size
            if rows and (full or (cap is not None and (len(rows) + 1) * len(ids[i]) > cap)):
                yield rows
                rows = []
            rows.append(i)
        if rows:
            yield rows

    def _run(self, session: Any, inputs: list[str], items: list[str]) -> npt.NDArray[np.float32]:
        """Vectors of ``items`` (checked already) from ``session``, batched by length."""
        out = np.zeros((len(items), self.dimension), dtype=np.float32)
        if not items:
            return out
        ids = self._encode(items)
        order = sorted(range(len(items)), key=lambda i: len(ids[i]))
        pad = self._pad_id
        for rows in self._batches(order, ids):
            width = max(len(ids[i]) for i in rows)
            input_ids = np.full((len(rows), width), pad, dtype=np.int64)
            mask = np.zeros((len(rows), width), dtype=np.int64)
            for r, i in enumerate(rows):
                input_ids[r, : len(ids[i])] = ids[i]
                mask[r, : len(ids[i])] = 1
            feed = {"input_ids": input_ids, "attention_mask": mask}
            if "token_type_ids" in inputs:
                feed["token_type_ids"] = np.zeros_like(input_ids)
            try:
                (hidden,) = session.run(["last_hidden_state"], feed, self._run_options)
            except Exception as exc:
                raise EmbeddingError(f"model {self._name} failed to embed: {exc}") from exc
            pooled = self._pool(hidden, mask)
            if pooled.shape[1] != self.dimension:
                raise EmbeddingError(
                    f"model {self._name} gave vectors of {pooled.shape[1]} values, "
                    f"not {self.dimension}"
                )
            out[rows] = pooled
        return out


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m rechunk.integrations.onnx export [FOLDER] [--force]``."""
    import argparse

    parser = argparse.ArgumentParser(
        prog="python -m rechunk.integrations.onnx",
        description="Export a local sentence-transformers folder to ONNX once (needs torch).",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    export_p = sub.add_parser("export", help="export FOLDER (default: the packaged MiniLM)")
    export_p.add_argument("folder", nargs="?", default=None, metavar="FOLDER")
    export_p.add_argument("--force", action="store_true", help="export again even if cached")
    export_p.add_argument("--cache-dir", default=None, help=f"default: {onnx_cache_dir()}")
    args = parser.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    try:
        target = export_onnx(args.folder, cache_dir=args.cache_dir, force=args.force)
    except (ConfigError, EmbeddingError, MissingDependencyError) as exc:
        print(f"rechunk: error: {exc}", file=sys.stderr)
        return 2
    meta = _read_meta(target) or {}
    print(f"{target / 'model.onnx'}")
    print(
        f"  model    {meta.get('model_id', '?').split(';')[0]}\n"
        f"  checked  max abs difference {meta.get('probe_max_abs_diff', float('nan')):.2e} "
        "against the torch backend"
    )
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
