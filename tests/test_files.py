"""File discovery for `rechunk sync FOLDER`: globs, .gitignore rules (checked against the
git binary where it is installed), links, and what is reported as left out."""

from __future__ import annotations

import os
import random
import shutil
import subprocess
from pathlib import Path

import pytest

from rechunk.errors import ConfigError
from rechunk.sources.files import FileSet, read_documents
from rechunk.sources.ignore import wildmatch

GIT = shutil.which("git")
needs_git = pytest.mark.skipif(GIT is None, reason="needs the git binary as the oracle")


def tree(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return root


def ids(files: FileSet) -> list[str]:
    return sorted(d.doc_id for d in files.documents)


def git_reads(repo: Path, home: Path) -> list[str]:
    """The files git would add in a new repository at ``repo`` (hidden ones left out)."""
    env = {**os.environ, "HOME": str(home), "GIT_CONFIG_GLOBAL": os.devnull,
           "GIT_CONFIG_NOSYSTEM": "1"}  # fmt: skip
    if not (repo / ".git").exists():
        subprocess.run(["git", "init", "-q", str(repo)], check=True, env=env)
    listed = subprocess.run(
        ["git", "-C", str(repo), "ls-files", "--others", "--exclude-standard", "-z"],
        check=True, capture_output=True, env=env,
    ).stdout  # fmt: skip
    names = [os.fsdecode(name) for name in listed.split(b"\0") if name]
    return sorted(n for n in names if not any(part.startswith(".") for part in n.split("/")))


@pytest.mark.parametrize(
    ("pattern", "path", "expected"),
    [
        ("*.md", "a.md", True),
        ("*.md", "docs/a.md", False),  # "*" stops at "/"
        ("docs/*.md", "docs/a.md", True),
        ("**/a.md", "x/y/a.md", True),
        ("**/a.md", "a.md", True),
        ("a/**/b", "a/b", True),
        ("a/**/b", "a/x/y/b", True),
        ("a/**", "a/x/y", True),
        ("a/**", "a", False),
        ("a**b", "a/b", False),  # "**" not between slashes is "*"
        ("?.md", "a.md", True),
        ("?.md", "/.md", False),
        ("[ab].md", "b.md", True),
        ("[!ab].md", "c.md", True),
        ("[^ab].md", "a.md", False),
        ("[]].md", "].md", True),
        ("[a-c].md", "b.md", True),
        ("[z-a].md", "b.md", False),  # a reversed range matches nothing
        ("[[:digit:]].md", "7.md", True),
        ("[[:upper:]].md", "a.md", False),
        ("[a/].md", "/.md", False),  # a bracket never matches "/"
        ("\\*.md", "*.md", True),
        ("\\*.md", "a.md", False),
    ],
)
def test_wildmatch(pattern: str, path: str, expected: bool) -> None:
    regex = wildmatch(pattern)
    assert regex is not None and bool(regex.fullmatch(path)) == expected


@pytest.mark.parametrize("pattern", ["[ab", "a\\", "[[:nope:]]", "[a\\"])
def test_patterns_git_cannot_use_match_nothing(pattern: str) -> None:
    assert wildmatch(pattern) is None


def test_rules_of_each_folder(tmp_path: Path) -> None:
    """Patterns relative to their file, folder patterns, negation, a deeper file
    overriding a shallower one; --no-ignore reads everything."""
    tree(tmp_path, {
        ".gitignore": "node_modules/\n/build\ndraft-*.md\n!draft-keep.md\n",
        "guide.md": "g", "draft-1.md": "d", "draft-keep.md": "k",
        "node_modules/pkg/README.md": "vendor", "build/out.md": "built",
        "sub/build/kept.md": "an anchored pattern applies at its own level only",
        "sub/.gitignore": "!draft-2.md\nlocal.md\n", "sub/draft-2.md": "d2",
        "sub/local.md": "l", "sub/draft-3.md": "d3",
    })  # fmt: skip
    files = read_documents([tmp_path], ["*.md"])
    assert ids(files) == ["draft-keep.md", "guide.md", "sub/build/kept.md", "sub/draft-2.md"]
    # excluded folders are not entered (nor counted inside); excluded files are listed
    assert sorted(files.ignored) == [
        "build/", "draft-1.md", "node_modules/", "sub/draft-3.md", "sub/local.md"
    ]
    everything = read_documents([tmp_path], ["*.md"], gitignore=False)
    assert len(everything.documents) == 9 and everything.ignored == []
    # a file named directly is read whatever .gitignore says
    assert ids(read_documents([tmp_path / "build" / "out.md"], ["*.md"])) == ["out.md"]


def test_rules_above_the_folder_apply_up_to_the_repository_top(tmp_path: Path) -> None:
    tree(tmp_path, {
        ".gitignore": "*.md\n",  # above the repository: never applies
        "repo/.gitignore": "site/\n*.draft.md\ndocs/_build/\n",
        "repo/docs/index.md": "i", "repo/docs/x.draft.md": "s", "repo/docs/_build/x.md": "x",
        "repo/site/page.md": "p", "repo/site/y.draft.md": "y",
    })  # fmt: skip
    docs = tmp_path / "repo" / "docs"
    assert ids(read_documents([docs], ["*.md"])) == ["_build/x.md", "index.md", "x.draft.md"]
    (tmp_path / "repo" / ".git").mkdir()  # now repo/ is the top of a repository
    files = read_documents([docs], ["*.md"])
    assert ids(files) == ["index.md"] and sorted(files.ignored) == ["_build/", "x.draft.md"]
    # a folder named on purpose is read though excluded, and the rules still apply in it
    site = read_documents([tmp_path / "repo" / "site"], ["*.md"])
    assert ids(site) == ["page.md"] and site.ignored == ["y.draft.md"]


def test_a_repository_inside_starts_afresh(tmp_path: Path) -> None:
    tree(tmp_path, {
        ".gitignore": "*.txt\nnotes/\n", "a.md": "a",
        "lib/.git/HEAD": "a submodule's or a nested clone's own repository",
        "lib/guide.txt": "g", "lib/notes/n.md": "n", "lib/.gitignore": "old.md\n",
        "lib/old.md": "o",
    })  # fmt: skip
    (tmp_path / ".git").mkdir()
    outer = read_documents([tmp_path], ["*.md", "*.txt"])
    inner = read_documents([tmp_path / "lib"], ["*.md", "*.txt"])
    assert ids(outer) == ["a.md", "lib/guide.txt", "lib/notes/n.md"]
    assert ids(inner) == ["guide.txt", "notes/n.md"]


def test_rechunkignore_leaves_out_what_rechunk_should_not_read(tmp_path: Path) -> None:
    """Same syntax and places as .gitignore, read after it in each folder, and applied
    with --no-ignore too."""
    tree(tmp_path, {
        ".gitignore": "api/\n",
        ".rechunkignore": "package-lock.json\nvendor/\n!api/\ndraft.md\n",
        "guide.md": "g", "package-lock.json": '{"lockfileVersion": 3}',
        "vendor/lib.md": "v", "api/ref.md": "taken back in by .rechunkignore",
        "sub/.rechunkignore": "*.tmpl.md\n", "sub/page.tmpl.md": "t", "sub/page.md": "p",
        "sub/draft.md": "d",
    })  # fmt: skip
    files = read_documents([tmp_path])
    assert ids(files) == ["api/ref.md", "guide.md", "sub/page.md"]
    assert sorted(files.ignored) == [
        "package-lock.json", "sub/draft.md", "sub/page.tmpl.md", "vendor/"
    ]
    everything_git_ignores = read_documents([tmp_path], gitignore=False)
    assert ids(everything_git_ignores) == ids(files)
    # the files above a folder apply up to the top of its repository, as .gitignore's do
    assert ids(read_documents([tmp_path / "sub"])) == ["draft.md", "page.md"]
    (tmp_path / ".git").mkdir()
    assert ids(read_documents([tmp_path / "sub"])) == ["page.md"]
    # a file named directly is read whatever the rules say
    assert ids(read_documents([tmp_path / "vendor" / "lib.md"])) == ["lib.md"]


def test_odd_gitignore_files(tmp_path: Path) -> None:
    """A byte-order mark, CRLF, escaped and trailing spaces, lines git cannot use, and a
    .gitignore that is a symbolic link (git does not follow it)."""
    (tmp_path / ".gitignore").write_bytes(
        "\ufeffa.md\r\n[unclosed\r\nb.md\\\n\\#c.md\nd.md   \ne.md\\ \n".encode()
    )
    for name in ("a.md", "b.md", "#c.md", "d.md", "e.md ", "f.md"):
        (tmp_path / name).write_text("x")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "g.md").write_text("g")
    (tmp_path / "sub" / ".gitignore").symlink_to(tmp_path / "rules")
    (tmp_path / "rules").write_text("g.md\n")
    assert ids(read_documents([tmp_path], ["*.md", "*.md "])) == ["b.md", "f.md", "sub/g.md"]


IDIOMS = {
    "everything but Markdown": "*\n!*/\n!*.md\n",
    "only Markdown under docs": "docs/**\n!docs/**/\n!docs/**/*.md\n",
    "a folder's content, then the folder back": "a/*\n!a\n",
    "a folder, then its content back": "a\n!a/**\n",
    "nested negation of a folder": "*.draft.md\n",
}


@needs_git
@pytest.mark.parametrize("idiom", sorted(IDIOMS))
def test_idioms_read_what_git_reads(tmp_path: Path, idiom: str) -> None:
    repo = tree(tmp_path / "repo", {
        ".gitignore": IDIOMS[idiom], "a.md": "a", "x.txt": "x", "a/docs/y.md": "y",
        "docs/d.md": "d", "docs/api/e.md": "e", "docs/api/f.txt": "f", "b/x.draft.md": "x",
        "b/ok.md": "ok", "b/.gitignore": "!x.draft.md\n" if idiom.startswith("nested") else "",
    })  # fmt: skip
    expected = git_reads(repo, tmp_path)
    assert ids(read_documents([repo], ["*"])) == expected


@needs_git
def test_random_trees_read_what_git_reads(tmp_path: Path) -> None:
    """Random trees and rules, checked against git (seeded: the same trees every run)."""
    folders = ["a", "b", "docs", "build", "a/b", "a/docs", "docs/a", "build/a", "a/b/c"]
    names = ["x.md", "a.md", "b.md", "build.md", "keep.md", "y.txt.md"]
    patterns = ["a", "/a", "a/", "docs", "docs/", "/build/", "*.md", "x.md", "/x.md", "a/x.md",
                "a/b", "a/b/", "**/b", "**/b/x.md", "a/**", "a/**/x.md", "docs/*", "docs/*/",
                "*/x.md", "build/**/*.md", "b*", "k*.md", "[ab].md", "?.md", "*", "*/", "**",
                "/a/*", "**/a/**"]  # fmt: skip
    rng = random.Random(11)
    for trial in range(60):
        spec = {
            f"{folder}/{name}".lstrip("/"): "t"
            for folder in ["", *rng.sample(folders, rng.randint(2, 6))]
            for name in rng.sample(names, rng.randint(1, 3))
        }
        holders = sorted({str(Path(path).parent) for path in spec})
        for holder in rng.sample(holders, min(len(holders), rng.randint(1, 3))):
            rules = [("!" if rng.random() < 0.4 else "") + rng.choice(patterns)
                     for _ in range(rng.randint(1, 4))]  # fmt: skip
            spec[f"{holder}/.gitignore".removeprefix("./")] = "\n".join(rules) + "\n"
        repo = tree(tmp_path / f"t{trial}", spec)
        assert ids(read_documents([repo], ["*.md"])) == [
            n for n in git_reads(repo, tmp_path) if n.endswith(".md")
        ], spec


def test_globs_use_git_wildcards(tmp_path: Path) -> None:
    tree(tmp_path, {"a.md": "a", "docs/b.md": "b", "docs/api/c.md": "c", "guides/d.rst": "d",
                    "x/guides/e.rst": "e"})  # fmt: skip
    assert ids(read_documents([tmp_path], ["guides/*.rst"])) == ["guides/d.rst", "x/guides/e.rst"]
    assert ids(read_documents([tmp_path], ["docs/**/*.md"])) == ["docs/api/c.md", "docs/b.md"]
    assert len(read_documents([tmp_path], ["**"]).documents) == 5
    for pattern in ("[unclosed", "trailing\\", "/abs/*.md", ""):
        with pytest.raises(ConfigError, match="--glob"):
            read_documents([tmp_path], [pattern])


def test_a_glob_starting_with_an_exclamation_mark_leaves_files_out(tmp_path: Path) -> None:
    """`--glob '*.py' --glob '!tests/**'` read the tests anyway, and `--glob '!*.md'` alone
    matched nothing (a literal '!'), each with exit 0."""
    tree(tmp_path, {"calc.py": "c", "tests/test_calc.py": "t", "tests/unit/test_x.py": "u",
                    "README.md": "r", "!odd.md": "o"})  # fmt: skip
    assert ids(read_documents([tmp_path], ["*.py", "!tests/**"])) == ["calc.py"]
    assert ids(read_documents([tmp_path], ["!tests/**", "*.py"])) == ["calc.py"]  # any order
    # a folder's name alone, as in .gitignore (it excluded nothing)
    for folder in ("!tests", "!tests/"):
        assert ids(read_documents([tmp_path], ["*.py", folder])) == ["calc.py"], folder
    # exclusions alone apply to every file
    assert ids(read_documents([tmp_path], ["!*.md"])) == [
        "calc.py", "tests/test_calc.py", "tests/unit/test_x.py"
    ]
    assert ids(read_documents([tmp_path], ["\\!*.md"])) == ["!odd.md"]  # a literal '!'
    with pytest.raises(ConfigError, match="'!tests/\\*\\*' leaves files out"):
        read_documents([tmp_path], ["!"])


def test_hidden_files_and_folders_are_named_not_read(tmp_path: Path) -> None:
    """A repository's `.github/` workflows and `.env.example` were left out with no word
    (`ignored` empty); they are named, but for version control's folder, rechunk's own,
    the ignore files, .DS_Store and what git ignores (a tool's cache that ignores itself
    too), and a hidden folder given beside its folder is read."""
    tree(tmp_path, {"src/a.py": "a", ".github/workflows/ci.yml": "on: push\n",
                    ".env.example": "X=1\n", ".git/config": "c", ".rechunk/m.json": "{}",
                    ".gitignore": ".venv/\n", ".venv/lib.py": "v", "docs/.draft.md": "d",
                    ".mypy_cache/.gitignore": "*\n", ".mypy_cache/x.json": "{}",
                    "docs/.DS_Store": "x"})  # fmt: skip
    files = read_documents([tmp_path])
    assert ids(files) == ["src/a.py"]
    assert files.hidden == [".github/", ".env.example", "docs/.draft.md"]
    # hidden files count when they match the globs; hidden folders always
    assert read_documents([tmp_path], ["*.md"]).hidden == [".github/", "docs/.draft.md"]
    both = read_documents([tmp_path, tmp_path / ".github"])
    assert ids(both) == [".github/workflows/ci.yml", "src/a.py"]
    assert both.hidden == [".env.example", "docs/.draft.md"]


def test_links_to_folders_are_reported_once(tmp_path: Path) -> None:
    tree(tmp_path, {"docs/a.md": "a", "docs/x.draft.md": "x", "docs/.gitignore": "*.draft.md\n",
                    "elsewhere/b.md": "b"})  # fmt: skip
    (tmp_path / "docs" / "more").symlink_to(tmp_path / "elsewhere")
    files = read_documents([tmp_path / "docs", tmp_path / "docs"], ["*.md"])
    assert ids(files) == ["a.md"] and files.links == ["more/"]
    assert files.ignored == ["x.draft.md"]


def test_a_file_removed_after_its_folder_was_listed_is_gone_not_skipped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A temporary file deleted between the listing and the read was 'skipped: cannot
    read ... No such file' (exit 1 on a busy share, and kept under --prune)."""
    import rechunk.sources.files as files

    (tmp_path / "keep.md").write_text("# keep\n\nStays.\n")
    (tmp_path / "flicker.md").write_text("# flicker\n\nGone before it is read.\n")
    real = files.read_bytes

    def removed_first(path: Path, limit: int = -1) -> bytes:
        if path.name == "flicker.md" and path.exists():
            path.unlink()  # the file goes after the folder was listed
        return real(path, limit)

    monkeypatch.setattr(files, "read_bytes", removed_first)
    found = read_documents([tmp_path])
    assert [d.doc_id for d in found.documents] == ["keep.md"]
    assert found.skipped == [] and "flicker.md" not in found.paths


def test_a_record_and_a_file_of_one_doc_id_name_both_files(tmp_path: Path) -> None:
    """A record 'a.md' of x.jsonl and a file named 'x.jsonl#a.md': the sync stopped with
    'doc_id ... appears more than once in one sync', naming neither file."""
    from rechunk.sources.registry import ParseOptions

    (tmp_path / "x.jsonl").write_text('{"id": "a.md", "text": "A record."}\n')
    (tmp_path / "x.jsonl#a.md").write_text("# A file\n\nNamed like the record.\n")
    with pytest.raises(ConfigError, match=r"two files map to the same doc_id 'x\.jsonl#a\.md'"):
        read_documents([tmp_path], options=ParseOptions(id_field="id"))


def test_a_link_under_a_readable_name_to_a_file_no_parser_reads_is_read(tmp_path: Path) -> None:
    """``README.md -> README``: the target has no suffix a parser reads, the link has; the
    file is read once, through the link, and the target is counted unsupported."""
    (tmp_path / "proj").mkdir()
    (tmp_path / "proj" / "README").write_text("# Project\n\nHow it is built.\n")
    (tmp_path / "proj" / "README.md").symlink_to("README")
    found = read_documents([tmp_path / "proj"])
    assert [d.doc_id for d in found.documents] == ["README.md"]
    assert found.unsupported[""] == 1
    # a file found directly and through a link, both readable: read once, under its own name
    (tmp_path / "proj" / "guide.md").write_text("# Guide\n\nSteps.\n")
    (tmp_path / "proj" / "guide.txt").symlink_to("guide.md")
    found = read_documents([tmp_path / "proj"])
    assert sorted(d.doc_id for d in found.documents) == ["README.md", "guide.md"]


def test_a_picture_pasted_as_a_data_uri_is_named(tmp_path: Path) -> None:
    """A Markdown note with a picture pasted in as base64 is read as written (its text is
    the file's), and named with the size of its data: URIs, which a sync embeds as text;
    a short inline icon and a note without one are not named."""
    import base64

    (tmp_path / "kb").mkdir()
    picture = base64.b64encode(bytes(range(256)) * 40).decode()  # 10 KB of bytes
    (tmp_path / "kb" / "flow.md").write_text(
        f"# Flow\n\n![the flow](data:image/png;base64,{picture})\n\nAfter it.\n"
    )
    icon = base64.b64encode(b"tiny").decode()
    (tmp_path / "kb" / "icon.md").write_text(f"# Icon\n\n![i](data:image/gif;base64,{icon})\n")
    (tmp_path / "kb" / "plain.md").write_text("# Plain\n\nNo picture here.\n")
    wrapped = "\n".join(picture[i : i + 76] for i in range(0, len(picture), 76))
    (tmp_path / "kb" / "wrapped.md").write_text(f"![w](data:image/PNG;BASE64,{wrapped})\n")
    found = read_documents([tmp_path / "kb"])
    assert sorted(found.inline_data) == [("flow.md", len(picture)), ("wrapped.md", len(picture))]
    flow = next(d for d in found.documents if d.doc_id == "flow.md")
    assert picture in flow.text
