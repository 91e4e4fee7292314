"""Golden identities: chunk spans, input keys and point ids never change silently.

Regenerate spans.json only together with a chunker version bump:
``python tests/test_golden.py --regenerate``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from rechunk import (
    CDCChunker,
    CodeChunker,
    FixedChunker,
    RecursiveChunker,
    StructuredChunker,
    input_key,
)
from rechunk.reuse.identity import point_id, text_revision

HERE = Path(__file__).resolve().parent / "golden"
TEXT = (HERE / "text.md").read_text(encoding="utf-8")
SPANS = HERE / "spans.json"
CHUNKERS = {
    "fixed": FixedChunker,
    "recursive": RecursiveChunker,
    "cdc": CDCChunker,
    "structured": StructuredChunker,
}
#: the code policy on a small file of each of four grammars, at sizes that cut it into
#: several chunks
CODE = {"python": "code.py", "rust": "code.rs", "typescript": "code.ts", "go": "code.go"}


def _prose(name: str) -> dict[str, Any]:
    chunker = CHUNKERS[name]()
    return {
        "policy_id": chunker.policy_id,
        "spans": [[c.start, c.end, c.tokens] for c in chunker.chunk(TEXT)],
    }


def _code(language: str) -> dict[str, Any]:
    code = CodeChunker(language, min_tokens=40, max_tokens=80)
    text = (HERE / CODE[language]).read_text(encoding="utf-8")
    return {
        "grammar": code.grammar_version,
        "policy_id": code.policy_id,
        "spans": [[c.start, c.end, c.tokens] for c in code.chunk(text)],
    }


def current() -> dict[str, Any]:
    return {
        **{name: _prose(name) for name in CHUNKERS},
        **{f"code-{language}": _code(language) for language in CODE},
    }


def _check(name: str, now: dict[str, Any]) -> None:
    golden = json.loads(SPANS.read_text(encoding="utf-8"))[name]
    assert now["policy_id"] == golden["policy_id"], (
        f"{name}: policy id changed; if the boundaries changed on purpose, bump the "
        "chunker's version and regenerate tests/golden/spans.json"
    )
    assert now["spans"] == golden["spans"], (
        f"{name}: boundaries changed without a policy version bump"
    )
    assert len(now["spans"]) >= 3


def test_chunk_spans_match_golden() -> None:
    for name in CHUNKERS:
        _check(name, _prose(name))


@pytest.mark.parametrize("language", sorted(CODE))
def test_code_spans_match_golden(language: str) -> None:
    """The code goldens were recorded with one version of each grammar wheel; a newer
    wheel is a new policy (its id names the version), so its spans are not compared."""
    name = f"code-{language}"
    recorded = json.loads(SPANS.read_text(encoding="utf-8"))[name]["grammar"]
    now = _code(language)
    if now["grammar"] != recorded:
        pytest.skip(
            f"the {language} golden was recorded with grammar {recorded}, {now['grammar']} "
            "is installed: regenerate tests/golden/spans.json to compare its spans"
        )
    _check(name, now)


def test_identity_golden_values() -> None:
    assert input_key("all-MiniLM-L6-v2", "hello world") == GOLDEN_KEY
    assert point_id("a.md", GOLDEN_KEY, 0) == GOLDEN_POINT
    assert text_revision("hello world") == GOLDEN_REVISION


GOLDEN_KEY = "f809264e1449049ea7b577e519eabe9f75558e255868ea1446d0d16dce8d5185"
GOLDEN_POINT = "dc431a9d-2944-5dc2-b05f-054a96b81cc4"
GOLDEN_REVISION = "635891923a23f9efebbfe657884d1eb9"

if __name__ == "__main__" and "--regenerate" in sys.argv:
    SPANS.write_text(json.dumps(current(), indent=1) + "\n", encoding="utf-8")
    print(f"wrote {SPANS}")
