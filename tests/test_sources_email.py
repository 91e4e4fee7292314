"""The e-mail parser, on messages the standard library's email package writes."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from email.message import EmailMessage
from email.utils import format_datetime, make_msgid
from pathlib import Path

import pytest
from parser_contract import ParserContract, check_parsed

from rechunk.sources import Parsed, ParseError, ParseOptions, parse_file
from rechunk.sources.email import EmailParser

DATE = datetime(2023, 11, 14, 22, 13, 20, tzinfo=timezone(timedelta(hours=1)))
PLAIN = """Hi Bob,

the quarterly numbers are in.
They look better than expected.

- revenue up
- costs flat

> Can you send the numbers?
> Thanks.

--\x20
Alice
"""


def message(subject: str = "Quarterly report", **headers: str) -> EmailMessage:
    msg = EmailMessage()
    msg["Subject"] = subject
    msg["From"] = headers.get("sender", "Alice Example <alice@example.com>")
    msg["To"] = "bob@example.com"
    msg["Date"] = format_datetime(DATE)
    msg["Message-ID"] = make_msgid(idstring="rechunk", domain="example.com")
    return msg


def parse(msg: EmailMessage | bytes) -> Parsed:
    data = msg if isinstance(msg, bytes) else bytes(msg)
    (doc,) = EmailParser().parse(data, ParseOptions())
    check_parsed(doc)
    return doc


def _plain() -> EmailMessage:
    msg = message()
    msg.set_content(PLAIN)
    return msg


def _with_everything() -> EmailMessage:
    msg = message("Launch plan — draft 2")
    msg.set_content("The plain body wins.\n")
    msg.add_alternative("<html><body><p>The HTML body.</p></body></html>", subtype="html")
    msg.add_attachment(b"%PDF-1.7 not read", maintype="application", subtype="pdf",
                       filename="plan.pdf")  # fmt: skip
    msg.add_attachment("a,b\n1,2\n", subtype="csv", filename="numbers.csv")
    return msg


def _html_only() -> EmailMessage:
    msg = message("Newsletter")
    msg.set_content(
        "<html><head><style>p{color:red}</style></head><body>"
        "<nav>View in browser | Unsubscribe</nav>"
        "<h2>This week</h2><p>Three <b>new</b> features.</p>"
        "<table role='presentation'><tr><td><p>Column text.</p></td></tr></table>"
        "<footer>You got this because you signed up.</footer></body></html>",
        subtype="html",
    )
    return msg


class TestEmailContract(ParserContract):
    fmt = "eml"

    def samples(self) -> list[tuple[str, bytes]]:
        return [
            ("plain.eml", bytes(_plain())),
            ("everything.eml", bytes(_with_everything())),
            ("html.eml", bytes(_html_only())),
        ]

    garbage = (
        *ParserContract.garbage,
        b"just some text that is not a message\n\nmore text\n",
        b"X-Custom: only an unknown header\n\nbody\n",
    )


def test_plain_message_subject_heading_body_blocks_and_metadata() -> None:
    doc = parse(_plain())
    assert doc.text == (
        "# Quarterly report\n\n"
        "Hi Bob,\n\n"
        "the quarterly numbers are in. They look better than expected.\n\n"
        "- revenue up\n- costs flat\n\n"
        "> Can you send the numbers? Thanks.\n\n"
        "-- Alice\n"
    )
    assert [b.kind for b in doc.blocks] == [
        "heading", "paragraph", "paragraph", "list_item", "list_item", "quote", "paragraph",
    ]  # fmt: skip
    assert doc.metadata == {
        "subject": "Quarterly report",
        "title": "Quarterly report",
        "from": "Alice Example <alice@example.com>",
        "to": "bob@example.com",
        "date": "2023-11-14T22:13:20+01:00",
    }
    # sender and date are metadata, not text: every message of a thread would repeat them
    assert "alice@example.com" not in doc.text and "2023" not in doc.text


def test_plain_body_is_preferred_and_attachments_are_named_not_read() -> None:
    doc = parse(_with_everything())
    assert doc.text == (
        "# Launch plan — draft 2\n\n"
        "The plain body wins.\n\n"
        "- Attachment: plan.pdf (application/pdf, 17 bytes)\n"
        "- Attachment: numbers.csv (text/csv, 8 bytes)\n"
    )
    assert "not read" not in doc.text and "a,b" not in doc.text
    assert doc.version == "eml/2"


def test_html_body_goes_through_the_html_parser() -> None:
    pytest.importorskip("selectolax.lexbor", reason="the formats extra is not installed")
    doc = parse(_html_only())
    assert doc.text == "# Newsletter\n\n## This week\n\nThree new features.\n\nColumn text.\n"
    assert doc.version.startswith("eml/2 html/1 selectolax ")


def test_a_body_in_another_charset_is_decoded() -> None:
    msg = message("Crème brûlée")
    msg.set_content("Voilà: une crème brûlée à la française.\n", charset="iso-8859-1")
    raw = bytes(msg)
    assert "crème".encode("iso-8859-1") in raw or b"=E8" in raw  # really not UTF-8
    doc = parse(raw)
    assert doc.text == "# Crème brûlée\n\nVoilà: une crème brûlée à la française.\n"


def test_a_body_its_charset_does_not_read_is_read_as_utf8_or_said() -> None:
    """A part labelled us-ascii that is UTF-8 (a common mail client slip) reads as UTF-8;
    one labelled UTF-8 that is not has its bad bytes replaced, and the document says so
    (rechunk sync names it), where before it was stored with U+FFFD without a word."""
    head = bytes(message("Menu")).split(b"\n\n")[0]

    def raw(charset: str, body: bytes) -> bytes:
        mime = b"MIME-Version: 1.0\nContent-Transfer-Encoding: 8bit\n"
        content = f"Content-Type: text/plain; charset={charset}\n".encode()
        return head + b"\n" + mime + content + b"\n" + body

    doc = parse(raw("us-ascii", "Une crème brûlée.\n".encode()))
    assert "crème brûlée" in doc.text and "invalid_bytes" not in doc.metadata
    doc = parse(raw("utf-8", "Une crème brûlée.\n".encode("cp1252")))
    assert "\ufffd" in doc.text and doc.metadata["invalid_bytes"] is True


def test_forwarded_message_and_attachment_only_message() -> None:
    inner = message("Original thread")
    inner.set_content("Earlier words.\n")
    outer = message("Fwd: Original thread")
    outer.set_content("See below.\n")
    outer.add_attachment(inner)
    doc = parse(outer)
    assert doc.text.startswith("# Fwd: Original thread\n\nSee below.\n\n- Attachment: ")
    assert "Original thread (message/rfc822, " in doc.text
    assert "Earlier words" not in doc.text

    only = message("Scan")
    only.set_content(b"\x89PNG...", maintype="image", subtype="png", filename="scan.png")
    assert parse(only).text == "# Scan\n\n- Attachment: scan.png (image/png, 7 bytes)\n"


def test_message_without_text_is_a_parse_error() -> None:
    msg = EmailMessage()
    msg["From"] = "alice@example.com"
    msg.set_content("   \n")
    with pytest.raises(ParseError, match="no text"):
        EmailParser().parse(bytes(msg), ParseOptions())


def test_odd_headers_do_not_fail_the_message() -> None:
    raw = (
        b"From: =?utf-8?q?J=C3=BCrgen?= <j@example.com>\r\n"
        b"Subject: =?utf-8?b?w5xiZXIgYWxsZXM=?=\r\n"
        b"Date: not a date at all\r\n"
        b"Content-Type: text/plain; charset=x-unknown-charset\r\n\r\n"
        b"Body \xe2\x9c\x93 here.\r\n"
    )
    doc = parse(raw)
    assert doc.text == "# Über alles\n\nBody ✓ here.\n"
    assert doc.metadata["from"] == "Jürgen <j@example.com>"
    assert doc.metadata["date"] == "not a date at all"


def test_parse_file_reads_eml(tmp_path: Path) -> None:
    path = tmp_path / "note.eml"
    path.write_bytes(bytes(_plain()))
    (doc,) = parse_file(path)
    assert doc.parser == "eml" and doc.text.startswith("# Quarterly report\n")
