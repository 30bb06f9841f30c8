#!/usr/bin/env python3
"""Fails on an import cycle between the files of one Rust crate or between the modules of the
Python package (`make check-cycles`, part of `make check`). Standard library only.

Rust, per crate root (`src/lib.rs`, `src/main.rs`, `src/bin/*.rs`; not `tests/`, `examples/`):
the files are the modules reached through `mod name;` from the root (every cargo feature on),
test code left out (any item under `#[cfg(test)]`: a
`mod tests { ... }` block, a `mod tests;` file, a test-only function). A file depends on another
when it names it: a `use crate::` / `super::` / `self::` / child-module path (brace groups
expanded), or such a path written inline in code (`crate::a::b(...)`, `super::X`). A path is
resolved to the longest module prefix that exists; a name imported into that module (a re-export,
`pub use x::Y` in `mod.rs` or the crate root) is followed to the file that defines it. A
re-export is not itself a dependency of the file that holds it (unless that file's code uses the
name), and the crate root is nobody's dependency: it is the crate's table of contents.

Python (`python/stokehold`): every `import` / `from ... import`, at the top of a module or inside a
function, and `importlib.import_module("literal")`; imports under `if TYPE_CHECKING:` are left out
(they never run). `from . import x` means module `x` when there is one, otherwise `__init__`.

Every strongly connected component of more than one file is reported with the edges of one cycle
through it (`file:line imports file`) and the other edges inside it. Exit status 1 if any, except
for crates named with `--pending` (a crate not yet untangled: its cycles are printed, not failed).
"""

from __future__ import annotations

import argparse
import ast
import re
import sys
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator, TextIO

# An edge: (from file, line, to file).
Edge = tuple[str, int, str]


# --------------------------------------------------------------------------------------------
# Rust: lexing
# --------------------------------------------------------------------------------------------


def blank_comments_and_literals(src: str) -> str:
    """`src` with comments, string and char literals replaced by spaces (newlines kept, so
    offsets and line numbers stay those of the file)."""
    out = list(src)
    i, n = 0, len(src)

    def blank(a: int, b: int) -> None:
        for k in range(a, b):
            if out[k] != "\n":
                out[k] = " "

    while i < n:
        c = src[i]
        if src.startswith("//", i):
            j = src.find("\n", i)
            j = n if j < 0 else j
            blank(i, j)
            i = j
        elif src.startswith("/*", i):
            depth, j = 1, i + 2
            while j < n and depth:
                if src.startswith("/*", j):
                    depth, j = depth + 1, j + 2
                elif src.startswith("*/", j):
                    depth, j = depth - 1, j + 2
                else:
                    j += 1
            blank(i, j)
            i = j
        elif (m := re.compile(r'b?r(#*)"').match(src, i)) and (i == 0 or not _ident(src[i - 1])):
            close = '"' + m.group(1)
            j = src.find(close, m.end())
            j = n if j < 0 else j + len(close)
            blank(i, j)
            i = j
        elif c == '"' or (c == "b" and src.startswith('b"', i) and (i == 0 or not _ident(src[i - 1]))):
            j = i + (2 if c == "b" else 1)
            while j < n and src[j] != '"':
                j += 2 if src[j] == "\\" else 1
            blank(i, j + 1)
            i = j + 1
        elif c == "'":
            # A char literal ('a', '\n', '\u{1F600}', b'x'), or a lifetime / label ('a, 'static).
            m = re.compile(r"'(\\(u\{[0-9a-fA-F]+\}|x[0-9a-fA-F]{2}|.)|[^\\'\n])'").match(src, i)
            if m:
                blank(i, m.end())
                i = m.end()
            else:
                i += 1
        else:
            i += 1
    return "".join(out)


def _ident(c: str) -> bool:
    return c.isalnum() or c == "_"


CFG_TEST = re.compile(r"#\s*\[\s*cfg\s*\(\s*(test|all\s*\(\s*test\b[^\]]*)\s*\)\s*\]")
ATTR = re.compile(r"\s*#\s*\[")


def item_end(code: str, start: int) -> int:
    """The offset just past the item that starts at `start` (its `;`, or its closing `}` and a
    `;` right after it)."""
    depth, i, n = 0, start, len(code)
    while i < n:
        c = code[i]
        if c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
            if depth == 0 and c == "}":
                j = i + 1
                while j < n and code[j] in " \t\r\n":
                    j += 1
                return j + 1 if j < n and code[j] == ";" else i + 1
        elif c == ";" and depth == 0:
            return i + 1
        i += 1
    return n


def blank_test_items(code: str) -> str:
    """`code` (already without comments and literals) with every item under `#[cfg(test)]`
    blanked out."""
    out = list(code)
    pos = 0
    while m := CFG_TEST.search(code, pos):
        j = m.end()
        while a := ATTR.match(code, j):  # further attributes on the same item
            j = item_end(code, a.end() - 1)
        end = item_end(code, j)
        for k in range(m.start(), end):
            if out[k] != "\n":
                out[k] = " "
        pos = end
    return "".join(out)


# --------------------------------------------------------------------------------------------
# Rust: use trees and paths
# --------------------------------------------------------------------------------------------

USE = re.compile(r"(?<![\w:])(pub(?:\s*\([^)]*\))?\s+)?use\s+([^;]*);")
MOD = re.compile(r"(?<![\w:])(?:pub(?:\s*\([^)]*\))?\s+)?mod\s+(\w+)\s*([;{])")
PATH = re.compile(r"(?<![\w:])((?:r#)?\w+(?:\s*::\s*(?:r#)?\w+)+)")
DEFINES = r"\b(?:fn|struct|enum|trait|type|const|static|union|mod|macro_rules!)\s+{}\b"


@dataclass
class UseItem:
    """One name a `use` binds: `segments` is the path as written (`["super", "x", "Y"]`), `name`
    the binding (None for a glob)."""

    segments: list[str]
    name: str | None
    line: int
    public: bool


def parse_use_tree(text: str) -> list[tuple[list[str], str | None]]:
    """`a::{b, c::{self, D as E}, f::*}` -> [(["a","b"], "b"), (["a","c"], "c"), (["a","c","D"], "E"),
    (["a","f"], None)]."""
    tokens = re.findall(r"::|[{},*]|\w+", text)
    pos = 0

    def tree(prefix: list[str]) -> list[tuple[list[str], str | None]]:
        nonlocal pos
        path = list(prefix)
        while pos < len(tokens):
            t = tokens[pos]
            if t == "::":
                pos += 1
            elif t == "{":
                pos += 1
                items: list[tuple[list[str], str | None]] = []
                while pos < len(tokens) and tokens[pos] != "}":
                    if tokens[pos] == ",":
                        pos += 1
                        continue
                    items += tree(path)
                pos += 1
                return items
            elif t == "*":
                pos += 1
                return [(path, None)]
            elif t in (",", "}"):
                break
            else:
                pos += 1
                if not (t == "self" and prefix and path == prefix):  # `{self, ..}`: the group's module
                    path.append(t)
                if pos + 1 < len(tokens) and tokens[pos] == "as":
                    alias = tokens[pos + 1]
                    pos += 2
                    return [(path, None if alias == "_" else alias)]
        if not path:
            return []
        return [(path, path[-1])]

    return tree([])


@dataclass
class RustFile:
    path: Path
    module: tuple[str, ...]
    code: str
    line_starts: list[int]
    use_spans: list[tuple[int, int]] = field(default_factory=list)
    # (start, end, module path) of each inline `mod x { ... }`: the scope of what sits inside it.
    inline: list[tuple[int, int, tuple[str, ...]]] = field(default_factory=list)

    def line(self, offset: int) -> int:
        lo, hi = 0, len(self.line_starts)
        while lo + 1 < hi:
            mid = (lo + hi) // 2
            if self.line_starts[mid] <= offset:
                lo = mid
            else:
                hi = mid
        return lo + 1

    def scope(self, offset: int) -> tuple[str, ...]:
        best = self.module
        for a, b, mod in self.inline:
            if a <= offset < b and len(mod) > len(best):
                best = mod
        return best


class RustCrate:
    """The module tree of one crate root and the file-level edges between its modules."""

    def __init__(self, root: Path, base: Path):
        self.base = base
        self.root = root
        self.modules: dict[tuple[str, ...], RustFile] = {}
        self.children: dict[tuple[str, ...], set[str]] = {}
        self.uses: dict[tuple[str, ...], list[UseItem]] = {}
        self.globs: dict[tuple[str, ...], list[UseItem]] = {}
        self._load(root, (), is_dir_owner=True)

    def rel(self, f: RustFile) -> str:
        return f.path.relative_to(self.base).as_posix()

    def _load(self, path: Path, module: tuple[str, ...], is_dir_owner: bool) -> None:
        src = path.read_text(encoding="utf-8")
        code = blank_test_items(blank_comments_and_literals(src))
        starts = [0] + [m.end() for m in re.finditer("\n", code)]
        f = RustFile(path, module, code, starts)
        self.modules[module] = f
        self.children.setdefault(module, set())
        subdir = path.parent if is_dir_owner else path.parent / path.stem
        # Inline `mod x { ... }` blocks: their own module paths, in the same file.
        stack: list[tuple[int, tuple[str, ...], Path]] = []
        for m in MOD.finditer(code):
            while stack and m.start() >= stack[-1][0]:
                stack.pop()
            parent = stack[-1][1] if stack else module
            pdir = stack[-1][2] if stack else subdir
            name = m.group(1)
            self.children.setdefault(parent, set()).add(name)
            if m.group(2) == "{":
                end = item_end(code, m.end() - 1)
                child = parent + (name,)
                f.inline.append((m.start(), end, child))
                self.modules[child] = f
                self.children.setdefault(child, set())
                stack.append((end, child, pdir / name))
            else:
                for cand, owner in ((pdir / f"{name}.rs", False), (pdir / name / "mod.rs", True)):
                    if cand.exists():
                        self._load(cand, parent + (name,), owner)
                        break
        for m in USE.finditer(code):
            f.use_spans.append((m.start(), m.end()))
            scope = f.scope(m.start())
            for segments, name in parse_use_tree(m.group(2)):
                if not segments or segments[0] == "":
                    continue
                item = UseItem(segments, name, f.line(m.start()), m.group(1) is not None)
                (self.uses if name else self.globs).setdefault(scope, []).append(item)

    # Resolution ---------------------------------------------------------------------------

    def absolute(
        self, scope: tuple[str, ...], segments: list[str], seen: frozenset[tuple[Any, str]] = frozenset()
    ) -> list[str] | None:
        """`segments` as written in module `scope` -> a path from the crate root, or None when it
        names another crate (std, a dependency) or a local item that is not a module."""
        head, rest = segments[0], segments[1:]
        if head == "crate":
            return list(rest)
        if head in ("self", "super"):
            path = list(scope)
            for s in segments:
                if s == "super":
                    path = path[:-1]
                elif s != "self":
                    break
            rest = [s for s in segments if s not in ("self", "super")]
            return path + rest
        if head in self.children.get(scope, ()):
            return list(scope) + segments
        key = (scope, head)
        if key in seen:
            return None
        for u in self.uses.get(scope, ()):
            if u.name == head and u.segments[0] != head:
                target = self.absolute(scope, u.segments, seen | {key})
                return None if target is None else target + rest
        return None

    def resolve(self, path: list[str], seen: frozenset[tuple[Any, str]] = frozenset()) -> RustFile:
        """The file that defines what absolute `path` names."""
        k = len(path)
        while k > 0 and tuple(path[:k]) not in self.modules:
            k -= 1
        module, rest = tuple(path[:k]), path[k:]
        f = self.modules[module]
        if not rest or (module, rest[0]) in seen:
            return f
        seen = seen | {(module, rest[0])}
        if self._defines(f, rest[0]):
            return f
        for u in self.uses.get(module, ()):
            if u.name == rest[0]:
                target = self.absolute(module, u.segments)
                return f if target is None else self.resolve(target + rest[1:], seen)
        for g in self.globs.get(module, ()):  # `pub use child::*`: the child that has the name
            target = self.absolute(module, g.segments)
            if target is None or tuple(target) not in self.modules:
                continue
            inner = self.resolve(target + rest, seen)
            if inner is not self.modules[tuple(target)] or self._defines(inner, rest[0]):
                return inner
        return f

    @staticmethod
    def _defines(f: RustFile, name: str) -> bool:
        return re.search(DEFINES.format(re.escape(name)), f.code) is not None

    def edges(self) -> list[Edge]:
        found: dict[tuple[str, str], int] = {}
        root = self.modules[()]

        def add(src: RustFile, line: int, dst: RustFile | None) -> None:
            if dst is None or dst is src or dst is root:
                return
            key = (self.rel(src), self.rel(dst))
            found[key] = min(found.get(key, line), line)

        for module, items in self.uses.items():
            f = self.modules[module]
            for u in items:
                target = self.absolute(module, u.segments)
                if target is None:
                    continue
                if tuple(target) in self.modules:
                    continue  # a module brought into scope: the paths through it count
                if u.public and not self._used(f, u.name or ""):
                    continue  # a re-export: what it names is the re-exporter's readers' dependency
                add(f, u.line, self.resolve(target))
            for g in self.globs.get(module, ()):
                target = self.absolute(module, g.segments)
                if target is not None and not g.public:
                    add(f, g.line, self.resolve(target))
        for module, f in self.modules.items():
            if f.module != module:
                continue  # an inline module: its file is scanned once, under its own module
            for m in PATH.finditer(f.code):
                if any(a <= m.start() < b for a, b in f.use_spans):
                    continue
                segments = [s.strip().removeprefix("r#") for s in m.group(1).split("::")]
                target = self.absolute(f.scope(m.start()), segments)
                if target is not None:
                    add(f, f.line(m.start()), self.resolve(target))
        return [(a, line, b) for (a, b), line in found.items()]

    def _used(self, f: RustFile, name: str) -> bool:
        for m in re.finditer(rf"\b{re.escape(name)}\b", f.code):
            if not any(a <= m.start() < b for a, b in f.use_spans):
                return True
        return False


def rust_roots(crate_dir: Path) -> list[Path]:
    src = crate_dir / "src"
    roots = [p for p in (src / "lib.rs", src / "main.rs") if p.exists()]
    if (src / "bin").is_dir():
        roots += sorted((src / "bin").glob("*.rs"))
    return roots


def rust_graphs(repo: Path) -> dict[str, list[Edge]]:
    """Package name -> the edges of all its crate roots (a lib and a bin never share files)."""
    graphs: dict[str, list[Edge]] = {}
    for manifest in sorted(repo.glob("crates/*/Cargo.toml")):
        m = re.search(r'^name\s*=\s*"([^"]+)"', manifest.read_text(encoding="utf-8"), re.M)
        name = m.group(1) if m else manifest.parent.name
        edges: list[Edge] = []
        for root in rust_roots(manifest.parent):
            edges += RustCrate(root, repo).edges()
        graphs[name] = edges
    return graphs


# --------------------------------------------------------------------------------------------
# Python
# --------------------------------------------------------------------------------------------


def python_graph(package: Path, base: Path) -> list[Edge]:
    """The import edges between the modules of `package` (a directory with `__init__.py`)."""
    name = package.name
    files: dict[str, Path] = {}  # dotted name inside the package -> its file
    for p in sorted(package.rglob("*")):
        # Extension modules (`_native.cpython-311-x86_64-linux-gnu.so`) and stubs are modules
        # too, with no imports of the package: `from . import _native` is not `__init__`.
        if p.suffix not in (".py", ".pyi", ".so", ".pyd"):
            continue
        rel = p.relative_to(package).parent.parts + (p.name.split(".")[0],)
        if "tests" in rel or rel[-1].startswith("test_") or "__pycache__" in rel:
            continue
        if p.suffix == ".py" or ".".join(rel) not in files:
            files[".".join(rel)] = p

    def module_of(dotted: str) -> str | None:
        """`a.b` (inside the package) -> the module that is, or the package's `__init__`."""
        if dotted in files:
            return dotted
        init = f"{dotted}.__init__" if dotted else "__init__"
        return init if init in files else None

    def target(base_pkg: str, mod: str | None, names: list[str]) -> list[str]:
        full = ".".join(p for p in (base_pkg, mod) if p)
        out = []
        for n in names:
            sub = module_of(f"{full}.{n}" if full else n)
            if sub is not None and n != "*":
                out.append(sub)
            else:
                here = module_of(full)
                if here is not None:
                    out.append(here)
        return out

    edges: list[Edge] = []
    for mod, path in files.items():
        if path.suffix != ".py":
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        pkg_parts: list[str] = mod.split(".")[:-1]  # the package this module is in (`__init__` is in its own)
        found: dict[str, int] = {}
        for node, line in _imports(tree):
            dsts: list[str] = []
            if isinstance(node, ast.Import):
                for alias in node.names:
                    parts = alias.name.split(".")
                    if parts[0] == name:
                        inner = parts[1:]
                        while inner and module_of(".".join(inner)) is None:
                            inner = inner[:-1]
                        dsts.append(module_of(".".join(inner)) or "__init__")
            elif isinstance(node, ast.ImportFrom):
                names = [a.name for a in node.names]
                if node.level:
                    up = node.level - 1
                    if up > len(pkg_parts):
                        continue
                    base_pkg = ".".join(pkg_parts[: len(pkg_parts) - up])
                    dsts = target(base_pkg, node.module, names)
                elif node.module and node.module.split(".")[0] == name:
                    dsts = target("", ".".join(node.module.split(".")[1:]) or None, names)
            elif isinstance(node, ast.Call):  # importlib.import_module("stokehold.x" | ".x")
                dsts = _import_module_target(node, name, pkg_parts, module_of)
            for d in dsts:
                if d != mod:
                    found[d] = min(found.get(d, line), line)
        src_rel = path.relative_to(base).as_posix()
        edges += [(src_rel, line, files[d].relative_to(base).as_posix()) for d, line in found.items()]
    return edges


def _imports(tree: ast.AST) -> Iterator[tuple[ast.AST, int]]:
    """Every import node with its line, leaving out the bodies of `if TYPE_CHECKING:`."""
    stack = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            stack.extend(node.orelse)
            continue
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node, node.lineno
        elif isinstance(node, ast.Call) and _is_import_module(node.func):
            yield node, node.lineno
        stack.extend(ast.iter_child_nodes(node))


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _is_import_module(func: ast.expr) -> bool:
    return (isinstance(func, ast.Attribute) and func.attr == "import_module") or (
        isinstance(func, ast.Name) and func.id in ("import_module", "__import__")
    )


def _import_module_target(
    node: ast.Call, name: str, pkg_parts: list[str], module_of: Callable[[str], str | None]
) -> list[str]:
    if not node.args or not isinstance(node.args[0], ast.Constant) or not isinstance(node.args[0].value, str):
        return []
    spec: str = node.args[0].value
    if spec.startswith("."):
        level = len(spec) - len(spec.lstrip("."))
        parts = pkg_parts[: len(pkg_parts) - (level - 1)] + [p for p in spec.lstrip(".").split(".") if p]
    elif spec.split(".")[0] == name:
        parts = spec.split(".")[1:]
    else:
        return []
    while parts and module_of(".".join(parts)) is None:
        parts = parts[:-1]
    found = module_of(".".join(parts))
    return [found] if found else []


# --------------------------------------------------------------------------------------------
# Cycles
# --------------------------------------------------------------------------------------------


def components(edges: list[Edge]) -> list[list[str]]:
    """The strongly connected components of more than one node (Tarjan, iterative)."""
    graph: dict[str, list[str]] = {}
    for a, _, b in edges:
        graph.setdefault(a, []).append(b)
        graph.setdefault(b, [])
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    out: list[list[str]] = []
    counter = 0
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, 0)]
        while work:
            v, i = work.pop()
            if i == 0:
                index[v] = low[v] = counter
                counter += 1
                stack.append(v)
                on_stack.add(v)
            succ = sorted(graph[v])
            if i < len(succ):
                work.append((v, i + 1))
                w = succ[i]
                if w not in index:
                    work.append((w, 0))
                elif w in on_stack:
                    low[v] = min(low[v], index[w])
                continue
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    out.append(sorted(comp))
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[v])
    return sorted(out)


def one_cycle(comp: list[str], edges: list[Edge]) -> list[Edge]:
    """A shortest cycle through the component's first file, as edges."""
    inside = set(comp)
    by_src: dict[str, list[Edge]] = {}
    for e in sorted(edges):
        if e[0] in inside and e[2] in inside:
            by_src.setdefault(e[0], []).append(e)
    start = comp[0]
    prev: dict[str, Edge] = {}
    queue = deque([start])
    while queue:
        v = queue.popleft()
        for e in by_src.get(v, []):
            if e[2] == start:
                path = [e]
                while path[0][0] != start:
                    path.insert(0, prev[path[0][0]])
                return path
            if e[2] not in prev:
                prev[e[2]] = e
                queue.append(e[2])
    return []


def report(name: str, edges: list[Edge], out: TextIO) -> int:
    """Prints `name`'s cycles; returns how many components are cyclic."""
    comps = components(edges)
    if not comps:
        linked = {e[0] for e in edges} | {e[2] for e in edges}
        print(f"{name}: no import cycle ({len(linked)} files linked by imports)", file=out)
        return 0
    for comp in comps:
        print(f"{name}: import cycle between {len(comp)} files:", file=out)
        cycle = one_cycle(comp, edges)
        for a, line, b in cycle:
            print(f"    {a}:{line} imports {b}", file=out)
        inside = set(comp)
        rest = sorted(e for e in edges if e[0] in inside and e[2] in inside and e not in cycle)
        if rest:
            print("  other imports inside the cycle:", file=out)
            for a, line, b in rest:
                print(f"    {a}:{line} imports {b}", file=out)
    return len(comps)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", type=Path, default=Path(__file__).resolve().parent.parent, help="the repository")
    parser.add_argument(
        "--pending",
        action="append",
        default=[],
        metavar="CRATE",
        help="a crate whose cycles are printed but do not fail the check (not yet untangled)",
    )
    args = parser.parse_args(argv)
    repo: Path = args.root.resolve()
    graphs = rust_graphs(repo)
    package = repo / "python" / "stokehold"
    if (package / "__init__.py").exists():
        graphs["python/stokehold"] = python_graph(package, repo)
    unknown = set(args.pending) - set(graphs)
    if unknown:
        print(f"check_cycles: --pending names no crate here: {', '.join(sorted(unknown))}", file=sys.stderr)
        return 2
    failed = []
    for name, edges in graphs.items():
        pending = name in args.pending
        n = report(name + (" (pending: reported, not failed)" if pending else ""), edges, sys.stdout)
        if n and not pending:
            failed.append(name)
        elif not n and pending:
            print(f"  {name} has no cycle any more: take it off --pending", file=sys.stdout)
    if failed:
        print(f"check_cycles: import cycles in {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
