"""The code policy (issue #38): the chunker contract in every language, locators, stability."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from chunker_contract import (
    HEAVY_TEXTS,
    LONG_TEXTS,
    TEXTS,
    ChunkerContract,
    check_tiles,
    exact_tokens,
)
from hypothesis import given, settings
from hypothesis import strategies as st

import rechunk
from rechunk import ConfigError, RecursiveChunker
from rechunk.chunkers import CodeChunker, code_chunker_for, language_for
from rechunk.chunkers.code_languages import LANGUAGES
from rechunk.chunking.tokens import resolve_tokenizer

pytest.importorskip("tree_sitter")

CODE_PAIRS = Path(__file__).resolve().parents[2] / "shared" / "revisions" / "code-dev.jsonl"

# One small, real-looking file per language: definitions, comments, attributes, nesting.
SNIPPETS: dict[str, str] = {
    "python": '''"""Shopping carts."""
import os
from decimal import Decimal


# A cart holds items.
class Cart:
    """A shopping cart."""

    def __init__(self):
        self.items = []

    @property
    def size(self):
        return len(self.items)

    def add(self, item, quantity=1):
        for _ in range(quantity):
            self.items.append(item)
        return self

    class Item:
        def price(self):
            return Decimal("1.00")


def total(cart):
    return sum(item.price() for item in cart.items)
''',
    "javascript": '''// utils
const path = require("path");

/** Add two numbers. */
function add(a, b) {
  return a + b;
}

class Cart {
  constructor() { this.items = []; }
  add(item) {
    this.items.push(item);
    return this;
  }
}

const mul = (a, b) => {
  return a * b;
};
module.exports.sub = function (a, b) { return a - b; };
''',
    "typescript": '''import { readFileSync } from "fs";

export interface Shape {
  area(): number;
}

export class Square implements Shape {
  constructor(private side: number) {}
  area(): number {
    return this.side * this.side;
  }
}

type Id = string;
export function twice<T>(x: T): T[] {
  return [x, x];
}
''',
    "tsx": '''import React from "react";

export function App(props: { name: string }) {
  const [count, setCount] = React.useState(0);
  return <div className="app" onClick={() => setCount(count + 1)}>{props.name}</div>;
}

const Button = ({ label }: { label: string }) => <button>{label}</button>;
export default App;
''',
    "go": '''package cart

import (
	"fmt"
)

// Cart holds items.
type Cart struct {
	items []string
}

// Add adds an item.
func (c *Cart) Add(item string) {
	c.items = append(c.items, item)
}

func main() {
	fmt.Println("hi")
}
''',
    "rust": '''use std::fmt;

/// A point.
#[derive(Debug)]
struct Point {
    x: i32,
    y: i32,
}

impl fmt::Display for Point {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        write!(f, "({}, {})", self.x, self.y)
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn it_works() {
        assert_eq!(2 + 2, 4);
    }
}
''',
    "java": '''package shop;

import java.util.List;

/** A cart. */
public class Cart {
  private List<String> items;

  @Override
  public String toString() {
    return items.toString();
  }

  static class Item {
    int price() {
      return 1;
    }
  }
}
''',
    "c": '''#include <stdio.h>

/* A point. */
struct point {
  int x;
  int y;
};

static int add(int a, int b) {
  return a + b;
}

int *make(void)
{
  return NULL;
}
''',
    "cpp": '''#include <vector>

namespace geo {
class Point {
 public:
  int x() const { return x_; }
 private:
  int x_;
};

int Point::y() const {
  return 0;
}

template <typename T>
T twice(T v) {
  return v + v;
}
}  // namespace geo
''',
    "csharp": r'''// Shopping carts.
using System;
using System.Collections.Generic;

namespace Shop
{
    /// <summary>A cart holds items.</summary>
    public class Cart : Base
    {
        private readonly List<Item> items = new();

        [Obsolete]
        public Cart Add(Item item)
        {
            items.Add(item);
            return this;
        }

        public int Count => items.Count;

        public struct Line { public int Qty; }
    }

    public interface IPriced { int Price(); }

    public enum Size { Small, Large }
}
''',
    "kotlin": r'''// Shopping carts.
package shop

import java.math.BigDecimal

/** A cart holds items. */
class Cart(private val owner: String) : Base() {
    private val items = mutableListOf<Item>()

    @Synchronized
    fun add(item: Item): Cart {
        items.add(item)
        return this
    }

    companion object {
        fun empty() = Cart("nobody")
    }
}

object Registry {
    fun find(id: Int): Cart? = null
}

fun total(cart: Cart): Int = cart.size
''',
    "swift": r'''// Shopping carts.
import Foundation

/// A cart holds items.
class Cart: Base {
    private var items: [Item] = []

    @discardableResult
    func add(_ item: Item) -> Cart {
        items.append(item)
        return self
    }

    init() { super.init() }
}

struct Item { let price: Int }

extension Cart: CustomStringConvertible {
    var description: String { "cart" }
}

protocol Priced { func price() -> Int }

func total(_ cart: Cart) -> Int { return 0 }
''',
    "scala": r'''// Shopping carts.
package shop

import scala.collection.mutable

/** A cart holds items. */
class Cart(owner: String) extends Base {
  private val items = mutable.ListBuffer[Item]()

  @inline
  def add(item: Item): Cart = {
    items += item
    this
  }
}

object Cart {
  def empty: Cart = new Cart("nobody")
}

trait Priced { def price: Int }

case class Item(price: Int)
''',
    "php": r'''<?php
// Shopping carts.
namespace Shop;

use Shop\Item;

/** A cart holds items. */
class Cart extends Base implements Countable
{
    private array $items = [];

    #[Pure]
    public function add(Item $item): self
    {
        $this->items[] = $item;
        return $this;
    }

    public function count(): int
    {
        return count($this->items);
    }
}

interface Priced { public function price(): int; }

function total(Cart $cart): int
{
    return $cart->count();
}
''',
    "ruby": r'''# Shopping carts.
require "bigdecimal"
require_relative "item"

module Shop
  # A cart holds items.
  class Cart < Base
    attr_reader :items

    def initialize
      @items = []
    end

    # Add one item.
    def add(item)
      @items << item
      self
    end

    def self.empty
      new
    end
  end
end

def total(cart)
  cart.items.sum(&:price)
end
''',
    "lua": r'''-- Shopping carts.
local Item = require("item")

local Cart = {}
Cart.__index = Cart

-- Make an empty cart.
function Cart.new()
  return setmetatable({ items = {} }, Cart)
end

function Cart:add(item)
  table.insert(self.items, item)
  return self
end

local function total(cart)
  return #cart.items
end

return Cart
''',
    "bash": r'''#!/usr/bin/env bash
# Back up a folder.
set -euo pipefail

source ./lib.sh

# Copy one folder.
backup() {
  local from="$1"
  cp -r "$from" "$TARGET"
}

function prune {
  find "$TARGET" -mtime +30 -delete
}

backup "$HOME/docs"
prune
''',
    "yaml": r'''# Shop API, served by the cart service.
openapi: 3.1.0
info:
  title: Shop
  version: 1.0.0

paths:
  /carts/{id}:
    # Read one cart.
    get:
      summary: Read a cart
      responses:
        "200":
          description: The cart
  /items:
    post:
      summary: Add an item
tags:
  - name: carts
  - name: items
---
kind: Service
metadata:
  name: shop
''',
    "toml": r'''# Shop's build settings.
title = "shop"

[tool.ruff]
line-length = 100
# Which rules.
select = ["E", "F"]

[[bin]]
name = "cart"
path = "src/cart.rs"

[dependencies.serde]
version = "1"
features = ["derive"]
''',
    "css": r'''/* The shop's pages. */
@charset "utf-8";
@import url("base.css");

/* The cart. */
.cart, .cart > li {
  margin: 0;
}

@media (max-width: 600px) {
  .cart {
    padding: 1px;
  }
}

@keyframes pulse {
  from { opacity: 1; }
  to { opacity: 0.5; }
}
''',
    "hcl": r'''# The shop's storage.
terraform {
  required_version = ">= 1.5"
}

# Logs, kept a year.
resource "aws_s3_bucket" "logs" {
  bucket = "shop-logs"
  tags = {
    team = "shop"
  }
  lifecycle {
    prevent_destroy = true
  }
}

variable "region" {
  default = "eu-west-1"
}
''',
    "dockerfile": r'''# syntax=docker/dockerfile:1
# The shop's image.
ARG PY=3.11
FROM python:${PY} AS build
WORKDIR /src
COPY . .
RUN pip install --no-cache-dir . \
    && rm -rf /root/.cache

FROM python:${PY}-slim
COPY --from=build /usr/local /usr/local
CMD ["shop"]
''',
    "make": '''# Build and test the shop.
include config.mk
PY ?= python3

# Build the wheel.
build: src/shop.py
\t$(PY) -m build

.PHONY: test
test: build
\t$(PY) -m pytest

define HELP
make build
endef
''',
}


def _code_pairs(language: str) -> list[dict[str, Any]]:
    if not CODE_PAIRS.exists():
        pytest.skip(f"real code revision pairs not available: {CODE_PAIRS} is absent")
    with CODE_PAIRS.open(encoding="utf-8") as fh:
        pairs = [json.loads(line) for line in fh if line.strip()]
    return [p for p in pairs if p["lang"] == language]


class CodeContract(ChunkerContract):
    """The contract every chunker passes, for the code policy of one language."""

    language = "python"
    window = 422
    #: hypothesis examples for the generic-text properties (the full profile for Python)
    examples = 60

    def make(self, **kwargs: Any) -> CodeChunker:
        return CodeChunker(self.language, **kwargs)

    def small_params(self) -> dict[str, int]:
        return {"min_tokens": 20, "max_tokens": 40}

    def small_limit(self) -> int:
        return 40

    def test_real_revisions_tile_and_fit(self) -> None:  # type: ignore[override]
        """The contract's real texts for a code policy: source files of its language
        (``code-dev.jsonl``; skipped when absent), and a snippet written here."""
        pairs = _code_pairs(self.language) if self.language in _DEV_LANGUAGES else []
        texts = [p[v] for p in pairs for v in ("old", "new")] + [SNIPPETS[self.language]]
        chunker = self.make()
        small = self.make(min_tokens=30, max_tokens=60)
        counter = resolve_tokenizer(None)
        for text in texts:
            for c, limit in ((chunker, self.window), (small, 60)):
                chunks = c.chunk(text)
                check_tiles(text, chunks)
                exact = counter.count_many([x.text for x in chunks])
                assert [x.tokens for x in chunks] == exact
                assert max(exact) <= limit

    def test_snippet_tiles_at_every_size(self) -> None:
        text = SNIPPETS[self.language]
        for low, high in ((1, 1), (2, 5), (5, 12), (10, 40), (40, 80)):
            chunks = self.make(min_tokens=low, max_tokens=high).chunk(text)
            check_tiles(text, chunks)
            assert all(c.tokens <= high for c in chunks)

    def test_policy_id_names_language_and_grammar(self) -> None:
        chunker = self.make()
        kind, language, version, digest = chunker.policy_id.rsplit("-", 3)
        assert (kind, language) == ("code", self.language)
        assert version == chunker.grammar_version and len(digest) == 12
        described = chunker.describe()
        assert described["language"] == self.language
        assert described["grammar"].startswith(LANGUAGES[self.language].package)

    # the generic-text properties, with fewer examples in all but one language

    @given(TEXTS)
    def test_tiles_and_is_deterministic(self, text: str) -> None:
        ChunkerContract.test_tiles_and_is_deterministic.hypothesis.inner_test(self, text)  # type: ignore[attr-defined]

    @given(LONG_TEXTS)
    def test_long_text_respects_sizes_exactly(self, text: str) -> None:
        ChunkerContract.test_long_text_respects_sizes_exactly.hypothesis.inner_test(self, text)  # type: ignore[attr-defined]

    @given(HEAVY_TEXTS, st.sampled_from(["heavy", "utf8"]))
    def test_several_tokens_per_character_keep_the_bound(self, text: str, count: Any) -> None:
        from chunker_contract import heavy_tokens, utf8_tokens

        fn = heavy_tokens if count == "heavy" else utf8_tokens
        ChunkerContract.test_several_tokens_per_character_keep_the_bound.hypothesis.inner_test(  # type: ignore[attr-defined]
            self, text, fn
        )


_DEV_LANGUAGES = ("python", "javascript", "go", "rust", "java", "c")


def _contract_for(language: str, examples: int) -> type[CodeContract]:
    few = settings(max_examples=examples)
    body: dict[str, Any] = {"language": language}
    for name in (
        "test_tiles_and_is_deterministic",
        "test_long_text_respects_sizes_exactly",
        "test_several_tokens_per_character_keep_the_bound",
    ):
        inner = getattr(CodeContract, name).hypothesis.inner_test
        strategies = {
            "test_tiles_and_is_deterministic": (TEXTS,),
            "test_long_text_respects_sizes_exactly": (LONG_TEXTS,),
            "test_several_tokens_per_character_keep_the_bound": (
                HEAVY_TEXTS,
                st.sampled_from(["heavy", "utf8"]),
            ),
        }[name]
        body[name] = few(given(*strategies)(inner))
    return type(f"TestCode{language.capitalize()}", (CodeContract,), body)


class TestCodePython(CodeContract):
    language = "python"


TestCodeJavascript = _contract_for("javascript", 12)
TestCodeTypescript = _contract_for("typescript", 12)
TestCodeTsx = _contract_for("tsx", 12)
TestCodeGo = _contract_for("go", 12)
TestCodeRust = _contract_for("rust", 12)
TestCodeJava = _contract_for("java", 12)
TestCodeC = _contract_for("c", 12)
TestCodeCpp = _contract_for("cpp", 12)
TestCodeCsharp = _contract_for("csharp", 12)
TestCodeKotlin = _contract_for("kotlin", 12)
TestCodeSwift = _contract_for("swift", 12)
TestCodeScala = _contract_for("scala", 12)
TestCodePhp = _contract_for("php", 12)
TestCodeRuby = _contract_for("ruby", 12)
TestCodeLua = _contract_for("lua", 12)
TestCodeBash = _contract_for("bash", 12)
TestCodeYaml = _contract_for("yaml", 12)
TestCodeToml = _contract_for("toml", 12)
TestCodeCss = _contract_for("css", 12)
TestCodeHcl = _contract_for("hcl", 12)
TestCodeDockerfile = _contract_for("dockerfile", 12)
TestCodeMake = _contract_for("make", 12)


# -- code-like text -------------------------------------------------------------------------

_NAMES = st.sampled_from(["a", "b", "cart", "item", "total", "x1", "valueOf", "é", "中文"])


@st.composite
def c_like(draw: st.DrawFn) -> str:
    """Brace-language text: functions with nested blocks, comments, blank lines, noise."""
    out = []
    for _ in range(draw(st.integers(0, 12))):
        name = draw(_NAMES)
        if draw(st.booleans()):
            out.append(f"// {draw(_NAMES)} {draw(_NAMES)}")
        out.append(f"int {name}(int {draw(_NAMES)}) {{")
        depth = 1
        for _ in range(draw(st.integers(0, 10))):
            kind = draw(st.sampled_from(["stmt", "open", "close", "blank", "junk"]))
            pad = "  " * depth
            if kind == "stmt":
                out.append(f"{pad}{draw(_NAMES)} = {draw(_NAMES)} + {draw(st.integers(0, 99))};")
            elif kind == "open":
                out.append(f"{pad}if ({draw(_NAMES)}) {{")
                depth += 1
            elif kind == "close" and depth > 1:
                depth -= 1
                out.append("  " * depth + "}")
            elif kind == "blank":
                out.append("")
            else:
                out.append(draw(st.sampled_from(["}", "{", "/*", "*/", '"', "#define", "😀" * 5])))
        while depth > 0:
            depth -= 1
            out.append("  " * depth + "}")
        out.append("")
    return "\n".join(out)


@st.composite
def python_like(draw: st.DrawFn) -> str:
    out = []
    for _ in range(draw(st.integers(0, 10))):
        if draw(st.booleans()):
            out.append(f"@{draw(_NAMES)}")
        out.append(f"def {draw(_NAMES)}({draw(_NAMES)}):")
        indent = 1
        for _ in range(draw(st.integers(0, 8))):
            kind = draw(st.sampled_from(["stmt", "open", "dedent", "blank", "doc"]))
            pad = "    " * indent
            if kind == "stmt":
                out.append(f"{pad}{draw(_NAMES)} = {draw(_NAMES)}({draw(st.integers(0, 9))})")
            elif kind == "open":
                out.append(f"{pad}if {draw(_NAMES)}:")
                indent += 1
                out.append("    " * indent + "pass")
            elif kind == "dedent" and indent > 1:
                indent -= 1
            elif kind == "blank":
                out.append("")
            else:
                out.append(f'{pad}"""{draw(_NAMES)}\n\n{pad}{draw(_NAMES)} {draw(_NAMES)}"""')
        out.append("")
    return "\n".join(out)


CODE_TEXTS = st.tuples(
    st.sampled_from(["c", "cpp", "java", "javascript", "go", "rust", "typescript"]), c_like()
) | st.tuples(st.just("python"), python_like())


@settings(max_examples=40)
@given(CODE_TEXTS, st.sampled_from([(5, 10), (10, 30), (30, 60)]))
def test_code_like_text_tiles_deterministically_within_max(
    case: tuple[str, str], sizes: tuple[int, int]
) -> None:
    language, text = case
    low, high = sizes
    chunker = CodeChunker(language, min_tokens=low, max_tokens=high)
    chunks = chunker.chunk(text)
    check_tiles(text, chunks)
    assert CodeChunker(language, min_tokens=low, max_tokens=high).chunk(text) == chunks
    for c in chunks:
        assert c.tokens == exact_tokens(c.text) <= high


# -- where cuts fall ------------------------------------------------------------------------


def _functions(rng: random.Random, count: int, language: str = "python") -> list[str]:
    words = ["alpha", "beta", "gamma", "delta", "total", "items", "price", "count", "name"]
    out = []
    for i in range(count):
        body = [
            f"    {rng.choice(words)}_{j} = {rng.choice(words)}({rng.randrange(100)}, {rng.choice(words)})"
            for j in range(rng.randrange(2, 9))
        ]
        doc = f'    """{rng.choice(words).capitalize()} the {rng.choice(words)}."""'
        out.append("\n".join([f"def function_{i}(x, y):", doc, *body, "    return x", ""]))
    return out


def test_definitions_are_not_cut_when_they_fit() -> None:
    text = "\n\n".join(_functions(random.Random(3), 40))
    chunker = CodeChunker("python", min_tokens=60, max_tokens=150)
    chunks = chunker.chunk(text)
    check_tiles(text, chunks)
    for c in chunks:
        assert c.text.startswith("def function_"), c.text[:40]  # every chunk starts a function
        assert c.text.endswith("return x")  # and ends one


def test_inserting_a_function_leaves_the_chunks_after_it() -> None:
    """An inserted function regroups only nearby definitions: every chunk from the second
    one after the insertion on is byte-identical with an old chunk (greedy packing would
    shift all of them)."""
    for seed in range(6):
        rng = random.Random(seed)
        functions = _functions(rng, 60)
        at = rng.randrange(10, 50)
        old = "\n\n".join(functions)
        inserted = _functions(random.Random(100 + seed), 1)[0].replace("function_0", "inserted")
        new = "\n\n".join([*functions[:at], inserted, *functions[at:]])
        chunker = CodeChunker("python", min_tokens=60, max_tokens=150)
        old_texts = {c.text for c in chunker.chunk(old)}
        after = new.index("def inserted") + len(inserted)
        later = [c for c in chunker.chunk(new) if c.start >= after]
        assert len(later) > 10
        assert all(c.text in old_texts for c in later[1:]), seed
        # and before it: all but the chunk it joins (or the one before) are kept
        before = [c for c in chunker.chunk(new) if c.end <= new.index("def inserted")]
        assert sum(c.text not in old_texts for c in before) <= 1, seed


def test_a_large_definition_is_split_at_its_statements() -> None:
    body = "\n".join(f"    value_{i} = compute(value_{i - 1}, {i})" for i in range(1, 120))
    text = f"def big(value_0):\n{body}\n    return value_119\n"
    chunks = CodeChunker("python", min_tokens=40, max_tokens=100).chunk(text)
    check_tiles(text, chunks)
    assert len(chunks) >= 10
    for c in chunks[1:]:
        assert c.text.startswith("value_") or c.text.startswith("return")  # a statement start


def test_an_item_too_large_for_one_chunk_starts_one() -> None:
    """A long function starts a chunk whatever precedes it, so an edit in the functions
    above it (a line added, one removed) leaves every chunk of the long one as it was."""
    body = "\n".join(f"    value_{i} = compute(value_{i - 1}, {i})" for i in range(1, 60))
    big = f"def big(value_0):\n{body}\n    return value_59\n"
    for seed in range(6):
        rng = random.Random(seed)
        small = _functions(rng, 12)
        at = rng.randrange(2, 10)
        old = "\n\n".join([*small[:at], big, *small[at:]])
        chunker = CodeChunker("python", min_tokens=60, max_tokens=150)
        chunks = chunker.chunk(old)
        check_tiles(old, chunks)
        start = old.index("def big")
        assert start in [c.start for c in chunks], seed
        olds = {c.text for c in chunks}
        edited = small[at - 1].replace("    return x", "    y = x\n    return y")
        trimmed = small[at - 1].replace(small[at - 1].splitlines()[2] + "\n", "", 1)
        for line in (edited, trimmed):
            new = "\n\n".join([*small[: at - 1], line, big, *small[at:]])
            lo, hi = new.index("def big"), new.index("def big") + len(big)
            inside = [c for c in chunker.chunk(new) if lo <= c.start and c.end <= hi]
            assert len(inside) >= 2 and all(c.text in olds for c in inside), seed


def test_a_key_line_is_not_left_alone_before_a_member_too_large_to_join_it() -> None:
    """`jobs:` and `tests:` open a mapping too large for one chunk whose first member is
    small and whose second fits only alone: the cut falls after the small member, not
    after each key line (which left chunks of two tokens in version 3)."""
    oses = "".join(f"          - os-{i}\n" for i in range(8))
    steps = "".join(f"      - run: make check-{i}\n" for i in range(13))
    workflow = (
        "name: checks\non: [push, pull_request]\n\npermissions:\n  contents: read\n"
        "  checks: write\n  statuses: write\n\njobs:\n  tests:\n    strategy:\n"
        f"      matrix:\n        os:\n{oses}    steps:\n{steps}"
    )
    chunker = CodeChunker("yaml", min_tokens=60, max_tokens=100)
    chunks = chunker.chunk(workflow)
    check_tiles(workflow, chunks)
    assert [c.text.split(":")[0] for c in chunks] == ["name", "jobs", "steps"]
    assert min(c.tokens for c in chunks) >= 60 // 4


def test_comments_and_attributes_stay_with_their_item() -> None:
    rust = SNIPPETS["rust"]
    chunks = CodeChunker("rust", min_tokens=10, max_tokens=40).chunk(rust)
    check_tiles(rust, chunks)
    for c in chunks:
        assert not c.text.endswith("#[derive(Debug)]")
        assert not c.text.endswith("/// A point.")
        assert not c.text.endswith("#[cfg(test)]")
    go = SNIPPETS["go"]
    chunks = CodeChunker("go", min_tokens=10, max_tokens=40).chunk(go)
    assert any(c.text.startswith("// Add adds an item.\nfunc (c *Cart) Add") for c in chunks)


def test_files_that_do_not_parse_still_chunk() -> None:
    broken = "def f(:\n    return ]\n\nclass {\n" * 50 + "))))\n" + "x = 'unterminated\n" * 30
    chunks = CodeChunker("python", min_tokens=20, max_tokens=60).chunk(broken)
    check_tiles(broken, chunks)
    assert all(c.tokens <= 60 for c in chunks)
    js = SNIPPETS["python"]  # Python read as JavaScript: an error tree, still chunks
    check_tiles(js, CodeChunker("javascript", min_tokens=5, max_tokens=20).chunk(js))


# -- the head of a file ------------------------------------------------------------------------

LICENCE = "Copyright 2026 The Cart Authors. Licensed under the MIT licence; see LICENSE."
# Per language: (licence comment, prologue, one function given its index): chunks must
# start where the prologue starts and where the first function starts.
HEADS: dict[str, tuple[str, str, Any]] = {
    "python": (
        f"# {LICENCE}\n",
        '"""Carts."""\nfrom __future__ import annotations\n\nimport os\nfrom decimal import Decimal\n',
        lambda i: f"def total_{i}(cart):\n    return sum(x.price({i}) for x in cart.items)\n",
    ),
    "javascript": (
        f"/*!\n * {LICENCE}\n */\n",
        "'use strict';\n\nconst path = require('path');\nvar debug = require('debug')('cart');\n",
        lambda i: f"function total{i}(cart) {{\n  return cart.items.length + {i};\n}}\n",
    ),
    "typescript": (
        f"// {LICENCE}\n",
        'import { join } from "path";\nimport type { Item } from "./item";\n',
        lambda i: f"export function total{i}(items: Item[]): number {{\n  return items.length + {i};\n}}\n",
    ),
    "go": (
        f"// {LICENCE}\n",
        'package cart\n\nimport (\n\t"fmt"\n\t"os"\n)\n',
        lambda i: f"func Total{i}(c *Cart) int {{\n\treturn len(c.Items) + {i}\n}}\n",
    ),
    "rust": (
        f"// {LICENCE}\n",
        "#![allow(dead_code)]\nextern crate alloc;\nuse std::fmt;\nuse std::collections::HashMap;\n",
        lambda i: f"fn total_{i}(items: &[u32]) -> u32 {{\n    items.iter().sum::<u32>() + {i}\n}}\n",
    ),
    "java": (
        f"/*\n * {LICENCE}\n */\n",
        "package shop.cart;\n\nimport java.util.List;\nimport java.util.Map;\n",
        lambda i: f"class Total{i} {{\n  int total(List<Integer> items) {{ return items.size() + {i}; }}\n}}\n",
    ),
    "c": (
        f"/* {LICENCE} */\n",
        "#ifndef CART_H_\n#define CART_H_\n\n#include <stdio.h>\n#include <stdlib.h>\n",
        lambda i: f"int total_{i}(const int *items, int n) {{\n  return n + {i};\n}}\n",
    ),
    "cpp": (
        f"// {LICENCE}\n",
        "#include <vector>\n#include <string>\nusing std::vector;\n",
        lambda i: f"int total_{i}(const vector<int>& items) {{\n  return items.size() + {i};\n}}\n",
    ),
    "csharp": (
        f"// {LICENCE}\n",
        "using System;\nusing System.Collections.Generic;\n",
        lambda i: f"static class Total{i}\n{{\n    static int Of(List<int> items) => items.Count + {i};\n}}\n",
    ),
    "kotlin": (
        f"/*\n * {LICENCE}\n */\n",
        "package shop.cart\n\nimport java.math.BigDecimal\nimport java.util.UUID\n",
        lambda i: f"fun total{i}(items: List<Int>): Int {{\n    return items.size + {i}\n}}\n",
    ),
    "swift": (
        f"// {LICENCE}\n",
        "import Foundation\nimport Dispatch\nimport Combine\nimport os.log\n@testable import ShopCore\n",
        lambda i: f"func total{i}(_ items: [Int]) -> Int {{\n    return items.count + {i}\n}}\n",
    ),
    "scala": (
        f"/*\n * {LICENCE}\n */\n",
        "package shop.cart\n\nimport scala.collection.mutable\nimport scala.util.Try\n",
        lambda i: f"object Total{i} {{\n  def of(items: Seq[Int]): Int = items.size + {i}\n}}\n",
    ),
    "php": (
        f"<?php\n// {LICENCE}\n",
        "namespace Shop\\Cart;\n\nuse Shop\\Item;\nrequire_once 'helpers.php';\n",
        lambda i: f"function total{i}(array $items): int\n{{\n    return count($items) + {i};\n}}\n",
    ),
    "ruby": (
        f"# {LICENCE}\n",
        'require "bigdecimal"\nrequire_relative "item"\n',
        lambda i: f"def total_{i}(items)\n  items.size + {i}\nend\n",
    ),
    "lua": (
        f"-- {LICENCE}\n",
        'local json = require("json")\nlocal item = require("item")\n',
        lambda i: f"local function total{i}(items)\n  return #items + {i}\nend\n",
    ),
    "bash": (
        f"# {LICENCE}\n",
        "set -euo pipefail\nsource ./lib.sh\n",
        lambda i: f"total_{i}() {{\n  echo $(( $# + {i} ))\n}}\n",
    ),
    "css": (
        f"/* {LICENCE} */\n",
        '@charset "utf-8";\n@import url("base.css");\n@import url("grid.css");\n',
        lambda i: f".total-{i} {{\n  margin: {i}px;\n  padding: {i}px;\n}}\n",
    ),
    "make": (
        f"# {LICENCE}\n",
        "include config.mk\ninclude rules.mk\n",
        lambda i: f"total_{i}: src/total_{i}.c\n\t$(CC) -o $@ $< -DADD={i}\n",
    ),
}
# Languages with no prologue: (licence comment, one item given its index).
LEADS: dict[str, tuple[str, Any]] = {
    "yaml": (f"# {LICENCE}\n", lambda i: f"total_{i}:\n  kind: sum\n  over: items\n  add: {i}\n"),
    "toml": (f"# {LICENCE}\n", lambda i: f'[total_{i}]\nkind = "sum"\nadd = {i}\n'),
    "hcl": (f"# {LICENCE}\n", lambda i: f'resource "shop_total" "t{i}" {{\n  add = {i}\n}}\n'),
    "dockerfile": (f"# {LICENCE}\n", lambda i: f'LABEL shop.total_{i}="{i}"\nRUN echo {i}\n'),
}


def _head_file(language: str, functions: int, prologue: str | None = None) -> str:
    licence, default, function = HEADS[language]
    body = "\n".join(function(i) for i in range(functions))
    tail = "\n#endif\n" if language == "c" else ""
    return f"{licence}\n{default if prologue is None else prologue}\n{body}{tail}"


@pytest.mark.parametrize("language", sorted(HEADS))
def test_the_head_of_a_file_is_cut_apart_from_its_code(language: str) -> None:
    """The licence, the prologue (imports, package, module doc) and the code start chunks
    of their own: each changes for its own reasons, and grouped with the first function
    an added import would re-embed that function too."""
    assert set(HEADS) | set(LEADS) == set(LANGUAGES) - {"tsx"}
    _, prologue, function = HEADS[language]
    text = _head_file(language, 30)
    chunker = CodeChunker(language, min_tokens=40, max_tokens=80)
    chunks = chunker.chunk(text)
    check_tiles(text, chunks)
    starts = [c.start for c in chunks]
    assert text.index(prologue) in starts
    assert text.index(function(0)) in starts
    # an import added (or the year bumped) re-embeds that piece and nothing else
    olds = {c.text for c in chunks}
    line = [li for li in prologue.splitlines() if li.strip() not in ("", ")")][-1]
    edited = text.replace(line, f"{line}\n{line}", 1)
    bumped = text.replace("2026", "2026-2027", 1)
    for new in (edited, bumped):
        fresh = [c for c in chunker.chunk(new) if c.text not in olds]
        assert len(fresh) == 1, [c.text[:40] for c in fresh]


@pytest.mark.parametrize("language", sorted(LEADS))
def test_the_licence_is_cut_apart_in_a_file_with_no_prologue(language: str) -> None:
    """A configuration file's leading comment starts no chunk with its first item: a year
    bumped re-embeds that comment alone."""
    licence, item = LEADS[language]
    text = licence + "\n" + "\n".join(item(i) for i in range(40))
    chunker = CodeChunker(language, min_tokens=40, max_tokens=80)
    chunks = chunker.chunk(text)
    check_tiles(text, chunks)
    assert text.index(item(0)) in [c.start for c in chunks]
    olds = {c.text for c in chunks}
    bumped = text.replace("2026", "2026-2027", 1)
    fresh = [c for c in chunker.chunk(bumped) if c.text not in olds]
    assert len(fresh) == 1 and fresh[0].text.startswith(licence[:2]), fresh


def test_a_file_that_fits_in_one_chunk_stays_whole_but_for_its_notice() -> None:
    """A small file is one chunk; a copyright or licence notice at its head is a chunk
    of its own (a year bumped each January re-embeds the notice, not the file)."""
    texts = [(language, licence, licence + item(0)) for language, (licence, item) in LEADS.items()]
    texts += [(language, HEADS[language][0], _head_file(language, 1)) for language in HEADS]
    for language, licence, text in texts:
        chunker = CodeChunker(language, min_tokens=40, max_tokens=200)
        spans = [(c.start, c.end) for c in chunker.chunk(text)]
        after = text[text.index(licence) + len(licence) :]
        notice = len(text) - len(after.lstrip("\n"))  # blank lines go with the notice
        assert spans == [(0, notice), (notice, len(text))], (language, spans)
        remark = text.replace(LICENCE, "Totals of the carts, one per kind.")
        assert [c.text for c in chunker.chunk(remark)] == [rechunk.embedding_input(remark)]


def test_a_tiny_piece_of_the_head_joins_the_next() -> None:
    """No chunk of a lone `package cart`: a piece under a quarter of min_tokens joins the
    piece after it."""
    text = _head_file("go", 30, prologue="package cart\n")
    chunks = CodeChunker("go", min_tokens=60, max_tokens=100).chunk(text)
    check_tiles(text, chunks)
    assert chunks[0].text.startswith("// Copyright")
    assert chunks[1].text.startswith("package cart\n\nfunc Total0")


@pytest.mark.parametrize("language", sorted(HEADS))
def test_a_short_notice_is_cut_apart_whatever_its_size(language: str) -> None:
    """A copyright or licence notice smaller than the floor still starts no chunk with the
    imports: a year bumped every January re-embeds the notice alone."""
    licence = HEADS[language][0]
    text = _head_file(language, 60)
    chunker = CodeChunker(language, min_tokens=200, max_tokens=300)
    assert chunker._counter.count_many([licence])[0] < chunker._floor  # below the floor
    chunks = chunker.chunk(text)
    check_tiles(text, chunks)
    olds = {c.text for c in chunks}
    fresh = [c for c in chunker.chunk(text.replace("2026", "2027", 1)) if c.text not in olds]
    assert len(fresh) == 1 and len(fresh[0].text) < len(text) // 20, fresh


def test_a_notice_right_above_the_module_docstring_is_cut_apart_too() -> None:
    """With no blank line a comment belongs to the item below it, but a notice does not
    take the docstring and imports with it."""
    licence, prologue, function = HEADS["python"]
    text = licence + prologue + "\n" + "\n".join(function(i) for i in range(60))
    chunker = CodeChunker("python", min_tokens=200, max_tokens=300)
    chunks = chunker.chunk(text)
    assert [c.start for c in chunks[:2]] == [0, len(licence)]


@pytest.mark.parametrize("attached", [False, True])
def test_the_comment_of_the_code_below_a_notice_stays_with_that_code(attached: bool) -> None:
    """A package comment (or the doc comment of the first definition) below the notice is
    the code's, whether a blank line parts it from the notice or not."""
    notice = "// SPDX-License-Identifier: Apache-2.0\n// Copyright 2026 The Cart Authors.\n"
    package = "// Package cart keeps the lines of a cart.\npackage cart\n"
    functions = "\n".join(
        f"// Total{i} sums the cart.\nfunc Total{i}(items []int) int {{\n\treturn len(items) + {i}\n}}\n"
        for i in range(40)
    )
    text = notice + ("" if attached else "\n") + package + "\n" + functions
    chunks = CodeChunker("go", min_tokens=200, max_tokens=300).chunk(text)
    check_tiles(text, chunks)
    assert chunks[1].start == text.index(package)
    # a blank line between the package comment and `package`: still not the notice's
    parted = text.replace("cart.\npackage", "cart.\n\npackage")
    chunks = CodeChunker("go", min_tokens=200, max_tokens=300).chunk(parted)
    assert chunks[1].start == parted.index("// Package cart")


def test_a_notice_below_a_shebang_is_cut_off_too() -> None:
    licence, prologue, function = HEADS["python"]
    head = "#!/usr/bin/env python3\n\n" + licence
    text = head + prologue + "\n" + "\n".join(function(i) for i in range(60))
    chunks = CodeChunker("python", min_tokens=200, max_tokens=300).chunk(text)
    assert [c.start for c in chunks[:2]] == [0, len(head)]


@pytest.mark.parametrize(
    ("language", "doc", "definition"),
    [
        ("go", "// CheckLicense reports whether the license key is valid.\n", "func CheckLicense"),
        ("javascript", "/** Returns the licence text of the package. */\n", "export function"),
    ],
)
def test_a_definitions_doc_that_speaks_of_a_licence_stays_with_it(
    language: str, doc: str, definition: str
) -> None:
    """A comment right above a definition is its doc, not a notice, whatever it says."""
    body = {
        "go": "func CheckLicense(key string) bool {\n\treturn len(key) == 12\n}\n",
        "javascript": "export function licenceText() {\n  return 'MIT';\n}\n",
    }[language]
    others = {
        "go": lambda i: f"func Other{i}(n int) int {{\n\treturn n + {i}\n}}\n",
        "javascript": lambda i: f"export function other{i}(n) {{\n  return n + {i};\n}}\n",
    }[language]
    head = "package licence\n\n" if language == "go" else ""
    text = head + doc + body + "\n" + "\n".join(others(i) for i in range(40))
    chunks = CodeChunker(language, min_tokens=200, max_tokens=300).chunk(text)
    assert all(c.start != text.index(definition) for c in chunks), [c.start for c in chunks]


@pytest.mark.parametrize(
    "lead", ["#!/usr/bin/env python3\n", "# Totals of carts, one per kind.\n"]
)
def test_a_short_leading_comment_that_is_no_notice_joins_the_prologue(lead: str) -> None:
    """A shebang or a one-line remark changes no more often than the imports below it: no
    chunk of a few tokens for it."""
    _, prologue, function = HEADS["python"]
    text = lead + "\n" + prologue + "\n" + "\n".join(function(i) for i in range(60))
    chunks = CodeChunker("python", min_tokens=200, max_tokens=300).chunk(text)
    check_tiles(text, chunks)
    assert chunks[0].text.startswith(lead) and prologue in chunks[0].text


def test_comments_after_the_imports_go_with_the_code_below_them() -> None:
    licence, prologue, function = HEADS["python"]
    doc = "# Totals, one per\n# kind of cart.\n\n"
    text = f"{licence}\n{prologue}\n{doc}" + "\n".join(function(i) for i in range(30))
    chunks = CodeChunker("python", min_tokens=60, max_tokens=100).chunk(text)
    assert text.index(doc) in [c.start for c in chunks]


# -- locator -------------------------------------------------------------------------------


def _where(language: str, text: str, needle: str, end_needle: str | None = None) -> dict[str, Any]:
    chunker = CodeChunker(language)
    where = chunker.locator(text)
    start = text.index(needle)
    end = text.index(end_needle, start) + len(end_needle) if end_needle else start + len(needle)
    return where(start, end)


BRACES_OWN_LINE = {
    "csharp": "namespace Demo\n{\n    /// <summary>Adds.</summary>\n    public static class Calc\n"
    "    {\n        public static int Add(int a, int b) => a + b;\n    }\n}\n",
    "java": "public class A\n{\n    public void f()\n    {\n    }\n}\n",
    "cpp": "namespace ns\n{\nvoid f()\n{\n}\n}\n",
}


@pytest.mark.parametrize(
    ("language", "expected"),
    [
        ("csharp", ["Demo", "Demo", "Demo.Calc", "Demo.Calc", "Demo.Calc", "Demo.Calc.Add"]),
        ("java", ["A", "A", "A.f", "A.f", "A.f", "A"]),
        ("cpp", ["ns", "ns", "ns::f", "ns::f", "ns::f", "ns"]),
    ],
)
def test_a_brace_on_its_own_line_belongs_to_what_it_opens(
    language: str, expected: list[str]
) -> None:
    """C#'s usual style: the ``{`` under ``namespace Demo`` is the namespace's, not its
    first member's (it was ``Demo.Calc``, and the class's ``{`` ``Demo.Calc.Add``)."""
    text = BRACES_OWN_LINE[language]
    where = CodeChunker(language).locator(text)
    symbols, offset = [], 0
    for line in text.splitlines(keepends=True)[: len(expected)]:
        first = offset + len(line) - len(line.lstrip())
        symbols.append(where(first, offset + len(line.rstrip())).get("symbol"))
        offset += len(line)
    assert symbols == expected


def test_locator_symbol_paths() -> None:
    py = SNIPPETS["python"]
    assert _where("python", py, "def add")["symbol"] == "Cart.add"
    assert _where("python", py, "@property")["symbol"] == "Cart.size"  # decorator belongs to it
    assert _where("python", py, "def price")["symbol"] == "Cart.Item.price"
    assert _where("python", py, "return Decimal")["symbol"] == "Cart.Item.price"
    assert _where("python", py, "# A cart holds")["symbol"] == "Cart"  # the comment above it
    assert "symbol" not in _where("python", py, "import os")
    rust = SNIPPETS["rust"]
    assert _where("rust", rust, "impl fmt::Display")["symbol"] == "impl fmt::Display for Point"
    assert _where("rust", rust, "write!")["symbol"] == "impl fmt::Display for Point::fmt"
    assert _where("rust", rust, "/// A point.")["symbol"] == "Point"
    assert _where("rust", rust, "#[test]")["symbol"] == "tests::it_works"
    assert _where("go", SNIPPETS["go"], "c.items = append")["symbol"] == "Cart.Add"
    assert _where("java", SNIPPETS["java"], "@Override")["symbol"] == "Cart.toString"
    assert _where("java", SNIPPETS["java"], "return 1")["symbol"] == "Cart.Item.price"
    js = SNIPPETS["javascript"]
    assert _where("javascript", js, "this.items.push")["symbol"] == "Cart.add"
    assert _where("javascript", js, "return a * b")["symbol"] == "mul"
    assert _where("javascript", js, "module.exports.sub")["symbol"] == "module.exports.sub"
    assert _where("typescript", SNIPPETS["typescript"], "return this.side")["symbol"] == "Square.area"
    assert _where("typescript", SNIPPETS["typescript"], "export function twice")["symbol"] == "twice"
    decorated = "class Catalog {\n  @logged\n  search(q: string) { return q; }\n}\n"
    assert _where("typescript", decorated, "@logged")["symbol"] == "Catalog.search"
    assert _where("tsx", SNIPPETS["tsx"], "const [count")["symbol"] == "App"
    assert _where("c", SNIPPETS["c"], "return NULL")["symbol"] == "make"
    assert _where("c", SNIPPETS["c"], "int x;")["symbol"] == "struct point"
    cpp = SNIPPETS["cpp"]
    assert _where("cpp", cpp, "return 0")["symbol"] == "geo::Point::y"
    assert _where("cpp", cpp, "template <typename T>")["symbol"] == "geo::twice"
    assert _where("cpp", cpp, "int x() const")["symbol"] == "geo::Point::x"
    priced = "namespace shop {\nstruct Price {\n  Price operator+(Price o) const;\n};\n}\n"
    assert _where("cpp", priced, "Price operator+")["symbol"] == "shop::Price"  # not struct Price
    assert _where("csharp", SNIPPETS["csharp"], "items.Add(item)")["symbol"] == "Shop.Cart.Add"
    assert _where("csharp", SNIPPETS["csharp"], "[Obsolete]")["symbol"] == "Shop.Cart.Add"
    assert _where("kotlin", SNIPPETS["kotlin"], "items.add(item)")["symbol"] == "Cart.add"
    assert _where("kotlin", SNIPPETS["kotlin"], "fun find")["symbol"] == "Registry.find"
    assert _where("swift", SNIPPETS["swift"], "items.append")["symbol"] == "Cart.add"
    assert _where("swift", SNIPPETS["swift"], "/// A cart")["symbol"] == "Cart"
    assert _where("scala", SNIPPETS["scala"], "items += item")["symbol"] == "Cart.add"
    assert _where("php", SNIPPETS["php"], "return count")["symbol"] == "Cart::count"
    assert _where("php", SNIPPETS["php"], "#[Pure]")["symbol"] == "Cart::add"
    assert _where("ruby", SNIPPETS["ruby"], "@items << item")["symbol"] == "Shop::Cart::add"
    assert _where("ruby", SNIPPETS["ruby"], "# Add one item.")["symbol"] == "Shop::Cart::add"
    assert _where("lua", SNIPPETS["lua"], "table.insert")["symbol"] == "Cart:add"
    assert _where("lua", SNIPPETS["lua"], "-- Make an empty")["symbol"] == "Cart.new"
    assert _where("bash", SNIPPETS["bash"], "cp -r")["symbol"] == "backup"
    assert "symbol" not in _where("bash", SNIPPETS["bash"], "set -euo")
    yaml = SNIPPETS["yaml"]
    assert _where("yaml", yaml, "summary: Read")["symbol"] == "paths./carts/{id}.get"
    assert _where("yaml", yaml, "# Read one cart.")["symbol"] == "paths./carts/{id}.get"
    assert _where("yaml", yaml, "description: The cart")["symbol"] == "paths./carts/{id}.get.responses.200"
    assert _where("yaml", yaml, "name: shop")["symbol"] == "metadata"
    for top in ("# Shop API", "openapi:", "kind: Service"):
        assert "symbol" not in _where("yaml", yaml, top)
    toml = SNIPPETS["toml"]
    assert _where("toml", toml, "# Which rules.")["symbol"] == "tool.ruff"
    assert _where("toml", toml, 'path = "src')["symbol"] == "bin"
    assert _where("toml", toml, "features")["symbol"] == "dependencies.serde"
    assert "symbol" not in _where("toml", toml, "title =")
    css = SNIPPETS["css"]
    assert _where("css", css, "/* The cart. */")["symbol"] == ".cart, .cart > li"
    assert _where("css", css, "padding: 1px")["symbol"] == "@media (max-width: 600px) .cart"
    assert _where("css", css, "to { opacity")["symbol"] == "@keyframes pulse"
    hcl = SNIPPETS["hcl"]
    assert _where("hcl", hcl, "# Logs, kept")["symbol"] == "resource.aws_s3_bucket.logs"
    assert _where("hcl", hcl, "prevent_destroy")["symbol"] == "resource.aws_s3_bucket.logs.lifecycle"
    assert _where("hcl", hcl, "default =")["symbol"] == "variable.region"
    make = SNIPPETS["make"]
    assert _where("make", make, "# Build the wheel.")["symbol"] == "build"
    assert _where("make", make, "-m pytest")["symbol"] == "test"
    assert _where("make", make, "make build")["symbol"] == "HELP"
    assert "symbol" not in _where("make", make, ".PHONY")  # a special target names nothing
    assert "symbol" not in _where("dockerfile", SNIPPETS["dockerfile"], "FROM python")


# Code above a definition inside a container (an include guard, a function body, an
# initializer block) is the container's, not the definition's.
GUARDED_HEADER = """/* Readings of a thermometer, kept in a ring. */
#ifndef THERMO_H
#define THERMO_H

#include <stddef.h>

struct reading {
    long at;
    double kelvin;
};

size_t thermo_append(struct reading *ring, size_t size, struct reading r);

#endif
"""
NESTED_JS = """function throttle(wait, fn) {
  let last = 0;
  return (...args) => {
    const now = Date.now();
    const fire = () => fn(...args);
    if (now - last >= wait) {
      last = now;
      fire();
    }
  };
}
"""
JAVA_BLOCK = """class Units {
  static final java.util.Map<String, Double> METRES = new java.util.HashMap<>();

  static
  {
    METRES.put("ft", 0.3048);
  }

  /** Metres in one unit. */
  static double of(String unit) {
    return METRES.get(unit);
  }
}
"""


EACH_METHOD_JS = """methods.forEach(function(method) {
  Router.prototype[method] = function(path) {
    return this.route(method, path);
  };
});
"""


def test_locator_gives_a_container_s_own_code_to_the_container() -> None:
    # the call's own first line is not the definition's, though no item starts there
    assert "symbol" not in _where("javascript", EACH_METHOD_JS, "methods.forEach")
    assert _where("javascript", EACH_METHOD_JS, "return this")["symbol"] == "Router.prototype[method]"
    assert "symbol" not in _where("c", GUARDED_HEADER, "/* Readings")
    assert "symbol" not in _where("c", GUARDED_HEADER, "#include <stddef.h>")
    assert _where("c", GUARDED_HEADER, "double kelvin")["symbol"] == "struct reading"
    assert _where("javascript", NESTED_JS, "return (...args)")["symbol"] == "throttle"
    assert _where("javascript", NESTED_JS, "const fire")["symbol"] == "throttle.fire"
    assert _where("java", JAVA_BLOCK, "METRES.put")["symbol"] == "Units"
    assert _where("java", JAVA_BLOCK, "/** Metres in one unit")["symbol"] == "Units.of"


def test_locator_lines_and_language() -> None:
    py = SNIPPETS["python"]
    where = CodeChunker("python").locator(py)
    start = py.index("    def add")  # leading spaces: the span's first line is still the def's
    end = py.index("return self") + len("return self\n\n")  # trailing blank line not counted
    first = py[: py.index("def add")].count("\n") + 1
    assert where(start, end) == {
        "language": "python",
        "symbol": "Cart.add",
        "lines": [first, first + 3],
    }
    chunker = CodeChunker("go", min_tokens=5, max_tokens=30)
    go = SNIPPETS["go"]
    where = chunker.locator(go)
    seen = []
    for c in chunker.chunk(go):
        loc = where(c.start, c.end)
        lines = go.splitlines()[loc["lines"][0] - 1 : loc["lines"][1]]
        assert c.text in embedding_text(lines)
        assert c.text.splitlines()[0] in lines[0] and c.text.splitlines()[-1] in lines[-1]
        seen.append(loc.get("symbol"))
    assert "Cart.Add" in seen and "main" in seen


def embedding_text(lines: list[str]) -> str:
    return rechunk.embedding_input("\n".join(lines))


# -- languages, fallback, policy -----------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "language"),
    [
        ("a/b.py", "python"),
        ("x.js", "javascript"),
        ("x.mjs", "javascript"),
        ("x.cjs", "javascript"),
        ("x.jsx", "javascript"),
        ("x.ts", "typescript"),
        ("X.TSX", "tsx"),
        ("main.go", "go"),
        ("lib.rs", "rust"),
        ("A.java", "java"),
        ("uv.c", "c"),
        ("uv.h", "c"),
        ("a.cc", "cpp"),
        ("a.cpp", "cpp"),
        ("a.cxx", "cpp"),
        ("a.hpp", "cpp"),
        ("a.hh", "cpp"),
        ("Cart.cs", "csharp"),
        ("Cart.kt", "kotlin"),
        ("build.gradle.kts", "kotlin"),
        ("Cart.swift", "swift"),
        ("Cart.scala", "scala"),
        ("cart.php", "php"),
        ("cart.rb", "ruby"),
        ("cart.lua", "lua"),
        ("backup.sh", "bash"),
        ("openapi.yaml", "yaml"),
        ("ci.YML", "yaml"),
        ("pyproject.toml", "toml"),
        ("site.css", "css"),
        ("main.tf", "hcl"),
        ("prod.tfvars", "hcl"),
        ("schema.sql", None),  # SQL is chunked by the recursive policy
        ("Dockerfile", "dockerfile"),
        ("deploy/Dockerfile.prod", "dockerfile"),
        ("api.dockerfile", "dockerfile"),
        ("Containerfile", "dockerfile"),
        ("Makefile", "make"),
        ("GNUmakefile", "make"),
        ("rules.mk", "make"),
        ("README.md", None),
        ("Makefile.am", None),
        ("a.pl", None),
    ],
)
def test_language_for(path: str, language: str | None) -> None:
    assert language_for(path) == language


@pytest.mark.parametrize(
    ("text", "language"),
    [
        (GUARDED_HEADER, "c"),
        ('#ifdef __cplusplus\nextern "C" {\n#endif\nint f(void);\n', "c"),
        ("#include <stdio.h>\n#include <sys/types.h>\n", "c"),
        ("#include <vector>\nint total(const std::vector<int>& xs);\n", "cpp"),
        ("template <typename T>\nT twice(T x) { return x + x; }\n", "cpp"),
        ("namespace geo {\nint area();\n}\n", "cpp"),
        ("class Shelf {\n public:\n  int jars;\n};\n", "cpp"),
        ("struct Jar : public Box {\n};\n", "cpp"),
        ("using Count = unsigned long;\n", "cpp"),
        ("/* a class is a kind of struct: template<T> */\nint f(void);\n", "c"),
    ],
)
def test_a_header_is_cpp_when_it_has_a_line_only_cpp_has(text: str, language: str) -> None:
    assert language_for("inc/x.h", text) == language
    assert language_for("x.c", text) == "c"  # only a header is read for it
    assert language_for("x.hpp", text) == "cpp"


def test_every_language_has_its_grammar_wheel() -> None:
    import importlib.metadata

    for name, spec in LANGUAGES.items():
        chunker = CodeChunker(name)
        assert chunker.grammar_version == importlib.metadata.version(spec.package)


def test_unknown_language_is_a_config_error_and_falls_back() -> None:
    with pytest.raises(ConfigError, match="no code grammar"):
        CodeChunker("cobol")
    chunker, reason = code_chunker_for("notes/a.pl", max_tokens=100, min_tokens=40)
    assert isinstance(chunker, RecursiveChunker) and chunker.target_tokens == 70
    assert reason is not None and "recursive" in reason and "a.pl" in reason
    chunker, reason = code_chunker_for("src/lib.rs")
    assert isinstance(chunker, CodeChunker) and chunker.language == "rust" and reason is None
    chunker, reason = code_chunker_for("py")
    assert isinstance(chunker, CodeChunker) and chunker.language == "python"
    # the names other tools give languages (tree-sitter's, LangChain's) are taken
    for name, language in (("c_sharp", "csharp"), ("c#", "csharp"), ("shell", "bash")):
        assert code_chunker_for(name)[0].language == language  # type: ignore[attr-defined]
    with pytest.raises(ConfigError):
        code_chunker_for("a.py", min_tokens=500, max_tokens=100)


def test_a_missing_grammar_wheel_falls_back_and_says_so() -> None:
    """With the Go grammar wheel unimportable, Go files go to the recursive policy."""
    script = (
        "import sys; sys.modules['tree_sitter_go'] = None\n"
        "from rechunk.chunkers import code_chunker_for, CodeChunker\n"
        "from rechunk import MissingDependencyError\n"
        "chunker, reason = code_chunker_for('main.go')\n"
        "print(type(chunker).__name__, reason)\n"
        "try:\n    CodeChunker('go')\nexcept MissingDependencyError as e:\n    print('raised', e)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=True
    ).stdout
    assert out.startswith("RecursiveChunker tree-sitter-go is not installed")
    assert "raised tree-sitter-go is not installed" in out and "rechunk[code]" in out


class _Embedder:
    """The attributes policy_for reads of an embedder (MiniLM's window and tokenizer)."""

    model_id = "test/minilm-window"
    max_input_tokens = 256
    special_tokens = 2
    tokenizer = None


def test_policy_for_sizes_the_code_policy_for_the_window() -> None:
    chunker = rechunk.policy_for(_Embedder(), "code", language="python")  # type: ignore[arg-type]
    assert isinstance(chunker, CodeChunker)
    assert chunker.params == {"min_tokens": 125, "max_tokens": 209, "hard_max_tokens": 254}
    assert rechunk.policy_for(_Embedder(), "code", language="go", max_tokens=150).max_tokens == 150  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="language="):
        rechunk.policy_for(_Embedder(), "code")  # type: ignore[arg-type]


def test_code_policy_for_sizes_the_code_policy_and_its_fallback_for_the_window() -> None:
    """What the sync gives a source file: the code policy as policy_for sizes it, or for a
    language without a grammar the recursive policy halfway between its sizes, and why."""
    from rechunk.chunking.policy import code_policy_for

    chunker, reason = code_policy_for(_Embedder(), "src/cart.py")  # type: ignore[arg-type]
    assert reason is None and isinstance(chunker, CodeChunker)
    assert chunker.policy_id == rechunk.policy_for(_Embedder(), "code", language="python").policy_id  # type: ignore[arg-type]
    chunker, reason = code_policy_for(_Embedder(), "sql")  # type: ignore[arg-type]
    assert isinstance(chunker, RecursiveChunker) and reason is not None and "'sql'" in reason
    assert chunker.params == {"target_tokens": 167, "hard_max_tokens": 254}
    chunker, _ = code_policy_for(_Embedder(), "db/schema.sql", max_tokens=180, min_tokens=100)  # type: ignore[arg-type]
    assert chunker.params["target_tokens"] == 140


@pytest.mark.parametrize("language", ["python", "javascript", "go", "rust", "java", "c"])
def test_the_fallback_s_chunks_are_about_the_code_policy_s_size(language: str) -> None:
    """A file of a language without a grammar is cut about as finely as code with one:
    on the real revisions of each language, the recursive fallback's median chunk is within
    15% of the code policy's (with max_tokens as its target it was 21-30% larger at the
    code benchmark's sizes: `python benchmarks/code.py --fallback`)."""
    import statistics

    texts = [p["old"] for p in _code_pairs(language)]
    counter = resolve_tokenizer(None)
    code = CodeChunker(language, min_tokens=125, max_tokens=209, tokenizer=counter)
    fallback, _ = code_chunker_for("query.sql", min_tokens=125, max_tokens=209, tokenizer=counter)
    ours = statistics.median(c.tokens for t in texts for c in code.chunk(t))
    theirs = statistics.median(c.tokens for t in texts for c in fallback.chunk(t))
    assert 0.85 <= theirs / ours <= 1.15, (theirs, ours)


def test_chunker_pickles_and_importing_rechunk_loads_no_grammar() -> None:
    import pickle

    chunker = CodeChunker("rust", min_tokens=10, max_tokens=30)
    copy = pickle.loads(pickle.dumps(chunker))
    assert copy.policy_id == chunker.policy_id
    assert copy.chunk(SNIPPETS["rust"]) == chunker.chunk(SNIPPETS["rust"])
    out = subprocess.run(
        [sys.executable, "-c", "import sys, rechunk; print(sorted(m for m in sys.modules if 'tree_sitter' in m))"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout
    assert out.strip() == "[]"


_OFFLINE = '''
import socket, sys

def refuse(*args, **kwargs):
    raise AssertionError("network access attempted: %r" % (args,))

class NoSocket(socket.socket):
    def __init__(self, *args, **kwargs):
        refuse(*args)

socket.socket = NoSocket
socket.create_connection = refuse
socket.getaddrinfo = refuse

from rechunk.chunkers import CodeChunker
from rechunk.chunkers.code_languages import LANGUAGES
import json
snippets = json.loads(sys.stdin.read())
for name in LANGUAGES:
    chunker = CodeChunker(name, min_tokens=5, max_tokens=30)
    chunks = chunker.chunk(snippets[name])
    where = chunker.locator(snippets[name])
    assert chunks and where(chunks[0].start, chunks[0].end)["language"] == name
    print(name, chunker.policy_id, len(chunks))
'''


def test_grammars_parse_with_the_network_off() -> None:
    """Every grammar ships in its wheel: parsing in a process whose sockets all raise works."""
    env = {
        k: v
        for k, v in os.environ.items()
        if "proxy" not in k.lower()
    }
    env.update({"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "NO_PROXY": "*"})
    done = subprocess.run(
        [sys.executable, "-c", _OFFLINE],
        input=json.dumps(SNIPPETS),
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    lines = done.stdout.splitlines()
    assert [line.split()[0] for line in lines] == list(LANGUAGES)
    assert all(line.split()[1].startswith(f"code-{line.split()[0]}-") for line in lines)


@pytest.mark.parametrize("language", ["python", "javascript", "go", "rust", "java", "c", "cpp"])
def test_the_locator_finds_the_innermost_definition_as_a_scan_would(language: str) -> None:
    """The locator's bisection over swept segments gives, at every offset, what a scan of
    every definition gives (the deepest holding it, then the latest to start, then the
    first listed): the scan made a file of 30,000 functions take minutes."""
    from rechunk.chunkers.code import _definitions, _parse_structure

    chunker = CodeChunker(language)
    text = SNIPPETS[language] * 3
    definitions = _definitions(chunker._spec, _parse_structure(chunker._spec, text))
    assert len(definitions) > 3
    where = chunker.locator(text)

    def scanned(at: int) -> str | None:
        best, symbol = None, None
        for start, end, depth, path in definitions:
            if start <= at < end and (best is None or (depth, start) > best):
                best, symbol = (depth, start), path
        return symbol

    for at in range(len(text)):
        if not text[at].isspace():
            assert where(at, at + 1).get("symbol") == scanned(at), at


def test_a_yaml_list_item_s_first_line_is_its_list_s() -> None:
    """A GitHub Actions step: the key with a block value below ``- name: Build`` (``run:
    |``) took that line as if it were attached above it, so a chunk starting at the step
    was cited as ``steps.run``; the line is the step's own, in ``steps``."""
    text = "steps:\n  - name: Build\n    run: |\n      make\n  - name: Test\n    with:\n      x: 1\n"
    where = CodeChunker("yaml").locator(text)
    symbols = {}
    for probe in ("- name: Build", "run: |", "- name: Test", "with:", "x: 1"):
        start = text.index(probe)
        symbols[probe] = where(start, start + len(probe)).get("symbol")
    assert symbols == {
        "- name: Build": "steps",
        "run: |": "steps.run",
        "- name: Test": "steps",
        "with:": "steps.with",
        "x: 1": "steps.with",
    }


def test_code_chunker_for_tells_a_cpp_header_by_its_text() -> None:
    """``rechunk sync`` reads a ``.h`` holding C++ as C++; the API read every ``.h`` as C
    (it took no text)."""
    header = "namespace geo {\nclass Point {\n public:\n  int x;\n};\n}  // namespace geo\n"
    assert code_chunker_for("geo/point.h", text=header)[0].language == "cpp"
    assert code_chunker_for("geo/point.h")[0].language == "c"
    assert code_chunker_for("geo/point.h", text="int x;\n")[0].language == "c"


def test_a_deeply_nested_symbol_path_is_capped_keeping_the_innermost_names() -> None:
    """Functions nested 400 deep gave a symbol of thousands of characters in every
    payload; the path keeps the innermost names within 300 characters."""
    depth = 400
    text = "".join("    " * i + f"def level_{i}():\n" for i in range(depth))
    text += "    " * depth + "return 1\n"
    where = CodeChunker("python").locator(text)
    symbol = where(len(text) - 9, len(text))["symbol"]
    assert len(symbol) <= 300 and symbol.startswith("...")
    assert symbol.endswith(f"level_{depth - 2}.level_{depth - 1}")
    short = "def a():\n    def b():\n        return 1\n"
    assert CodeChunker("python").locator(short)(len(short) - 9, len(short))["symbol"] == "a.b"


def test_classic_mac_line_ends_are_read_as_lines() -> None:
    """A file whose lines end in CR alone: every chunk was cited as line 1, and cuts fell
    between words. It is chunked and located as the same file with LF would be, over the
    same spans of its own text."""
    lf = "def alpha():\n    return 1\n\n\ndef beta():\n    return 2\n" * 40
    cr = lf.replace("\n", "\r")
    chunker = CodeChunker("python", min_tokens=40, max_tokens=80)
    by_lf, by_cr = chunker.chunk(lf), chunker.chunk(cr)
    assert [(c.start, c.end, c.text, c.tokens) for c in by_cr] == [
        (c.start, c.end, c.text, c.tokens) for c in by_lf
    ]
    assert "".join(cr[c.start : c.end] for c in by_cr) == cr
    where_lf, where_cr = chunker.locator(lf), chunker.locator(cr)
    assert [where_cr(c.start, c.end) for c in by_cr] == [where_lf(c.start, c.end) for c in by_lf]
    assert where_cr(by_cr[-1].start, by_cr[-1].end)["lines"][1] == lf.count("\n")


@pytest.mark.parametrize("language", ["typescript", "python"])
def test_a_notice_cut_off_right_above_a_definition_is_cited_as_no_symbol(language: str) -> None:
    """A licence header with no blank line below it is attached to the class it sits on,
    and the notice cut makes it a chunk of its own: that chunk was cited as ``Cart``,
    though it says nothing of it. It is at top level; the next chunk is ``Cart``'s."""
    head = "Copyright (c) 2024 Acme Corp. All rights reserved.\nSPDX-License-Identifier: MIT\n"
    if language == "typescript":
        notice = "".join(f"// {line}\n" for line in head.splitlines())
        body = "export interface Cart { id: string }\n\n" + "".join(
            f"export function f{i}(a: number): number {{\n  const b = a * {i};\n"
            f"  return b + {i};\n}}\n\n"
            for i in range(12)
        )
    else:
        notice = "".join(f"# {line}\n" for line in head.splitlines())
        body = "class Cart:\n    id = ''\n\n\n" + "".join(
            f"def f{i}(a):\n    b = a * {i}\n    return b + {i}\n\n\n" for i in range(16)
        )
    text = notice + body
    chunker = CodeChunker(language, min_tokens=125, max_tokens=209)
    where = chunker.locator(text)
    first, second = chunker.chunk(text)[:2]
    assert first.end <= len(notice) and "symbol" not in where(first.start, first.end)
    assert where(second.start, second.end)["symbol"] == "Cart"
