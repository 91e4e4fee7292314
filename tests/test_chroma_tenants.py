"""A shared Chroma server: the tenant and database a store reaches, and its credentials.

Against a real ``chroma run`` server (tests/chroma_server.py) with tenants and databases
made by chromadb's AdminClient. Chroma 1.5's server has no authentication of its own, so
the token tests put a small token-checking reverse proxy of their own (on 127.0.0.1) in
front of it, as a shared server's operators do.

Before: the CLI had no way to name a tenant or database (a query in a store URI was
refused), ``CHROMA_TENANT`` / ``CHROMA_DATABASE`` were ignored (the sync landed in
``default_tenant/default_database``, exit 0), ``http_client`` took no ``tenant=``, a
wrong path prefix said nothing (``...: (trace ID: 000...)``), and a missing or wrong token
was exit 3, which cron's retry logic retried for ever.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

chromadb = pytest.importorskip("chromadb")
from chromadb.config import Settings  # noqa: E402
from chromadb.errors import NotFoundError  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
import hash_embedder  # noqa: E402
from chroma_server import HOST, running_chroma  # noqa: E402
from hash_embedder import HashEmbedder  # noqa: E402
from reverse_proxy import ReverseProxy  # noqa: E402

import rechunk  # noqa: E402
from rechunk.adapters.chroma import LOCK_COLLECTION, ChromaStore, http_client  # noqa: E402
from rechunk.cli import main  # noqa: E402
from rechunk.errors import ConfigError, TransientError  # noqa: E402

pytestmark = pytest.mark.timeout(240)

TOKEN = "s3cr3t-team-token"
TOKEN_PROVIDER = "chromadb.auth.token_authn.TokenAuthClientProvider"
#: tenant -> its databases (default_tenant/default_database is the server's own)
PLACES = {"team_a": ("kb_main", "scratch"), "team_b": ("kb_main",)}
ENV_VARS = (
    "CHROMA_TENANT",
    "CHROMA_DATABASE",
    "CHROMA_CLIENT_AUTH_PROVIDER",
    "CHROMA_CLIENT_AUTH_CREDENTIALS",
    "CHROMA_AUTH_TOKEN_TRANSPORT_HEADER",
)


@pytest.fixture(scope="module")
def chroma(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """A Chroma server with the tenants and databases of :data:`PLACES`."""
    with running_chroma(tmp_path_factory.mktemp("chroma-tenants") / "data") as server:
        made = admin(server)
        for tenant, databases in PLACES.items():
            made.create_tenant(tenant)
            for database in databases:
                made.create_database(database, tenant=tenant)
        yield server


def admin(chroma: Any) -> Any:
    """chromadb's AdminClient of the server (tenants and databases)."""
    return chromadb.AdminClient(
        Settings(chroma_api_impl="chromadb.api.fastapi.FastAPI", chroma_server_host=HOST,
                 chroma_server_http_port=chroma.port, anonymized_telemetry=False)
    )  # fmt: skip


@pytest.fixture
def workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A folder with two documents (the current folder), no Chroma variable set."""
    for name in ENV_VARS:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(tmp_path)
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.md").write_text("# Team A\n\nOnly team_a should see this.\n", encoding="utf-8")
    (docs / "b.md").write_text("# Billing\n\nInvoices are sent monthly.\n", encoding="utf-8")
    return tmp_path


def at(chroma: Any, tenant: str = "default_tenant", database: str = "default_database") -> Any:
    """A plain chromadb client of the server, in ``tenant``/``database``."""
    return chromadb.HttpClient(host=HOST, port=chroma.port, tenant=tenant, database=database,
                               settings=Settings(anonymized_telemetry=False))  # fmt: skip


def counts(chroma: Any, tenant: str = "default_tenant", database: str = "default_database"
           ) -> dict[str, int]:  # fmt: skip
    """Every collection of a database and its record count."""
    return {c.name: c.count() for c in at(chroma, tenant, database).list_collections()}


def everywhere(chroma: Any) -> dict[str, dict[str, int]]:
    """:func:`counts` of every database of the server."""
    found = {"default_tenant/default_database": counts(chroma)}
    for tenant, databases in PLACES.items():
        for database in databases:
            found[f"{tenant}/{database}"] = counts(chroma, tenant, database)
    return found


def foreign(chroma: Any, name: str, tenant: str, database: str) -> None:
    """A collection ``name`` in ``tenant``/``database`` holding one record of another
    tool (what a sync meant for another database must leave alone)."""
    collection = at(chroma, tenant, database).get_or_create_collection(
        name, embedding_function=None
    )
    collection.upsert(ids=["note-1"], embeddings=[[0.5] * 16], documents=["someone else's"])


def one_error_line(err: str) -> str:
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("rechunk: error: "), err
    return lines[0]


def uri(chroma: Any, query: str = "", prefix: str = "", port: int | None = None) -> str:
    return f"chroma+http://{HOST}:{port or chroma.port}{prefix}{'?' + query if query else ''}"


# -- the CLI: a tenant and database named in the store URI ------------------------------


def test_a_sync_into_a_tenant_database_lands_there_and_nowhere_else(
    chroma: Any, workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """sync, status, query and a pruning sync all reach team_a/kb_main; same-named
    collections in other databases keep their records; the writer-lock collection is in
    team_a/kb_main (before: the query was refused, exit 2)."""
    name = "shared_kb"
    for tenant, database in (("default_tenant", "default_database"), ("team_b", "kb_main")):
        foreign(chroma, name, tenant, database)
    store = uri(chroma, "tenant=team_a&database=kb_main")
    assert main(["sync", "docs", "--store", store, "--collection", name]) == 0, capsys.readouterr()
    capsys.readouterr()
    team_a = counts(chroma, "team_a", "kb_main")
    assert team_a[name] >= 2 and LOCK_COLLECTION in team_a, team_a
    assert counts(chroma)[name] == 1 and LOCK_COLLECTION not in counts(chroma)
    assert counts(chroma, "team_b", "kb_main")[name] == 1
    # the reading commands reach the same database
    assert main(["status", "--store", store, "--collection", name]) == 0
    out = capsys.readouterr().out
    assert f"collection {name}: 2 documents" in out and "a.md" in out, out
    assert main(["query", "invoices monthly", "--store", store, "--collection", name,
                 "-k", "1"]) == 0  # fmt: skip
    assert "b.md" in capsys.readouterr().out
    # the default database's same-named collection is not what status reads
    assert main(["status", "--store", uri(chroma), "--collection", name]) == 0
    assert "0 documents" in capsys.readouterr().out
    # --prune deletes in team_a/kb_main only
    (workdir / "docs" / "b.md").unlink()
    assert main(["sync", "docs", "--store", store, "--collection", name, "--prune"]) == 0
    capsys.readouterr()
    stored = at(chroma, "team_a", "kb_main").get_collection(name).get(include=["metadatas"])
    assert {m["doc_id"] for m in stored["metadatas"]} == {"a.md"}
    assert counts(chroma)[name] == 1 and counts(chroma, "team_b", "kb_main")[name] == 1


def test_a_variable_naming_another_place_than_the_uri_is_refused(
    chroma: Any, workdir: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    """Chroma's own CHROMA_TENANT / CHROMA_DATABASE were ignored: the sync landed in
    default_tenant/default_database, exit 0. rechunk does not read them either (a store
    URI names one store whatever the environment, and what .rechunk/ records about it is
    keyed by it), but one that names another place than the URI reaches is refused
    before anything is opened; a URI that names the place is followed."""
    monkeypatch.setenv("CHROMA_TENANT", "team_a")
    monkeypatch.setenv("CHROMA_DATABASE", "kb_main")
    before = everywhere(chroma)
    for store, said in (
        (uri(chroma), "CHROMA_TENANT is set to 'team_a', but no tenant is named"),
        (uri(chroma, "tenant=team_a"), "CHROMA_DATABASE is set to 'kb_main'"),
    ):
        assert main(["sync", "docs", "--store", store, "--collection", "env_kb"]) == 2
        line = one_error_line(capsys.readouterr().err)
        assert said in line and "?" in line, line
    assert everywhere(chroma) == before
    # the URI names both: followed (the variables name the same place here)
    store = uri(chroma, "tenant=team_a&database=kb_main")
    assert main(["sync", "docs", "--store", store, "--collection", "env_kb"]) == 0
    assert main(["status", "--store", store, "--collection", "env_kb"]) == 0
    assert "env_kb: 2 documents" in capsys.readouterr().out
    assert counts(chroma, "team_a", "kb_main")["env_kb"] >= 2
    assert "env_kb" not in counts(chroma)
    # and wins over variables that name another place
    store = uri(chroma, "tenant=team_b&database=kb_main")
    assert main(["sync", "docs", "--store", store, "--collection", "uri_kb"]) == 0
    capsys.readouterr()
    assert counts(chroma, "team_b", "kb_main")["uri_kb"] >= 2
    assert "uri_kb" not in counts(chroma, "team_a", "kb_main") and "uri_kb" not in counts(chroma)
    # variables naming Chroma's defaults are no conflict
    monkeypatch.setenv("CHROMA_TENANT", "default_tenant")
    monkeypatch.setenv("CHROMA_DATABASE", "default_database")
    assert main(["status", "--store", uri(chroma), "--collection", "env_kb"]) == 3  # none yet
    capsys.readouterr()


@pytest.mark.parametrize(
    ("query", "env", "said"),
    [
        ("tenant=nobody&database=kb_main", {}, "no tenant 'nobody'"),
        ("tenant=team_a&database=nowhere", {}, "no database 'nowhere' in tenant 'team_a'"),
        ("tenant=nobody", {}, "no tenant 'nobody'"),
        ("tenant=team_b&database=scratch", {}, "no database 'scratch'"),
    ],
)
def test_a_tenant_or_database_that_does_not_exist_is_refused_and_nothing_is_made(
    chroma: Any, workdir: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str], query: str, env: dict[str, str], said: str,
) -> None:  # fmt: skip
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    before = everywhere(chroma)
    for args in (["sync", "docs"], ["status"]):
        assert main([*args, "--store", uri(chroma, query), "--collection", "nowhere_kb"]) == 2
        line = one_error_line(capsys.readouterr().err)
        assert said in line and "creates no tenant or database" in line, line
    assert everywhere(chroma) == before
    if "nobody" in said:
        with pytest.raises(NotFoundError):
            admin(chroma).get_tenant("nobody")
    for tenant, databases in PLACES.items():
        names = {d["name"] for d in admin(chroma).list_databases(tenant=tenant)}
        assert names == set(databases)


@pytest.mark.parametrize(
    ("query", "said"),
    [
        ("token=" + TOKEN, "names something other than tenant= and database="),
        ("tenant=team_a&tenant=team_b", "names the tenant more than once"),
        ("tenant=team_a/kb_main", "not a tenant name"),
        ("database=", "not a database name"),
    ],
)
def test_a_query_it_cannot_honour_is_refused(
    chroma: Any, workdir: Path, capsys: pytest.CaptureFixture[str], query: str, said: str
) -> None:
    assert main(["status", "--store", uri(chroma, query)]) == 2
    line = one_error_line(capsys.readouterr().err)
    assert said in line and TOKEN not in line, line


def test_a_wrong_path_prefix_says_what_is_wrong(
    chroma: Any, workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Before: 'cannot connect to the Chroma server at ...:  (trace ID: 000...)'. Still
    exit 3, as a Qdrant server's 404 is (tests/test_cli.py)."""
    before = everywhere(chroma)
    store = uri(chroma, prefix="/team_a/kb_main")
    for args in (["sync", "docs"], ["status"]):
        assert main([*args, "--store", store]) == 3
        line = one_error_line(capsys.readouterr().err)
        assert "HTTP 404" in line and "is the path prefix /team_a/kb_main right?" in line, line
        assert "?tenant=T&database=D" in line, line
        reason = line.split(f"{HOST}:{chroma.port}/team_a/kb_main:", 1)[1].strip()
        assert reason and not reason.startswith("(trace ID"), line
    assert everywhere(chroma) == before


# -- the Python API ---------------------------------------------------------------------


def test_http_client_takes_a_tenant_and_database(
    chroma: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ENV_VARS:
        monkeypatch.delenv(name, raising=False)
    embedder = HashEmbedder()
    chunker = rechunk.StructuredChunker()
    docs = [rechunk.Document("api.md", "# API\n\nWritten through http_client.\n")]
    foreign(chroma, "api_kb", "team_b", "kb_main")
    client = http_client(HOST, chroma.port, tenant="team_a", database="kb_main")
    assert (client.tenant, client.database) == ("team_a", "kb_main")
    store = ChromaStore(client, "api_kb")
    store.ensure_collection(embedder.dimension)
    report = rechunk.sync(docs, store, chunker=chunker, embedder=embedder)
    assert report.stale_check == "passed"
    assert counts(chroma, "team_a", "kb_main")["api_kb"] == 1
    assert counts(chroma, "team_b", "kb_main")["api_kb"] == 1
    assert "api_kb" not in counts(chroma)
    # Chroma's variables are not read: one naming another place than the client would
    # reach is refused; what is given is followed
    monkeypatch.setenv("CHROMA_TENANT", "team_b")
    monkeypatch.setenv("CHROMA_DATABASE", "kb_main")
    for kwargs in ({}, {"tenant": "team_a"}):
        with pytest.raises(ConfigError, match=r"is set to .*, but no \w+ is named"):
            http_client(HOST, chroma.port, **kwargs)
    client = http_client(HOST, chroma.port, tenant="team_a", database="kb_main")
    assert (client.tenant, client.database) == ("team_a", "kb_main")
    monkeypatch.delenv("CHROMA_TENANT")
    monkeypatch.delenv("CHROMA_DATABASE")
    # one that does not exist: a ConfigError (not retry-safe), nothing made
    before = everywhere(chroma)
    for kwargs in ({"tenant": "nobody"}, {"tenant": "team_a", "database": "nowhere"}):
        with pytest.raises(ConfigError, match="creates no tenant or database") as refused:
            http_client(HOST, chroma.port, **kwargs)
        assert not isinstance(refused.value, TransientError)
    assert everywhere(chroma) == before


def test_uri_spellings_of_a_tenant_and_database(monkeypatch: pytest.MonkeyPatch) -> None:
    """The manifest's key of a store names the database its URI reaches (the defaults left
    out, as earlier versions wrote it); the Ray engine ships that place to workers."""
    from rechunk.adapters.uri import _server, canonical_uri, chroma_place, resolved_uri

    for name in ENV_VARS:
        monkeypatch.delenv(name, raising=False)
    bare = "chroma+http://127.0.0.1:8000"
    assert canonical_uri(bare + "/") == bare
    assert canonical_uri(bare + "?database=default_database") == bare
    named = f"{bare}?tenant=team_a&database=kb_main"
    assert canonical_uri("CHROMA+HTTP://127.0.0.1:8000/?database=kb_main&tenant=team_a") == named
    assert resolved_uri(bare) == f"{bare}?tenant=default_tenant&database=default_database"
    assert resolved_uri(named) == named
    # the key never depends on the environment: a bare URI is the default database's,
    # whatever CHROMA_TENANT says (before, a key recorded by an older version or with no
    # variable set was read as the variable's place: two stores' records merged)
    monkeypatch.setenv("CHROMA_TENANT", "team_a")
    monkeypatch.setenv("CHROMA_DATABASE", "kb_main")
    assert canonical_uri(bare) == bare and canonical_uri(named) == named
    with pytest.raises(ConfigError, match="CHROMA_TENANT is set to 'team_a'"):
        resolved_uri(bare)
    assert chroma_place(named) == ("team_a", "kb_main")
    assert resolved_uri("qdrant+http://h:6333") == "qdrant+http://h:6333"
    monkeypatch.delenv("CHROMA_TENANT")
    monkeypatch.delenv("CHROMA_DATABASE")
    # chroma+https, with a prefix (the port is 443 unless given)
    https = _server("chroma+https://kb.example.org/chroma?tenant=t1", required_port=False,
                    secrets="X", query=("tenant", "database"))  # fmt: skip
    assert (https.scheme, https.host, https.port, https.path, https.query) == (
        "https", "kb.example.org", None, "/chroma", {"tenant": "t1"})  # fmt: skip
    assert chroma_place("chroma+https://kb.example.org/chroma?tenant=t1") == ("t1", "default_database")


def test_the_default_port_and_the_host_case_are_one_store(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``chroma+https://HOST`` reaches port 443, so ``HOST:443`` is the same store and has
    the same key (before: two keys, so ``status`` and ``watch`` with one spelling did not
    find what ``sync`` with the other recorded). ``chroma+http://`` has no default port
    (one must be given: Chroma's own 8000 is not assumed), so no port is dropped there."""
    from rechunk.adapters.uri import canonical_uri
    from rechunk.cli.manifest import _put, _spellings

    for name in ENV_VARS:
        monkeypatch.delenv(name, raising=False)
    one = "chroma+https://kb.example.org/chroma?tenant=t1"
    for spelling in (
        "chroma+https://kb.example.org:443/chroma?tenant=t1",
        "chroma+https://KB.Example.ORG:443/chroma/?tenant=t1&database=default_database",
        "CHROMA+HTTPS://kb.example.org:/chroma?tenant=t1",
    ):
        assert canonical_uri(spelling) == one, spelling
    assert canonical_uri("chroma+https://[::1]:443") == "chroma+https://[::1]"
    for kept in ("chroma+https://kb.example.org:8443", "chroma+https://kb.example.org:80"):
        assert canonical_uri(kept) == kept
    for kept in ("chroma+http://127.0.0.1:8000", "chroma+http://127.0.0.1:443"):
        assert canonical_uri(kept) == kept
    assert canonical_uri("chroma+http://LocalHost:8000") == "chroma+http://localhost:8000"
    # a Qdrant server's default port is 6333 on either scheme
    for scheme in ("qdrant+http", "qdrant+https"):
        assert canonical_uri(f"{scheme}://Q.example:6333/qdrant") == f"{scheme}://q.example/qdrant"
        assert canonical_uri(f"{scheme}://q.example:443") == f"{scheme}://q.example:443"
    # what an earlier version recorded under the other spelling is found, and replaced
    manifest = {"chroma+https://kb.example.org:443/chroma?tenant=t1 kb": {"roots": {}}}
    assert _spellings(manifest, one, "kb") == list(manifest)
    _put(manifest, "chroma+https://KB.example.org/chroma?tenant=t1", "kb", {})
    assert list(manifest) == [f"{one} kb"]


def test_a_plus_in_the_query_is_a_space_as_in_any_form_encoded_query(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The query is read as a form's (``+`` is a space, ``%2B`` a plus), as ``urlencode``
    writes it in the key and in the URI the Ray engine ships. Both spellings name a tenant
    Chroma's server holds (it checks a tenant name's length only; a database name is
    3-512 of ``[a-zA-Z0-9._-]``), so each reaches its own and the key keeps them apart."""
    from rechunk.adapters.uri import canonical_uri, chroma_place, resolved_uri

    for name in ENV_VARS:
        monkeypatch.delenv(name, raising=False)
    bare = "chroma+http://127.0.0.1:8000"
    assert chroma_place(f"{bare}?tenant=team+a") == ("team a", "default_database")
    assert chroma_place(f"{bare}?tenant=team%20a") == ("team a", "default_database")
    assert chroma_place(f"{bare}?tenant=team%2Ba") == ("team+a", "default_database")
    assert canonical_uri(f"{bare}?tenant=team%20a") == f"{bare}?tenant=team+a"
    assert canonical_uri(f"{bare}?tenant=team%2Ba") == f"{bare}?tenant=team%2Ba"
    for spelling in ("team+a", "team%2Ba"):
        shipped = resolved_uri(f"{bare}?tenant={spelling}")
        assert chroma_place(shipped) == chroma_place(f"{bare}?tenant={spelling}")


def test_a_tenant_with_a_space_or_a_plus_is_reached_as_the_uri_writes_it(
    chroma: Any, workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Against the server: tenants ``team a`` and ``team+a`` are two tenants, and a sync
    into ``?tenant=team+a`` lands in the first, one into ``?tenant=team%2Ba`` in the
    second."""
    made = admin(chroma)
    for tenant in ("team a", "team+a"):
        made.create_tenant(tenant)
        made.create_database("kb_main", tenant=tenant)
    for spelling, tenant, other in (("team+a", "team a", "team+a"),
                                    ("team%2Ba", "team+a", "team a")):  # fmt: skip
        before = counts(chroma, other, "kb_main").get("plus_kb")
        store = uri(chroma, f"tenant={spelling}&database=kb_main")
        assert main(["sync", "docs", "--store", store, "--collection", "plus_kb"]) == 0
        capsys.readouterr()
        assert counts(chroma, tenant, "kb_main")["plus_kb"] >= 2
        assert counts(chroma, other, "kb_main").get("plus_kb") == before
    assert "plus_kb" not in counts(chroma)


# -- credentials: a token-checking reverse proxy ----------------------------------------


class TokenProxy(ReverseProxy):
    """A reverse proxy on 127.0.0.1 in front of the Chroma server on port ``upstream``:
    a request without ``Authorization: Bearer TOKEN`` or ``X-Chroma-Token: TOKEN`` is
    answered 401 with Chroma's error body (the heartbeat is open, as Chroma's is)."""

    def __init__(self, upstream: int, token: str) -> None:
        self.asked: list[str] = []

        def route(path: str, headers: Any) -> str | tuple[int, bytes]:
            bearer = headers.get("Authorization") or ""
            sent = headers.get("X-Chroma-Token") or bearer.removeprefix("Bearer ")
            self.asked.append(sent)
            if sent != token and not path.endswith("/heartbeat"):
                return 401, b'{"error":"AuthError","message":"Unauthorized"}'
            return path

        super().__init__(upstream, route)


@pytest.fixture
def proxy(chroma: Any) -> Iterator[TokenProxy]:
    running = TokenProxy(chroma.port, TOKEN)
    try:
        yield running
    finally:
        running.close()


def test_a_missing_or_wrong_token_is_a_refusal_not_a_retry(
    chroma: Any, proxy: TokenProxy, workdir: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    """No token, or a wrong one: exit 2 naming Chroma's variables (before: exit 3,
    'cannot connect ...: Unauthorized', which cron retried for ever); the right one
    works, in the tenant and database the URI names."""
    before = everywhere(chroma)
    store = uri(chroma, "tenant=team_a&database=kb_main", port=proxy.port)
    for args in (["sync", "docs"], ["status"]):
        assert main([*args, "--store", store, "--collection", "auth_kb"]) == 2
        line = one_error_line(capsys.readouterr().err)
        assert "none were sent" in line, line
        assert f"CHROMA_CLIENT_AUTH_PROVIDER={TOKEN_PROVIDER}" in line, line
        assert "CHROMA_CLIENT_AUTH_CREDENTIALS" in line and "never goes in the store URI" in line
    monkeypatch.setenv("CHROMA_CLIENT_AUTH_PROVIDER", TOKEN_PROVIDER)
    monkeypatch.setenv("CHROMA_CLIENT_AUTH_CREDENTIALS", "not-the-token")
    for args in (["sync", "docs"], ["status"]):
        assert main([*args, "--store", store, "--collection", "auth_kb"]) == 2
        line = one_error_line(capsys.readouterr().err)
        assert "refused the credentials" in line and "not-the-token" not in line, line
        assert "CHROMA_CLIENT_AUTH_CREDENTIALS" in line and "CHROMA_CLIENT_AUTH_PROVIDER" in line
    assert everywhere(chroma) == before
    # the Python API: the same refusal, not retry-safe
    with pytest.raises(ConfigError, match="refused the credentials") as refused:
        http_client(HOST, proxy.port, headers={"X-Chroma-Token": "nope"})
    assert not isinstance(refused.value, TransientError)
    # the right token, in the header Chroma sends it in by default and in X-Chroma-Token
    monkeypatch.setenv("CHROMA_CLIENT_AUTH_CREDENTIALS", TOKEN)
    assert main(["sync", "docs", "--store", store, "--collection", "auth_kb"]) == 0
    monkeypatch.setenv("CHROMA_AUTH_TOKEN_TRANSPORT_HEADER", "X-Chroma-Token")
    assert main(["status", "--store", store, "--collection", "auth_kb"]) == 0
    assert "auth_kb: 2 documents" in capsys.readouterr().out
    assert counts(chroma, "team_a", "kb_main")["auth_kb"] >= 2 and "auth_kb" not in counts(chroma)
    assert TOKEN in proxy.asked


def test_the_token_never_reaches_a_message_from_the_uri(
    workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A token in the URI (as a user or a query) is refused naming the variables, and not
    quoted."""
    for store in (f"chroma+http://t:{TOKEN}@127.0.0.1:8000?tenant=team_a",
                  f"chroma+http://127.0.0.1:8000/?tenant=team_a&token={TOKEN}"):  # fmt: skip
        assert main(["status", "--store", store]) == 2
        line = one_error_line(capsys.readouterr().err)
        assert "CHROMA_CLIENT_AUTH_CREDENTIALS" in line and TOKEN not in line, line


# -- the Ray engine ---------------------------------------------------------------------


def test_the_ray_engine_reaches_the_drivers_tenant_and_database(
    chroma: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The tenant and database the driver's store URI names: every worker writes into
    that database (the URI the workers open carries them)."""
    ray = pytest.importorskip("ray", reason="Ray is not installed (pip install 'rechunk[ray]')")
    import shutil

    from ray_cluster import RAY, running_ray

    from rechunk.integrations import ray as rray

    if shutil.which(str(RAY)) is None:
        pytest.skip(f"no ray executable beside {sys.executable}")
    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])
    ray.cloudpickle.register_pickle_by_value(hash_embedder)
    for name in ENV_VARS:
        monkeypatch.delenv(name, raising=False)
    name = "ray_kb"
    store = ChromaStore(http_client(HOST, chroma.port, tenant="team_b", database="kb_main"), name)
    store.ensure_collection(HashEmbedder.dimension)
    foreign(chroma, name, "default_tenant", "default_database")
    docs = [rechunk.Document(f"d{i}.md", f"# Doc {i}\n\nBody number {i}.\n") for i in range(6)]
    with running_ray(1, worker_niceness=0):
        report = rray.sync(docs, uri(chroma, "tenant=team_b&database=kb_main"), collection=name,
                           chunker=rechunk.StructuredChunker(), embedder=HashEmbedder,
                           workers=1)  # fmt: skip
    assert report.stale_check == "passed"
    assert counts(chroma, "team_b", "kb_main")[name] == 6
    assert counts(chroma)[name] == 1
