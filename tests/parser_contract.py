"""The contract every parser of ``rechunk.sources`` must pass.

Subclass :class:`ParserContract` in a test module, set ``fmt`` (a key of
``rechunk.sources.FORMATS``) and provide ``samples()``: real files of the format, as
``(name, bytes)`` (the shared renders, files the tests write with real writers). The
class then checks, on every sample:

* the parser is the one the registry names, with that format's suffixes, and says its
  name and version;
* the same bytes give the same documents twice, and in a fresh interpreter with another
  hash seed (so no set or dict order leaks into the text);
* blocks are in order, apart, inside the text, of a known kind, and none is blank;
  headings have a level 1-6, other blocks none; ``parse_file`` on the written file gives
  what ``parse`` gives;
* garbage (``garbage``) and, unless ``empty_is_text``, empty input raise ``ParseError``
  with a one-line message.

``check_parsed`` is the per-document part, for tests that build their own documents.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, ClassVar

import pytest

from rechunk.sources import (
    BLOCK_KINDS,
    FORMATS,
    Parsed,
    ParseError,
    ParseOptions,
    parse_file,
    parser_for,
)

#: bytes no parser may read as a document: binary noise with NUL, 0xFF and 0xFE bytes
GARBAGE = (
    b"\x00\x01\x02\x03\xff\xfe\xfd garbage \x00\x9c\x80\x81 binary \x00\x00",
    bytes(range(256)) * 4,
)


def check_parsed(doc: Parsed) -> None:
    """What holds for every document any parser yields."""
    assert isinstance(doc.text, str)
    assert doc.parser and doc.version
    last = 0
    for block in doc.blocks:
        assert block.kind in BLOCK_KINDS
        assert last <= block.start < block.end <= len(doc.text), (block, last, len(doc.text))
        assert doc.text[block.start : block.end].strip(), f"blank {block.kind} block"
        if block.kind == "heading":
            assert 1 <= block.level <= 6
        else:
            assert block.level == 0
        json.dumps(dict(block.locator))  # JSON values a reader can cite
        json.dumps([dict(where) for _, where in block.pieces])
        last = block.end
    json.dumps(dict(doc.metadata))
    assert doc.part is None or isinstance(doc.part, str)


def _pieces(block: Any) -> list[Any]:
    return [[at, dict(where)] for at, where in block.pieces]


def fingerprint(docs: list[Parsed]) -> list[Any]:
    """Everything a parse yields, as JSON values (to compare parses, across processes)."""
    return [
        {
            "text": hashlib.sha256(d.text.encode("utf-8")).hexdigest(),
            "blocks": [
                [b.kind, b.start, b.end, b.level, dict(b.locator), _pieces(b)] for b in d.blocks
            ],
            "parser": d.parser,
            "version": d.version,
            "part": d.part,
            "metadata": dict(d.metadata),
        }
        for d in docs
    ]


_CHILD = """
import json, sys
from pathlib import Path
from rechunk.sources import ParseOptions, parser_for
sys.path.insert(0, sys.argv[1])
from parser_contract import fingerprint
fmt, options = sys.argv[2], ParseOptions(**json.loads(sys.argv[3]))
print(json.dumps([fingerprint(parser_for(fmt).parse(Path(p).read_bytes(), options))
                  for p in sys.argv[4:]]))
"""


class ParserContract:
    """Shared behaviour of every parser; subclass it, set ``fmt``, provide ``samples``."""

    fmt: ClassVar[str]
    #: the options the samples are parsed with
    options: ClassVar[ParseOptions] = ParseOptions()
    #: inputs that must raise ParseError
    garbage: ClassVar[tuple[bytes, ...]] = GARBAGE
    #: an empty file is one empty document (the plain-text formats) instead of an error
    empty_is_text: ClassVar[bool] = False

    def samples(self) -> list[tuple[str, bytes]]:
        """Real files of the format: ``(file name, bytes)``."""
        raise NotImplementedError

    def parse(self, data: bytes) -> list[Parsed]:
        return parser_for(self.fmt).parse(data, self.options)

    # -- identity -------------------------------------------------------------------------

    def test_registry_names_this_parser(self) -> None:
        parser = parser_for(self.fmt)
        assert parser.name == self.fmt
        assert tuple(parser.suffixes) == FORMATS[self.fmt][1]
        version = parser.version()
        assert version.startswith(f"{self.fmt}/"), version
        assert "\n" not in version

    # -- every sample ---------------------------------------------------------------------

    def test_samples_parse_into_ordered_nonblank_blocks(self) -> None:
        samples = self.samples()
        assert samples, "the contract needs at least one real file"
        for name, data in samples:
            docs = self.parse(data)
            assert docs, name
            for doc in docs:
                check_parsed(doc)
                assert doc.parser == self.fmt
                assert doc.version.startswith(parser_for(self.fmt).version())
            assert any(doc.text.strip() for doc in docs), f"{name}: no text"

    def test_same_bytes_same_documents(self) -> None:
        for name, data in self.samples():
            assert fingerprint(self.parse(data)) == fingerprint(self.parse(data)), name
            assert [d.text for d in self.parse(data)] == [d.text for d in self.parse(data)]

    def test_parse_file_reads_what_parse_reads(self, tmp_path: Path) -> None:
        suffix = FORMATS[self.fmt][1][0]
        for i, (_, data) in enumerate(self.samples()[:3]):
            path = tmp_path / f"sample{i}{suffix}"
            path.write_bytes(data)
            assert fingerprint(parse_file(path, options=self.options)) == fingerprint(
                self.parse(data)
            )

    def test_same_documents_in_another_process(self, tmp_path: Path) -> None:
        suffix = FORMATS[self.fmt][1][0]
        samples = self.samples()[:4]
        paths = []
        for i, (_, data) in enumerate(samples):
            path = tmp_path / f"sample{i}{suffix}"
            path.write_bytes(data)
            paths.append(str(path))
        options = {
            "id_field": self.options.id_field,
            "html_include": list(self.options.html_include),
            "html_exclude": list(self.options.html_exclude),
        }
        env = {**os.environ, "PYTHONHASHSEED": "12345"}
        out = subprocess.run(
            [sys.executable, "-c", _CHILD, str(Path(__file__).parent), self.fmt,
             json.dumps(options), *paths],
            capture_output=True, text=True, env=env, check=True, timeout=120,
        )  # fmt: skip
        here = [json.loads(json.dumps(fingerprint(self.parse(data)))) for _, data in samples]
        assert json.loads(out.stdout) == here

    # -- what is not a document -----------------------------------------------------------

    def test_garbage_is_a_parse_error(self) -> None:
        for data in self.garbage:
            with pytest.raises(ParseError) as caught:
                self.parse(data)
            message = str(caught.value)
            assert message and "\n" not in message

    def test_empty_input(self) -> None:
        if self.empty_is_text:
            (doc,) = self.parse(b"")
            assert doc.text == "" and doc.blocks == ()
            return
        for data in (b"", b"   \n\t\n"):
            with pytest.raises(ParseError) as caught:
                self.parse(data)
            assert "\n" not in str(caught.value)
