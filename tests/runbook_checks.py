"""What the markup parsers' tests (AsciiDoc, Org, LaTeX) check on the same runbook.

Each test module writes the runbook in its own markup: a document titled ``Runbook``
with sections ``Incident kind 0`` to ``3``, each of paragraphs ``When alert S.K fires,
...`` and a code block ``rechunk status --collection kbS``. Parsed, the title is a
level-1 heading and each section a level-2 one.
"""

from __future__ import annotations

from collections.abc import Callable

from rechunk.chunkers import StructuredChunker


def _chunker() -> StructuredChunker:
    return StructuredChunker(min_tokens=60, max_tokens=120)


def assert_sections_are_hard(text: str) -> None:
    """No chunk of the parsed runbook holds the end of one section and the start of the
    next."""
    for chunk in _chunker().chunk(text):
        assert chunk.text.count("## Incident kind") <= 1
        if "## Incident kind" in chunk.text:
            # (the title starts the first section: nothing stands between the two headings)
            assert chunk.text.removeprefix("# Runbook\n\n").startswith("## Incident kind")


def assert_an_edit_stays_in_its_section(
    parse: Callable[[str], str], runbook: Callable[[int], str]
) -> None:
    """An edit of one paragraph of section 2 leaves the other sections' chunks as they
    were: what is new lies in section 2, and is under a quarter of the tokens."""
    chunker = _chunker()
    old = chunker.chunk(parse(runbook(6)))
    edited = runbook(6).replace("alert 2.3 fires", "alert 2.3 fires twice in an hour")
    new = chunker.chunk(parse(edited))
    old_texts = {c.text for c in old}
    fresh = [c for c in new if c.text not in old_texts]
    assert fresh and all("Incident kind 2" in c.text or "2.3" in c.text or "2.4" in c.text
                         for c in fresh)  # fmt: skip
    assert sum(c.tokens for c in fresh) < 0.25 * sum(c.tokens for c in new)
