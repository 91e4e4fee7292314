"""Text the model cannot read: documents whose tokens are largely the unknown token are
named by `rechunk sync`, in its summary and its --json report."""

from __future__ import annotations

from pathlib import Path

import pytest
from cli_helpers import run_json
from hypothesis import given
from hypothesis import strategies as st

from rechunk import Document
from rechunk.chunking.unknown import UNKNOWN_NOTE, UnknownTokens, unknown_documents
from rechunk.cli import main

# written for these tests: a note in English, one in Thai and one in Amharic, scripts
# all-MiniLM-L6-v2's WordPiece vocabulary has (almost) no tokens for
ENGLISH = "# Release\n\nThe installer was tested on three machines before Friday's release.\n"
THAI = "# บันทึก\n\nทีมงานทดสอบโปรแกรมติดตั้งบนเครื่องสามเครื่องก่อนวันศุกร์\n"
AMHARIC = "# ማስታወሻ\n\nቡድኑ ከዓርብ በፊት ጫኚውን በሦስት ኮምፒውተሮች ላይ ሞከረ።\n"


def test_the_share_of_unknown_tokens() -> None:
    check = UnknownTokens()  # the default model's tokenizer
    assert check.applies
    assert check.share(ENGLISH) == 0.0
    assert check.share("") == 0.0
    assert check.share(THAI) > 0.5
    assert check.share(AMHARIC) > 0.9
    # a few emoji in English stay below the note's threshold
    assert check.share("We shipped the release today 🎉 and the installer works.") < UNKNOWN_NOTE


def test_a_long_document_is_counted_in_slices_as_a_whole() -> None:
    """A long document is tokenized in slices cut at spaces (tokenizing 4 MB at once took
    200 bytes a byte); the share is the whole text's."""
    from rechunk.chunking import unknown
    from rechunk.chunking.tokens import resolve_tokenizer

    text = " ".join([ENGLISH, THAI, AMHARIC] * 2000)  # about 500,000 characters
    assert len(text) > 4 * unknown._SLICE
    tokenizer = resolve_tokenizer(None).tokenizer  # type: ignore[attr-defined]
    encoding = tokenizer.encode(text, add_special_tokens=False)
    unk = tokenizer.token_to_id("[UNK]")
    spans = [(i, end - start) for i, (start, end) in zip(encoding.ids, encoding.offsets)]
    whole = sum(n for i, n in spans if i == unk) / sum(n for _, n in spans)  # by characters
    assert UnknownTokens().share(text) == pytest.approx(whole, abs=1e-9)
    # past 16 slices, 16 evenly spaced ones are counted: an estimate of the same share
    longer = " ".join([ENGLISH, THAI, AMHARIC] * 8000)
    assert len(longer) > 16 * unknown._SLICE
    assert UnknownTokens().share(longer) == pytest.approx(whole, abs=0.02)


@given(st.text(alphabet=st.characters(min_codepoint=32, max_codepoint=126), max_size=200))
def test_printable_ascii_is_never_unknown(text: str) -> None:
    assert UnknownTokens().share(text) == 0.0


def test_the_share_is_of_the_text_not_of_the_tokens() -> None:
    """WordPiece reads a whole word as one [UNK]: Thai, written without spaces, is one per
    phrase, and a word of over 100 characters is one too. Counted in tokens, a note half in
    Thai came to 8% and went unnamed; counted in characters it is about half."""
    check = UnknownTokens()
    english = "The installer was tested on three machines before the release. " * 3
    thai = "ทีมงานทดสอบโปรแกรมติดตั้งบนเครื่องสามเครื่องก่อนวันศุกร์"
    half = " ".join([english, thai, thai, thai, thai])
    assert 0.4 < check.share(half) < 0.6
    # no unknown character, but a word longer than WordPiece reads
    assert check.share("A digest: " + "a1b2c3d4" * 40 + " ends here.") > 0.8


def test_a_tokenizer_without_an_unknown_token_names_nothing() -> None:
    def by_words(text: str) -> int:
        return len(text.split())

    check = UnknownTokens(by_words)
    assert not check.applies and check.share(THAI) == 0.0
    docs = [Document(doc_id="th.md", text=THAI)]
    assert unknown_documents(by_words, docs) == []


def test_unknown_documents_in_order_with_their_share() -> None:
    docs = [
        Document(doc_id="am.md", text=AMHARIC),
        Document(doc_id="en.md", text=ENGLISH),
        Document(doc_id="th.md", text=THAI),
    ]
    found = unknown_documents(None, docs)
    assert [doc_id for doc_id, _ in found] == ["am.md", "th.md"]
    assert all(UNKNOWN_NOTE <= share <= 1.0 for _, share in found)


def test_sync_names_documents_the_model_cannot_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    kb = tmp_path / "kb"
    kb.mkdir()
    (kb / "en.md").write_text(ENGLISH, encoding="utf-8")
    (kb / "th.md").write_text(THAI, encoding="utf-8")
    code, report = run_json(capsys, "sync", "kb", "--dry-run")
    assert code == 0
    assert [entry["doc_id"] for entry in report["unknown_tokens"]] == ["th.md"]
    assert report["unknown_tokens"][0]["share"] > 0.5
    assert main(["sync", "kb", "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "unknown text  th.md: " in out and "of its text is unknown" in out
    assert "unknown text  en.md" not in out
    # named by the sync that writes its chunks, not by every sync after it
    code, report = run_json(capsys, "sync", "kb")
    assert code == 0 and [entry["doc_id"] for entry in report["unknown_tokens"]] == ["th.md"]
    code, report = run_json(capsys, "sync", "kb")
    assert code == 0 and report["documents"]["unchanged"] == 2 and report["unknown_tokens"] == []
