"""JSON and JSON Lines records (one document per record) and Jupyter notebooks."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, ClassVar

import pytest
from hypothesis import given
from hypothesis import strategies as st
from parser_contract import ParserContract, check_parsed

from rechunk.sources import Parsed, ParseError, ParseOptions, locate, parse_file
from rechunk.sources.notebook import NotebookParser
from rechunk.sources.records import JsonlParser, JsonParser

RECORDS: list[dict[str, Any]] = [
    {
        "id": "kb-1",
        "title": "Reset a password",
        "body": "Open the settings.\n\nChoose  Security, then\nReset.",
        "tags": ["account", "security"],
        "author": {"name": "Ada", "team": {"name": "Support"}},
        "steps": [{"n": 1, "do": "open"}, {"n": 2, "do": "reset"}],
        "views": 1200,
        "rating": 4.5,
        "public": False,
        "draft": None,
        "notes": "",
    },
    {"id": "kb-2", "title": "Export data", "body": "Use the export button."},
    {"id": 3, "title": "An integer id"},
]

KB1_TEXT = (
    "author.name: Ada\n\n"
    "author.team.name: Support\n\n"
    "body: Open the settings.\n\n"
    "Choose Security, then Reset.\n\n"
    "public: false\n\n"
    "rating: 4.5\n\n"
    "steps.0.do: open\n\n"
    "steps.0.n: 1\n\n"
    "steps.1.do: reset\n\n"
    "steps.1.n: 2\n\n"
    "tags: account, security\n\n"
    "title: Reset a password\n\n"
    "views: 1200\n"
)


def jsonl(records: list[Any]) -> bytes:
    return "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records).encode()


def parse(parser: Any, data: bytes, id_field: str | None = None) -> list[Parsed]:
    docs: list[Parsed] = parser.parse(data, ParseOptions(id_field=id_field))
    for doc in docs:
        check_parsed(doc)
    return docs


# -- the contract -----------------------------------------------------------------------


class TestJsonContract(ParserContract):
    fmt = "json"
    options = ParseOptions(id_field="id")

    def samples(self) -> list[tuple[str, bytes]]:
        return [
            ("list.json", json.dumps(RECORDS, indent=2).encode()),
            ("envelope.json", json.dumps({"articles": RECORDS}).encode()),
        ]


class TestJsonlContract(ParserContract):
    fmt = "jsonl"
    options = ParseOptions(id_field="id")

    def samples(self) -> list[tuple[str, bytes]]:
        return [("kb.jsonl", jsonl(RECORDS)), ("one.jsonl", jsonl(RECORDS[1:2]))]

    garbage = (*ParserContract.garbage, b'{"id": 1}\n{"id": 2,\n')


# -- records ----------------------------------------------------------------------------


def test_fields_in_sorted_order_flattened_and_id_left_out() -> None:
    docs = parse(JsonlParser(), jsonl(RECORDS), "id")
    assert [d.part for d in docs] == ["kb-1", "kb-2", "3"]
    assert docs[0].text == KB1_TEXT
    assert docs[1].text == "body: Use the export button.\n\ntitle: Export data\n"
    assert [b.kind for b in docs[0].blocks] == ["paragraph"] * 13
    assert locate(docs[1], 0, 5) == {"lines": [2, 2], "record": "kb-2"}


def test_a_nul_or_a_lone_surrogate_escaped_in_a_record_reads_as_a_replacement() -> None:
    """JSON escapes what a document cannot hold (a test fixture's ``"a\\u0000b"``, a lone
    ``\\ud800``); the file was skipped whole, and every sync of a repository holding one
    exited 1. The record is read with U+FFFD in their place; the other records as before."""
    data = (
        b'[{"id": "a", "t": "ok"}, {"id": "b", "data": "hello\\u0000world", "\\ud800k": 1},'
        b' {"id": "c\\udc00", "t": "x"}]'
    )
    docs = parse(JsonParser(), data, "id")
    assert [d.part for d in docs] == ["a", "b", "c\\udc00"]  # an id: its JSON escape
    assert docs[0].text == "t: ok\n"
    assert docs[1].text == "data: hello\ufffdworld\n\n\ufffdk: 1\n"
    (line,) = parse(JsonlParser(), b'{"t": "nul \\u0000 here"}\n')
    assert line.text == "t: nul \ufffd here\n"
    # ids that differ only there stay apart (a replacement made them repeat each other)
    ids = b'{"id": "k\\u0000"}\n{"id": "k\\ud800"}\n{"id": "k\\ufffd"}\n'
    assert [d.part for d in parse(JsonlParser(), ids, "id")] == ["k\\u0000", "k\\ud800", "k\ufffd"]


def test_without_id_field_records_are_numbered_and_every_field_is_text() -> None:
    docs = parse(JsonParser(), json.dumps(RECORDS).encode())
    assert [d.part for d in docs] == ["1", "2", "3"]
    assert docs[2].text == "id: 3\n\ntitle: An integer id\n"


@pytest.mark.parametrize(
    ("value", "parts"),
    [
        (RECORDS, ["kb-1", "kb-2", "3"]),  # an array of records
        ({"data": RECORDS}, ["kb-1", "kb-2", "3"]),  # an envelope: one member, an array
        (RECORDS[1], ["kb-2"]),  # one object is one record
    ],
)
def test_which_json_values_are_the_records(value: Any, parts: list[str]) -> None:
    docs = parse(JsonParser(), json.dumps(value).encode(), "id")
    assert [d.part for d in docs] == parts


def test_an_object_with_a_list_beside_other_members_is_one_record() -> None:
    value = {"title": "Config", "items": [{"a": 1}, {"a": 2}]}
    (doc,) = parse(JsonParser(), json.dumps(value).encode())
    assert doc.text == "items.0.a: 1\n\nitems.1.a: 2\n\ntitle: Config\n"
    (doc,) = parse(JsonParser(), json.dumps({"tags": ["a", "b"]}).encode())
    assert doc.text == "tags: a, b\n"


def test_dotted_id_field_reaches_into_objects() -> None:
    records = [{"meta": {"key": "a"}, "t": "x"}, {"meta": {"key": "b"}, "t": "y"}]
    docs = parse(JsonlParser(), jsonl(records), "meta.key")
    assert [(d.part, d.text) for d in docs] == [("a", "t: x\n"), ("b", "t: y\n")]


@pytest.mark.parametrize(
    ("records", "message"),
    [
        ([{"id": "a"}, {"title": "no id"}], "line 2 has no 'id' field"),
        ([{"id": "a"}, {"id": None}], "line 2 has no 'id' field"),
        ([{"id": "a"}, {"id": "b"}, {"id": "a"}], "line 3: id 'a' repeats line 1"),
        ([{"id": [1]}], "line 1: its 'id' is list, not a string or integer"),
        ([{"id": True}], "line 1: its 'id' is bool"),
        (["a scalar"], "line 1 has no 'id' field"),
    ],
)
def test_bad_ids_name_the_record(records: list[Any], message: str) -> None:
    with pytest.raises(ParseError, match=message):
        JsonlParser().parse(jsonl(records), ParseOptions(id_field="id"))
    with pytest.raises(ParseError, match=message.replace("line", "record")):
        JsonParser().parse(json.dumps(records).encode(), ParseOptions(id_field="id"))


def test_jsonl_skips_blank_lines_and_names_a_bad_line() -> None:
    data = b'{"a": 1}\n\n   \n{"a": 2}\r\n'
    assert [d.part for d in parse(JsonlParser(), data)] == ["1", "2"]
    with pytest.raises(ParseError, match=r"^line 3: not valid JSON"):
        JsonlParser().parse(b'{"a": 1}\n\n{"a": \n', ParseOptions())
    with pytest.raises(ParseError, match="no records"):
        JsonlParser().parse(b"\n\n", ParseOptions())
    with pytest.raises(ParseError, match="no records"):
        JsonParser().parse(b"[]", ParseOptions())


TSCONFIG = b"""{
  "extends": "./tsconfig.base.json", // shared settings
  /* what the compiler writes, and where */
  "compilerOptions": {
    "outDir": "dist",
    "paths": {"@app/*": ["src/*"],},
  },
}
"""


def test_json_with_comments_is_read_without_them() -> None:
    (doc,) = parse(JsonParser(), TSCONFIG)
    assert doc.text == (
        "compilerOptions.outDir: dist\n\n"
        "compilerOptions.paths.@app/*: src/*\n\n"
        "extends: ./tsconfig.base.json\n"
    )
    (doc,) = parse(JsonParser(), b'{"url": "http://x/*y*/", // the site\n "n": 1}')
    assert doc.text == "n: 1\n\nurl: http://x/*y*/\n"


@pytest.mark.parametrize(
    "data",
    [b"[1/**/2]", b'{"a": 1,,}', b'{"a": 1 /* never closed}', b"[1 2]", b"\xff[1, // x\n]"],
)
def test_what_is_not_json_with_comments_either_gets_json_s_error(data: bytes) -> None:
    with pytest.raises(ParseError, match=r"^not valid"):
        JsonParser().parse(data, ParseOptions())


@given(st.lists(st.dictionaries(st.text(max_size=5), st.integers() | st.text(max_size=20))))
def test_comments_and_trailing_commas_change_nothing(records: list[dict[str, Any]]) -> None:
    if not records:
        return
    plain = json.dumps(records, indent=1)
    # a comment after every line (no line ends inside a string: JSON escapes newlines)
    noted = "/* the records */\n" + "\n".join(f"{line} // a note" for line in plain.split("\n"))
    assert [d.text for d in parse(JsonParser(), noted.encode())] == [
        d.text for d in parse(JsonParser(), plain.encode())
    ]


def test_line_separators_inside_strings_do_not_split_a_line() -> None:
    (doc,) = parse(JsonlParser(), '{"t": "a\u2028b"}\n'.encode())
    assert doc.text == "t: a b\n"


def test_a_field_that_looks_like_markdown_stays_a_paragraph() -> None:
    (doc,) = parse(JsonParser(), json.dumps({"": "# not a heading", "k": "v"}).encode())
    assert [b.kind for b in doc.blocks] == ["paragraph", "paragraph"]


@given(st.lists(st.dictionaries(st.text(max_size=5), st.integers() | st.text(max_size=20))))
def test_records_render_the_same_whatever_the_key_order(records: list[dict[str, Any]]) -> None:
    if not records:
        return
    forward = parse(JsonParser(), json.dumps(records).encode())
    backward = [dict(reversed(list(r.items()))) for r in records]
    assert [d.text for d in parse(JsonParser(), json.dumps(backward).encode())] == [
        d.text for d in forward
    ]


def test_parse_file_reads_each_record(tmp_path: Path) -> None:
    path = tmp_path / "kb.ndjson"
    path.write_bytes(jsonl(RECORDS))
    docs = parse_file(path, options=ParseOptions(id_field="id"))
    assert [d.part for d in docs] == ["kb-1", "kb-2", "3"]
    with pytest.raises(ParseError, match=r"kb\.ndjson: line 1 has no 'nope' field"):
        parse_file(path, options=ParseOptions(id_field="nope"))


# -- notebooks --------------------------------------------------------------------------


def notebook(cells: list[dict[str, Any]], language: str = "python") -> bytes:
    """A notebook as Jupyter writes it (nbformat 4: one-space indent, sorted keys)."""
    value = {
        "cells": cells,
        "metadata": {
            "kernelspec": {"display_name": "Python 3", "language": language, "name": "python3"},
            "language_info": {"name": language},
        },
        "nbformat": 4,
        "nbformat_minor": 5,
    }
    return (json.dumps(value, indent=1, sort_keys=True, ensure_ascii=False) + "\n").encode()


def markdown_cell(source: str) -> dict[str, Any]:
    return {"cell_type": "markdown", "id": "m", "metadata": {}, "source": source.splitlines(True)}


def code_cell(source: str, outputs: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    return {
        "cell_type": "code",
        "execution_count": 1,
        "id": "c",
        "metadata": {},
        "outputs": outputs or [],
        "source": source.splitlines(True),
    }


ANALYSIS = notebook(
    [
        markdown_cell("# Analysis\n\nWe load the *data* first.\n\n## Steps\n\n1. load\n2. plot"),
        code_cell(
            "import json\nrows = json.load(open('x.json'))\nrows[:2]",
            [
                {"output_type": "stream", "name": "stdout", "text": ["OUTPUT TEXT\n"]},
                {
                    "output_type": "execute_result",
                    "execution_count": 1,
                    "data": {"text/plain": ["[1, 2]"], "image/png": "iVBORw0KGgo="},
                    "metadata": {},
                },
            ],
        ),
        markdown_cell(""),
        markdown_cell("| a | b |\n|---|---|\n| 1 | 2 |\n\n<p>Some <b>HTML</b></p>"),
        {"cell_type": "raw", "id": "r", "metadata": {}, "source": ["Raw cell text."]},
    ]
)


class TestNotebookContract(ParserContract):
    fmt = "ipynb"
    garbage: ClassVar[tuple[bytes, ...]] = (
        *ParserContract.garbage,
        b'{"not": "a notebook"}',
        b"[1, 2, 3]",
        b'{"cells": [',
    )

    def samples(self) -> list[tuple[str, bytes]]:
        return [("analysis.ipynb", ANALYSIS), ("one.ipynb", notebook([code_cell("x = 1")]))]


def test_notebook_cells_in_order_outputs_dropped() -> None:
    (doc,) = parse(NotebookParser(), ANALYSIS)
    assert doc.text == (
        "# Analysis\n\n"
        "We load the *data* first.\n\n"
        "## Steps\n\n"
        "1. load\n2. plot\n\n"
        "```python\nimport json\nrows = json.load(open('x.json'))\nrows[:2]\n```\n\n"
        "| a | b |\n| 1 | 2 |\n\n"
        "Some HTML\n\n"
        "Raw cell text.\n"
    )
    assert "OUTPUT" not in doc.text and "iVBOR" not in doc.text
    assert [(b.kind, b.level, b.locator["cell"]) for b in doc.blocks] == [
        ("heading", 1, 1),
        ("paragraph", 0, 1),
        ("heading", 2, 1),
        ("list_item", 0, 1),
        ("list_item", 0, 1),
        ("code", 0, 2),
        ("table", 0, 4),  # cell 3 is empty: cells keep Jupyter's numbers
        ("paragraph", 0, 4),
        ("paragraph", 0, 5),
    ]
    assert doc.metadata == {"language": "python", "title": "Analysis"}
    start = doc.text.index("```python")
    assert locate(doc, start, start + 10) == {"section": ["Analysis", "Steps"], "cells": [2, 2]}


def test_notebook_code_is_fenced_in_the_kernels_language() -> None:
    (doc,) = parse(NotebookParser(), notebook([code_cell("x <- c(1, 2)")], language="R"))
    assert doc.text == "```R\nx <- c(1, 2)\n```\n"


def test_nbformat_3_worksheets() -> None:
    value = {
        "nbformat": 3,
        "metadata": {},
        "worksheets": [
            {
                "cells": [
                    {"cell_type": "heading", "level": 1, "source": ["Old notebook"]},
                    {"cell_type": "code", "input": ["print(1)"], "language": "python"},
                ]
            }
        ],
    }
    (doc,) = parse(NotebookParser(), json.dumps(value).encode())
    assert doc.text == "# Old notebook\n\n```\nprint(1)\n```\n"


def test_notebook_without_text_is_a_parse_error() -> None:
    with pytest.raises(ParseError, match="no text"):
        NotebookParser().parse(notebook([code_cell(""), markdown_cell("  \n")]), ParseOptions())
    with pytest.raises(ParseError, match=r"not valid JSON \(line 1, column 12"):
        NotebookParser().parse(b'{"cells": [', ParseOptions())
