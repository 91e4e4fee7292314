"""Keep each command's ``--help`` in docs/cli.md.

``python docs/gen_cli.py`` rewrites the text between each pair of markers::

    <!-- help:sync:start -->
    ...
    <!-- help:sync:end -->

with the help of ``rechunk sync`` (``help:rechunk`` holds the top-level help), and adds
a section at the end of the page for a command that has none yet. ``--check`` changes
nothing and exits 1 naming what is out of date; tests/test_docs.py runs the same check,
so a changed option fails the tests until the page is regenerated.

The help is formatted 88 columns wide whatever the terminal (argparse reads
``COLUMNS``), by the Python running this script (argparse's layout differs a little
between Python versions; regenerate with the project's own venv).
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from pathlib import Path

PAGE = Path(__file__).resolve().parent / "cli.md"
WIDTH = "88"


def parser_and_commands() -> tuple[argparse.ArgumentParser, dict[str, argparse.ArgumentParser]]:
    """The ``rechunk`` parser and its subcommands' parsers, by name, in the parser's order."""
    os.environ["COLUMNS"] = WIDTH
    from rechunk.cli import build_parser

    parser = build_parser()
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return parser, dict(action.choices)


def help_texts() -> dict[str, str]:
    """``{"rechunk": top-level help, command: its help}``."""
    parser, commands = parser_and_commands()
    texts = {"rechunk": parser.format_help()}
    texts.update((name, sub.format_help()) for name, sub in commands.items())
    return texts


def block(name: str, text: str) -> str:
    command = "rechunk --help" if name == "rechunk" else f"rechunk {name} --help"
    body = "\n".join(line.rstrip() for line in text.rstrip().splitlines())
    fence = "```"
    return (
        f"<!-- help:{name}:start -->\n{fence}text\n$ {command}\n{body}\n{fence}\n"
        f"<!-- help:{name}:end -->"
    )


def render(page: str, texts: dict[str, str]) -> str:
    """``page`` with every help block current and a section added for each new command."""
    for name, text in texts.items():
        pattern = re.compile(
            rf"<!-- help:{re.escape(name)}:start -->.*?<!-- help:{re.escape(name)}:end -->", re.S
        )
        new = block(name, text)
        if pattern.search(page):
            page = pattern.sub(lambda _, new=new: new, page)
        else:
            page = page.rstrip("\n") + f"\n\n## `rechunk {name}`\n\n{new}\n"
    return page


def stale_blocks(page: str, texts: dict[str, str]) -> list[str]:
    """Names whose block is missing or differs from the current help."""
    return [name for name, text in texts.items() if block(name, text) not in page]


def main(argv: list[str] | None = None) -> int:
    options = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    options.add_argument("--check", action="store_true", help="change nothing; exit 1 if stale")
    args = options.parse_args(argv)
    page = PAGE.read_text(encoding="utf-8")
    texts = help_texts()
    if args.check:
        stale = stale_blocks(page, texts)
        if stale:
            print(f"docs/cli.md is out of date for: {', '.join(stale)} "
                  "(run: python docs/gen_cli.py)", file=sys.stderr)
            return 1
        return 0
    new = render(page, texts)
    if new != page:
        PAGE.write_text(new, encoding="utf-8")
        print(f"rewrote {PAGE}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
