"""Scripts without a suffix (``bin/deploy``), read as code of the language their first
line names; a file with no suffix and no such line is not read."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from test_files import tree

from rechunk.sources.files import read_documents
from rechunk.sources.scripts import HEAD_BYTES, INTERPRETERS, script_language


@pytest.mark.parametrize(
    ("first_line", "language"),
    [
        ("#!/usr/bin/env python3", "python"),
        ("#!/usr/bin/python3.12 -u", "python"),
        ("#!/usr/bin/env -S python3 -X utf8", "python"),
        ("#!/usr/bin/env -u HOME LANG=C pypy3", "python"),
        ("#! /bin/sh", "bash"),
        ("#!/bin/bash -e", "bash"),
        ("#!/bin/dash", "bash"),
        ("#!/usr/bin/env node", "javascript"),
        ("#!/usr/bin/env ruby", "ruby"),
        ("#!/usr/bin/php", "php"),
        ("#!/usr/bin/env lua5.4", "lua"),
        ("#!/usr/bin/perl -w", "perl"),
        ("#!/usr/bin/env Rscript", "r"),
        ("#!/usr/bin/env zsh", "zsh"),
        ("#!/usr/bin/make -f", "make"),
        ("\ufeff#!/bin/sh", "bash"),
        ("#!/bin/sh\r", "bash"),
    ],
)
def test_the_first_line_names_the_language(first_line: str, language: str) -> None:
    text = f"{first_line}\necho done\n"
    assert script_language("bin/deploy", text) == language
    assert script_language("bin/deploy", text.encode()) == language


@pytest.mark.parametrize(
    "head",
    [
        "MIT License\n",
        "",
        "#!\n",
        "#!/usr/bin/env\n",
        "#!/usr/bin/env -S\n",
        "#!/usr/bin/awk -f\n",  # an interpreter we do not read
        "# !/bin/sh\n",
        " #!/bin/sh\n",
        "echo hi\n#!/bin/sh\n",
    ],
)
def test_other_first_lines_are_not_scripts(head: str) -> None:
    assert script_language("bin/tool", head) is None


def test_binary_heads_and_files_with_a_suffix_are_not_scripts() -> None:
    assert script_language("bin/tool", b"\x7fELF\x02\x01\x01\x00" + bytes(range(256))) is None
    assert script_language("bin/tool", b"#!/bin/sh\n\xff\xfe") == "bash"  # rest undecoded
    # a suffix says what a file is; the first line is read only without one
    assert script_language("deploy.cgi", "#!/usr/bin/env python3\n") is None
    assert script_language("notes.txt", "#!/bin/sh\n") is None


@given(st.text(max_size=80), st.sampled_from(["bin/run", "run", "a/b/c"]))
def test_only_a_first_line_starting_with_hash_bang_makes_a_script(text: str, path: str) -> None:
    if not text.removeprefix("\ufeff").startswith("#!"):
        assert script_language(path, text) is None
    else:
        assert script_language(path, text) in {None, *INTERPRETERS.values()}
    assert script_language(f"{path}.sh", f"#!/bin/sh\n{text}") is None


def test_a_long_first_line_is_read_from_its_head() -> None:
    line = "#!/usr/bin/env python3 " + "-W ignore " * 100
    assert len(line) > HEAD_BYTES
    assert script_language("bin/tool", line.encode()[:HEAD_BYTES]) == "python"


RELEASE = '''#!/usr/bin/env python3
"""Cut a release of the shop: bump the version, tag it."""

import subprocess


def bump(version: str) -> str:
    major, minor, patch = version.split(".")
    return f"{major}.{minor}.{int(patch) + 1}"


def main() -> None:
    subprocess.run(["git", "tag", bump("1.4.2")], check=True)


if __name__ == "__main__":
    main()
'''
DEPLOY = """#!/bin/sh
set -eu

deploy() {
  echo "deploying the shop to $1"
}

deploy "${1:-staging}"
"""
REPORT = """#!/usr/bin/perl -w
use strict;
print "orders today: 12\\n";
"""


def _repository(root: Path) -> Path:
    tree(root, {
        "scripts/release": RELEASE,
        "bin/deploy": DEPLOY,
        "tools/report": REPORT,
        "LICENSE": "Permission is granted to use this shop.\n",
        "README.md": "# Shop\n\nThe shop's scripts.\n",
    })  # fmt: skip
    (root / "bin" / "shop").write_bytes(b"\x7fELF\x02\x01\x01" + bytes(4096))  # a binary
    return root


def test_a_folder_s_scripts_are_read_as_code_and_other_files_without_a_suffix_are_not(
    tmp_path: Path,
) -> None:
    files = read_documents([_repository(tmp_path / "shop")])
    docs = {doc.doc_id: doc for doc in files.documents}
    assert set(docs) == {"scripts/release", "bin/deploy", "tools/report", "README.md"}
    languages = {doc_id: (doc.metadata or {}).get("language") for doc_id, doc in docs.items()}
    assert languages == {
        "scripts/release": "python",
        "bin/deploy": "bash",
        "tools/report": "perl",  # no grammar here: the sync gives it the recursive policy
        "README.md": None,
    }
    assert files.unsupported == {"": 2}  # LICENSE and the binary
    assert docs["scripts/release"].text == RELEASE  # the file as it is, first line and all
    where = docs["scripts/release"].locator
    assert where is not None
    start = RELEASE.index("def main")
    assert where(start, start + 10)["symbol"] == "main"
    # named directly, a script is read the same way
    (named,) = read_documents([tmp_path / "shop" / "bin" / "deploy"]).documents
    assert (named.metadata or {}).get("language") == "bash"
    assert read_documents([tmp_path / "shop" / "LICENSE"]).unsupported == {"": 1}
