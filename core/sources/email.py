"""E-mail messages (``.eml``, RFC 5322 / MIME), read with the standard library.

The text of a message, with :class:`~rechunk.sources.base.TextBuilder`:

* the subject as a level-1 heading;
* the body: the ``text/plain`` part when there is one, its paragraphs at blank lines (a
  paragraph whose lines all start with ``>`` is a quote, one whose lines all start with a
  list marker is a list item per line); else the ``text/html`` part, read by the HTML
  parser (:func:`rechunk.sources.html.write_html`, the ``formats`` extra);
* one list item per attachment, ``Attachment: name (type, N bytes)``: named, never read
  (a forwarded message is one attachment; an attachment without a file name is named
  ``unnamed``).

Sender and date are not in the text (they are no part of what the message says, and
would put the same tokens in every chunk of a mailbox): they are metadata, beside the
chunks: ``subject``, ``title`` (the subject, as other formats name it), ``from``,
``to`` and ``date`` (ISO 8601 when the header parses, else as written). A body part
that is not valid in its declared charset is read as UTF-8 when it is that, else its bad
bytes are replaced by U+FFFD and ``metadata["invalid_bytes"]`` is ``True``. A file
without any message header (From, To, Subject, Date, Message-ID, MIME-Version,
Content-Type) is not an e-mail: :class:`ParseError`; a message with neither subject,
body text nor attachment is a :class:`NoTextError` (an empty document).
"""

from __future__ import annotations

import email
import email.policy
import re
from email.message import EmailMessage, Message
from typing import Any

from rechunk.sources.base import NoTextError, Parsed, ParseError, TextBuilder
from rechunk.sources.encoding import text_codec
from rechunk.sources.registry import FORMATS, ParseOptions

__all__ = ["EmailParser", "write_plain_text"]

_HEADERS = ("from", "to", "subject", "date", "message-id", "mime-version", "content-type")
_LIST_LINE = re.compile(r"\s*(?:[-*•+]|\d{1,9}[.)])\s+\S")
_BLANK_LINES = re.compile(r"\n[ \t]*\n")


def write_plain_text(text: str, builder: TextBuilder, **locator: Any) -> None:
    """Paragraphs of plain text (blank lines end them) into ``builder``: a paragraph of
    ``>`` lines is a quote, one of list-marker lines a list item per line. Each block
    gets ``locator``."""
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    for paragraph in _BLANK_LINES.split(text):
        lines = [line for line in paragraph.split("\n") if line.strip()]
        if not lines:
            continue
        if all(line.lstrip().startswith(">") for line in lines):
            builder.quote(" ".join(line.lstrip()[1:] for line in lines), **locator)
        elif all(_LIST_LINE.match(line) for line in lines):
            for line in lines:
                marker, _, rest = line.strip().partition(" ")
                number = marker[:-1] if marker[:-1].isdigit() else None
                depth = (len(line) - len(line.lstrip())) // 2
                builder.list_item(rest, depth, int(number) if number else None, **locator)
        else:
            builder.paragraph(" ".join(lines), **locator)


def _header(message: Message, name: str) -> str:
    """A header's value as text ('' when absent or unreadable)."""
    try:
        value = message.get(name)
        return str(value).strip() if value is not None else ""
    except (ValueError, TypeError, IndexError, AttributeError, LookupError):
        # the email package's header parsers raise these on some malformed headers
        raw = message.get_all(name, failobj=[])
        return str(raw[0]).strip() if raw else ""


def _date(message: Message) -> str:
    try:
        value = message.get("date")
        moment = getattr(value, "datetime", None)
    except (ValueError, TypeError, IndexError, AttributeError, LookupError):
        moment = None
    return moment.isoformat() if moment is not None else _header(message, "date")


def _content(part: Message) -> tuple[str, bool]:
    """A text part's text, decoded with its charset (bad bytes replaced), and whether
    bytes were replaced."""
    payload = part.get_payload(decode=True)
    if not isinstance(payload, bytes):
        return str(part.get_payload()), False
    # an unknown charset, or one no text is saved in (idna, base64), reads as UTF-8
    charset = text_codec(part.get_content_charset() or "utf-8") or "utf-8"
    for codec in dict.fromkeys((charset, "utf-8")):  # each once
        try:
            return payload.decode(codec), False
        except UnicodeError:  # never shown: a codec's message may quote the text
            pass
    try:
        return payload.decode(charset, errors="replace"), True
    except UnicodeError:  # a codec's own complaint, even when told to replace
        return payload.decode("utf-8", errors="replace"), True


def _attachments(message: Message, body: Message | None) -> list[str]:
    found: list[str] = []
    stack: list[Message] = [message]
    while stack:
        part = stack.pop()
        if part is body:
            continue
        if part.is_multipart() and part.get_content_maintype() == "multipart":
            payload = part.get_payload()
            if isinstance(payload, list):
                stack.extend(item for item in reversed(payload) if isinstance(item, Message))
            continue
        named = part.get_filename()
        attached = part.get_content_disposition() == "attachment"
        forwarded = part.get_content_type() == "message/rfc822"
        if not (named or attached or forwarded):
            continue  # an alternative body, not an attachment
        if forwarded:
            inner = part.get_payload()
            inner_message = inner[0] if isinstance(inner, list) and inner else None
            size = len(inner_message.as_bytes()) if isinstance(inner_message, Message) else 0
            if not named and isinstance(inner_message, Message):
                named = _header(inner_message, "subject") or None
        else:
            payload = part.get_payload(decode=True)
            size = len(payload) if isinstance(payload, bytes) else 0
        found.append(
            f"Attachment: {named or 'unnamed'} ({part.get_content_type()}, {size:,} bytes)"
        )
    return found


class EmailParser:
    """``.eml`` messages: subject, body (plain text, else HTML), attachments named."""

    name = "eml"
    suffixes = FORMATS["eml"][1]

    def version(self) -> str:
        return "eml/2"

    def parse(self, data: bytes, options: ParseOptions) -> list[Parsed]:
        if not data.strip():
            raise ParseError("empty file")
        message = email.message_from_bytes(data, policy=email.policy.default)
        if not any(name in message for name in _HEADERS):
            raise ParseError("no e-mail headers (From, To, Subject, Date ...); not an e-mail")
        body: Message | None = None
        if isinstance(message, EmailMessage):
            body = message.get_body(preferencelist=("plain", "html"))
        builder = TextBuilder()
        subject = _header(message, "subject")
        builder.heading(subject, 1)
        version = self.version()
        replaced = False
        if body is not None:
            text, replaced = _content(body)
            if body.get_content_subtype() == "html":
                from rechunk.sources.html import HtmlParser, write_html

                write_html(text, builder, options)
                version = f"{version} {HtmlParser().version()}"
            else:
                write_plain_text(text, builder)
        for line in _attachments(message, body):
            builder.list_item(line)
        if builder.empty:
            raise NoTextError("no text")
        metadata: dict[str, Any] = {}
        for key, value in (
            ("subject", subject),
            ("title", subject),
            ("from", _header(message, "from")),
            ("to", _header(message, "to")),
            ("date", _date(message)),
        ):
            if value:
                metadata[key] = value
        if replaced:
            metadata["invalid_bytes"] = True
        return [builder.build(self.name, version, metadata=metadata)]
