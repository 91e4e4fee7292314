"""The languages of the code policy: grammar wheels, file suffixes, definitions and names.

Each language's grammar comes from its own PyPI wheel (``tree-sitter-python``, ...),
which ships the compiled grammar: nothing is downloaded at run time. The tables
here say which syntax nodes are *definitions* (they name a symbol path and a chunk
boundary prefers their edges), which are *attached* to the item that follows
them (comments, Rust attributes: kept in the same chunk as that item), and which
make up a file's *prologue* (imports, package and module declarations).
"""

from __future__ import annotations

import functools
import importlib.metadata
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import PurePath
from typing import Any

from rechunk._optional import require
from rechunk.errors import ConfigError, MissingDependencyError

__all__ = [
    "LANGUAGES",
    "LanguageSpec",
    "grammar",
    "language_for",
    "symbol_name",
]


@dataclass(frozen=True)
class LanguageSpec:
    """One language: where its grammar comes from and how its definitions look."""

    name: str
    #: the grammar wheel's import name, the function returning its language, its PyPI name
    module: str
    function: str
    package: str
    suffixes: tuple[str, ...]
    #: node types that define a symbol
    definitions: frozenset[str]
    #: node types kept with the item right below them (no blank line between)
    attached: frozenset[str]
    #: joins the names of a symbol path (``Cart.add``, ``geo::Point::x``)
    separator: str = "."
    #: list nodes that begin where their first element begins (Python's ``block``):
    #: not a nesting level of their own, and never the item that starts a line
    lists: frozenset[str] = frozenset()
    #: top-level node types of a file's prologue: imports, package and module
    #: declarations (with the leading comments, the prologue is a chunk of its own)
    prologue: frozenset[str] = frozenset()
    #: names of the functions or commands whose call on a line of its own (or as a
    #: variable's value) belongs to the prologue: Ruby's ``require``, Lua's ``require``,
    #: a shell's ``source``
    prologue_calls: frozenset[str] = frozenset()


_JS_DEFINITIONS = frozenset(
    {
        "function_declaration",
        "generator_function_declaration",
        "class_declaration",
        "abstract_class_declaration",
        "class",
        "method_definition",
        "interface_declaration",
        "enum_declaration",
        "internal_module",
        "module",
        "variable_declarator",  # named only when its value is a function or class
        "assignment_expression",  # named only when its value is a function or class
        "pair",  # named only when its value is a function
    }
)
_COMMENTS = frozenset({"comment", "line_comment", "block_comment"})
_JS_PROLOGUE = frozenset({"import_statement"})  # and require() declarations: code.py
_C_PROLOGUE = frozenset({"preproc_include"})

LANGUAGES: dict[str, LanguageSpec] = {
    spec.name: spec
    for spec in (
        LanguageSpec(
            "python",
            "tree_sitter_python",
            "language",
            "tree-sitter-python",
            (".py", ".pyi"),
            frozenset({"function_definition", "class_definition"}),
            _COMMENTS,
            lists=frozenset({"block"}),
            prologue=frozenset(
                {"future_import_statement", "import_statement", "import_from_statement"}
            ),
        ),
        LanguageSpec(
            "javascript",
            "tree_sitter_javascript",
            "language",
            "tree-sitter-javascript",
            (".js", ".mjs", ".cjs", ".jsx"),
            _JS_DEFINITIONS,
            _COMMENTS,
            prologue=_JS_PROLOGUE,
        ),
        LanguageSpec(
            "typescript",
            "tree_sitter_typescript",
            "language_typescript",
            "tree-sitter-typescript",
            (".ts", ".mts", ".cts"),
            _JS_DEFINITIONS,
            _COMMENTS,
            prologue=_JS_PROLOGUE,
        ),
        LanguageSpec(
            "tsx",
            "tree_sitter_typescript",
            "language_tsx",
            "tree-sitter-typescript",
            (".tsx",),
            _JS_DEFINITIONS,
            _COMMENTS,
            prologue=_JS_PROLOGUE,
        ),
        LanguageSpec(
            "go",
            "tree_sitter_go",
            "language",
            "tree-sitter-go",
            (".go",),
            frozenset({"function_declaration", "method_declaration", "type_spec"}),
            _COMMENTS,
            lists=frozenset({"statement_list"}),
            prologue=frozenset({"package_clause", "import_declaration"}),
        ),
        LanguageSpec(
            "rust",
            "tree_sitter_rust",
            "language",
            "tree-sitter-rust",
            (".rs",),
            frozenset(
                {
                    "function_item",
                    "impl_item",
                    "struct_item",
                    "enum_item",
                    "union_item",
                    "trait_item",
                    "mod_item",
                    "macro_definition",
                }
            ),
            _COMMENTS | {"attribute_item"},
            "::",
            prologue=frozenset(
                {"use_declaration", "extern_crate_declaration", "inner_attribute_item"}
            ),
        ),
        LanguageSpec(
            "java",
            "tree_sitter_java",
            "language",
            "tree-sitter-java",
            (".java",),
            frozenset(
                {
                    "class_declaration",
                    "interface_declaration",
                    "enum_declaration",
                    "record_declaration",
                    "annotation_type_declaration",
                    "method_declaration",
                    "constructor_declaration",
                }
            ),
            _COMMENTS,
            prologue=frozenset({"package_declaration", "import_declaration"}),
        ),
        LanguageSpec(
            "c",
            "tree_sitter_c",
            "language",
            "tree-sitter-c",
            (".c", ".h"),
            frozenset(
                {"function_definition", "struct_specifier", "union_specifier", "enum_specifier"}
            ),
            _COMMENTS,
            prologue=_C_PROLOGUE,
        ),
        LanguageSpec(
            "cpp",
            "tree_sitter_cpp",
            "language",
            "tree-sitter-cpp",
            (".cc", ".cpp", ".cxx", ".c++", ".hpp", ".hh", ".hxx", ".h++"),
            frozenset(
                {
                    "function_definition",
                    "struct_specifier",
                    "union_specifier",
                    "enum_specifier",
                    "class_specifier",
                    "namespace_definition",
                }
            ),
            _COMMENTS,
            "::",
            prologue=_C_PROLOGUE | {"using_declaration"},
        ),
        LanguageSpec(
            "csharp",
            "tree_sitter_c_sharp",
            "language",
            "tree-sitter-c-sharp",
            (".cs",),
            frozenset(
                {
                    "namespace_declaration",
                    "file_scoped_namespace_declaration",
                    "class_declaration",
                    "struct_declaration",
                    "interface_declaration",
                    "enum_declaration",
                    "record_declaration",
                    "method_declaration",
                    "constructor_declaration",
                    "property_declaration",
                }
            ),
            _COMMENTS,
            prologue=frozenset({"using_directive", "extern_alias_directive"}),
        ),
        LanguageSpec(
            "kotlin",
            "tree_sitter_kotlin",
            "language",
            "tree-sitter-kotlin",
            (".kt", ".kts"),
            frozenset(
                {
                    "class_declaration",
                    "object_declaration",
                    "function_declaration",
                    "secondary_constructor",
                }
            ),
            _COMMENTS,
            prologue=frozenset({"package_header", "import", "import_header", "import_list"}),
        ),
        LanguageSpec(
            "swift",
            "tree_sitter_swift",
            "language",
            "tree-sitter-swift",
            (".swift",),
            frozenset(
                {
                    "class_declaration",
                    "protocol_declaration",
                    "function_declaration",
                    "init_declaration",
                    "protocol_function_declaration",
                }
            ),
            _COMMENTS,
            prologue=frozenset({"import_declaration"}),
        ),
        LanguageSpec(
            "scala",
            "tree_sitter_scala",
            "language",
            "tree-sitter-scala",
            (".scala", ".sc"),
            frozenset(
                {
                    "class_definition",
                    "object_definition",
                    "trait_definition",
                    "enum_definition",
                    "function_definition",
                    "function_declaration",
                }
            ),
            _COMMENTS,
            prologue=frozenset({"package_clause", "import_declaration"}),
        ),
        LanguageSpec(
            "php",
            "tree_sitter_php",
            "language_php",
            "tree-sitter-php",
            (".php",),
            frozenset(
                {
                    "class_declaration",
                    "interface_declaration",
                    "trait_declaration",
                    "enum_declaration",
                    "function_definition",
                    "method_declaration",
                }
            ),
            _COMMENTS | {"php_tag"},  # `<?php` goes with what follows it
            "::",
            prologue=frozenset({"namespace_definition", "namespace_use_declaration"}),
            prologue_calls=frozenset(
                {"require", "require_once", "include", "include_once"}
            ),
        ),
        LanguageSpec(
            "ruby",
            "tree_sitter_ruby",
            "language",
            "tree-sitter-ruby",
            (".rb",),
            frozenset({"module", "class", "singleton_class", "method", "singleton_method"}),
            _COMMENTS,
            "::",
            lists=frozenset({"body_statement"}),
            prologue_calls=frozenset({"require", "require_relative", "load"}),
        ),
        LanguageSpec(
            "lua",
            "tree_sitter_lua",
            "language",
            "tree-sitter-lua",
            (".lua",),
            frozenset({"function_declaration"}),
            _COMMENTS,
            prologue_calls=frozenset({"require"}),
        ),
        LanguageSpec(
            "bash",
            "tree_sitter_bash",
            "language",
            "tree-sitter-bash",
            (".sh", ".bash"),
            frozenset({"function_definition"}),
            _COMMENTS,
            prologue_calls=frozenset({"source", ".", "set", "shopt"}),
        ),
        # -- the configuration and build files a repository keeps beside its code
        LanguageSpec(
            "yaml",
            "tree_sitter_yaml",
            "language",
            "tree-sitter-yaml",
            (".yaml", ".yml"),
            frozenset({"block_mapping_pair"}),  # named when its value is a block
            frozenset({"comment"}),
        ),
        LanguageSpec(
            "toml",
            "tree_sitter_toml",
            "language",
            "tree-sitter-toml",
            (".toml",),
            frozenset({"table", "table_array_element"}),
            frozenset({"comment"}),
        ),
        LanguageSpec(
            "css",
            "tree_sitter_css",
            "language",
            "tree-sitter-css",
            (".css",),
            frozenset(
                {"rule_set", "media_statement", "supports_statement", "keyframes_statement"}
            ),
            frozenset({"comment", "js_comment"}),
            " ",  # a rule inside an at-rule: `@media (max-width: 600px) .cart`
            prologue=frozenset({"charset_statement", "import_statement", "namespace_statement"}),
        ),
        LanguageSpec(
            "hcl",
            "tree_sitter_hcl",
            "language",
            "tree-sitter-hcl",
            (".tf", ".hcl", ".tfvars"),
            frozenset({"block"}),
            frozenset({"comment"}),
            lists=frozenset({"body"}),
        ),
        LanguageSpec(
            "dockerfile",
            "tree_sitter_dockerfile",
            "language",
            "tree-sitter-dockerfile",
            (".dockerfile",),  # and files named Dockerfile, Containerfile: _BY_NAME
            frozenset(),
            frozenset({"comment"}),
        ),
        LanguageSpec(
            "make",
            "tree_sitter_make",
            "language",
            "tree-sitter-make",
            (".mk", ".mak"),  # and files named Makefile: _BY_NAME
            frozenset({"rule", "define_directive"}),
            frozenset({"comment"}),
            prologue=frozenset({"include_directive"}),
        ),
    )
}
_ALIASES = {
    "py": "python",
    "js": "javascript",
    "jsx": "javascript",
    "ts": "typescript",
    "golang": "go",
    "rs": "rust",
    "c++": "cpp",
    "cxx": "cpp",
    "c#": "csharp",
    "cs": "csharp",
    "c_sharp": "csharp",
    "kt": "kotlin",
    "rb": "ruby",
    "sh": "bash",
    "shell": "bash",
    "yml": "yaml",
    "terraform": "hcl",
    "tf": "hcl",
    "docker": "dockerfile",
    "containerfile": "dockerfile",
    "makefile": "make",
}
_BY_SUFFIX = {suffix: spec.name for spec in LANGUAGES.values() for suffix in spec.suffixes}
#: files known by their name (any case): a Dockerfile has no suffix, or the stage's
#: (``Dockerfile.prod``)
_BY_NAME = {
    "dockerfile": "dockerfile",
    "containerfile": "dockerfile",
    "makefile": "make",
    "gnumakefile": "make",
}


#: a line only C++ has (a C header may hold C++ only inside ``#ifdef __cplusplus``,
#: where ``extern "C" {`` is the usual line: it is not one of these)
_CPP_LINE = re.compile(
    r"^[ \t]*(?:"
    r"template[ \t]*<"  # a template
    r"|namespace(?:[ \t]+[\w:]+)?[ \t]*\{"  # a namespace block
    r"|using[ \t]+(?:namespace[ \t]+\w|[\w:]+[ \t]*=)"  # a using-directive or alias
    r"|class[ \t]+\w+[ \t]*\{"  # a class body
    r"|(?:class|struct)[ \t]+\w+[^;(\n]*(?::[ \t]*(?:public|private|protected)\b|\bfinal\b)"
    r"|(?:public|private|protected)[ \t]*:(?!:)"  # an access specifier
    r"|#[ \t]*include[ \t]*<[\w/]+>"  # a standard C++ header (C's end in .h)
    r")",
    re.MULTILINE,
)


def language_for(path: str | PurePath, text: str | None = None) -> str | None:
    """The language of a source file by its suffix (``"src/app.tsx"`` -> ``"tsx"``), or None.

    The suffix is matched without regard to case. A ``.h`` header is C, or C++ when
    ``text`` (the file's text) has a line only C++ has: a template, a namespace or
    class body, an access specifier, a using-directive, a class with a base, or an
    ``#include`` of a standard C++ header such as ``<vector>``. Without ``text`` it is C.
    A file with no known suffix is known by its name: ``Dockerfile``, ``Containerfile``
    (and ``Dockerfile.prod``), ``Makefile``, ``GNUmakefile``.
    """
    pure = PurePath(path)
    suffix = pure.suffix.lower()
    if suffix == ".h" and text is not None and _CPP_LINE.search(text):
        return "cpp"
    found = _BY_SUFFIX.get(suffix)
    if found is None:
        name = pure.name.lower()
        if name in _BY_NAME:
            found = _BY_NAME[name]
        elif _BY_NAME.get(name.split(".", 1)[0]) == "dockerfile":  # a stage's own file
            found = "dockerfile"
    return found


def spec_for(language: str) -> LanguageSpec:
    """The table of ``language`` (a name such as ``"python"`` or an alias such as ``"py"``)."""
    if not isinstance(language, str):
        raise ConfigError(f"language must be a str, not {type(language).__name__}")
    key = language.strip().lower()
    spec = LANGUAGES.get(_ALIASES.get(key, key))
    if spec is None:
        raise ConfigError(
            f"no code grammar for language {language!r}; choose from {', '.join(LANGUAGES)} "
            "or use the recursive policy for this file"
        )
    return spec


@functools.cache
def grammar(name: str) -> tuple[Any, str]:
    """``(tree_sitter.Language, grammar wheel version)`` for a language of :data:`LANGUAGES`.

    Raises :class:`MissingDependencyError` (naming the ``code`` extra) when
    ``tree_sitter`` or the language's grammar wheel is not installed.
    """
    spec = LANGUAGES[name]
    tree_sitter = require("tree_sitter", "code", "tree-sitter")
    wheel = require(spec.module, "code", spec.package)
    try:
        version = importlib.metadata.version(spec.package)
    except importlib.metadata.PackageNotFoundError as exc:  # pragma: no cover - odd installs
        raise MissingDependencyError(spec.package, "code") from exc
    return tree_sitter.Language(getattr(wheel, spec.function)()), version


# -- symbol names -----------------------------------------------------------------------------

_FUNCTION_VALUES = frozenset(
    {
        "function_expression",
        "function",
        "arrow_function",
        "generator_function",
        "class",
    }
)


def _text(node: Any, source: bytes) -> str:
    return " ".join(source[node.start_byte : node.end_byte].decode("utf-8", "replace").split())


def _field_text(node: Any, field: str, source: bytes) -> str | None:
    child = node.child_by_field_name(field)
    return None if child is None else _text(child, source)


def _c_declarator_name(node: Any, source: bytes) -> str | None:
    """The name inside a C/C++ declarator (``*make(void)`` -> ``make``)."""
    seen = 0
    while node is not None and seen < 16:
        if node.type in (
            "identifier",
            "field_identifier",
            "qualified_identifier",
            "operator_name",
            "destructor_name",
        ):
            return _text(node, source)
        inner = node.child_by_field_name("declarator")
        if inner is None:
            named = [
                c
                for c in node.named_children
                if "declarator" in c.type or "identifier" in c.type
            ]
            inner = named[0] if named else None
        node = inner
        seen += 1
    return None


def _header(node: Any, body_field: str, source: bytes) -> str:
    """The text of ``node`` up to its body, whitespace collapsed (``impl Display for Point``)."""
    body = node.child_by_field_name(body_field)
    end = body.start_byte if body is not None else node.end_byte
    header = " ".join(source[node.start_byte : end].decode("utf-8", "replace").split())
    return header[:200]


def _go_receiver(node: Any, source: bytes) -> str | None:
    receiver = node.child_by_field_name("receiver")
    if receiver is None:
        return None
    for param in receiver.named_children:
        kind = param.child_by_field_name("type")
        if kind is None:
            continue
        name = _text(kind, source).lstrip("*")
        return name.split("[", 1)[0] or None
    return None


def _js_name(node: Any, source: bytes) -> str | None:
    kind = node.type
    if kind == "variable_declarator":
        value = node.child_by_field_name("value")
        if value is None or value.type not in _FUNCTION_VALUES:
            return None
        return _field_text(node, "name", source)
    if kind == "assignment_expression":
        value = node.child_by_field_name("right")
        if value is None or value.type not in _FUNCTION_VALUES:
            return None
        return _field_text(node, "left", source)
    if kind == "pair":
        value = node.child_by_field_name("value")
        if value is None or value.type not in _FUNCTION_VALUES:
            return None
        key = _field_text(node, "key", source)
        return None if key is None else key.strip("\"'`")
    return _field_text(node, "name", source)


def _unquoted(node: Any, source: bytes) -> str:
    return _text(node, source).strip("\"'")


def _yaml_name(node: Any, source: bytes) -> str | None:
    """A mapping's key when its value is a block (a nested mapping or a list)."""
    value = node.child_by_field_name("value")
    key = node.child_by_field_name("key")
    if key is None or value is None or value.type != "block_node":
        return None
    return _unquoted(key, source)


def _toml_name(node: Any, source: bytes) -> str | None:
    """A table's key: ``tool.ruff`` for ``[tool.ruff]``, ``bin`` for ``[[bin]]``."""
    for child in node.named_children:
        if child.type in ("bare_key", "dotted_key", "quoted_key"):
            return _text(child, source)
    return None


def _before_block(node: Any, source: bytes) -> str:
    """The text of ``node`` up to its body (a CSS at-rule's prelude)."""
    bodies = ("block", "keyframe_block_list")
    end = next((c.start_byte for c in node.children if c.type in bodies), node.end_byte)
    return " ".join(source[node.start_byte : end].decode("utf-8", "replace").split())[:200]


def _css_name(node: Any, source: bytes) -> str | None:
    """A rule's selectors (``.cart, .cart > li``), an at-rule's prelude (``@media ...``)."""
    if node.type == "rule_set":
        selectors = next((c for c in node.named_children if c.type == "selectors"), None)
        return None if selectors is None else _text(selectors, source)[:200]
    return _before_block(node, source) or None


def _hcl_name(node: Any, source: bytes) -> str | None:
    """A block's type and labels: ``resource.aws_s3_bucket.logs``."""
    parts = []
    for child in node.named_children:
        if child.type == "identifier":
            parts.append(_text(child, source))
        elif child.type == "string_lit":
            parts.append(_unquoted(child, source))
        elif child.type == "block_start":
            break
    return ".".join(parts) or None


def _make_name(node: Any, source: bytes) -> str | None:
    """A rule's targets (``build test``; not a special target such as ``.PHONY``), a
    ``define``'s variable."""
    if node.type == "define_directive":
        return _field_text(node, "name", source)
    targets = next((c for c in node.named_children if c.type == "targets"), None)
    if targets is None:
        return None
    name = _text(targets, source)
    return None if name.startswith(".") else name


def _rust_name(node: Any, source: bytes) -> str | None:
    """An impl block's header (``impl Display for Point``), else the item's name."""
    if node.type == "impl_item":
        return _header(node, "body", source)
    return _field_text(node, "name", source)


def _go_name(node: Any, source: bytes) -> str | None:
    """A method's receiver type and name (``Cart.Add``), else the name."""
    name = _field_text(node, "name", source)
    if node.type == "method_declaration" and name is not None:
        receiver = _go_receiver(node, source)
        return f"{receiver}.{name}" if receiver else name
    return name


def _c_name(node: Any, source: bytes) -> str | None:
    """A function's declarator name; ``struct point`` for a struct, union or enum with a
    body (a forward declaration names nothing)."""
    if node.type == "function_definition":
        return _c_declarator_name(node.child_by_field_name("declarator"), source)
    name = _field_text(node, "name", source)
    if node.type in ("struct_specifier", "union_specifier", "enum_specifier"):
        if name is None or node.child_by_field_name("body") is None:
            return None
        return f"{node.type.split('_')[0]} {name}"
    return name


def _cpp_name(node: Any, source: bytes) -> str | None:
    """As C's, but a struct, union or enum is named as a class is (``shop::Price``): in
    C++ its name is a type name, not a tag."""
    name = _c_name(node, source)
    if name is not None and node.type in ("struct_specifier", "union_specifier", "enum_specifier"):
        return name.split(" ", 1)[1]
    return name


def _plain_name(node: Any, source: bytes) -> str | None:
    return _field_text(node, "name", source)


#: how each language names a definition (the others: its ``name`` field)
_NAMERS: dict[str, Callable[[Any, bytes], str | None]] = {
    "javascript": _js_name,
    "typescript": _js_name,
    "tsx": _js_name,
    "rust": _rust_name,
    "go": _go_name,
    "c": _c_name,
    "cpp": _cpp_name,
    "yaml": _yaml_name,
    "toml": _toml_name,
    "css": _css_name,
    "hcl": _hcl_name,
    "make": _make_name,
}


def symbol_name(spec: LanguageSpec, node: Any, source: bytes) -> str | None:
    """The name a definition node contributes to a symbol path (None: not a named definition)."""
    if node.type not in spec.definitions:
        return None
    return _NAMERS.get(spec.name, _plain_name)(node, source)
