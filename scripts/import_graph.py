#!/usr/bin/env python3
"""Import circles between the files of a Rust crate (strata-node's node/src).

File A depends on file B when A names B's module by path, wherever the path
stands: `use` declarations (nested groups `use a::{b, c::{self, d}}`, `pub
use` re-exports, `as` renames, globs) and paths in code (`super::x::f()`,
`crate::store::cold::ColdTier`, `super::super::x`, `self::x` in a mod.rs, a
bare `x::...` where `x` is a child module or a name imported as a module).
Paths are resolved as rustc resolves modules: `crate`, `self`, `super`, the
module's children (`mod x;` and inline `mod x { }`), the names its `use`s
bind and, one level deep, its glob imports; main.rs and bin/*.rs are crate
roots of their own that reach the library by its name. The walk stops at the
first segment that is not a module:
- a path that ends at an item of a mod.rs (not at a child file) depends on
  that mod.rs;
- a path that ends at a name a module only imports (`pub use x::Item` in a
  mod.rs, `super::Node` re-exported from node.rs) goes on to the file that
  defines the item: `super::Node` is a use of commands/node.rs; the `pub use`
  line itself is an edge from the mod.rs to node.rs;
- a path that ends at an item of an enclosing folder's own mod.rs (a child's
  `super::Ctx`, `super::super::Keyspace`, `crate::store::Keyspace` inside
  store/) is no edge. The mod.rs is the folder's shared vocabulary and, as
  the parent, also declares, re-exports and registers its children; counting
  both directions makes every folder whose mod.rs holds code one circle with
  it (11 circles in node/src instead of 7; commands/ one 33-file circle,
  mod.rs's command table against every family's `super::Ctx`), which no
  refactor short of emptying the mod.rs would break. This is how issue 20
  counts; `--strict` counts these edges too.
`mod x;` itself is not a dependency (a parent declaring its child is not a
use). Comments (line, nested block, doc) and string, raw string and char
literals are skipped by the tokenizer; attributes are not read for paths.
Not seen: bare names a glob import of another file brings in (production
code in node/src has no such glob today) and macros used by name.

Test code is counted apart: `#[cfg(test)]` items (inline `mod tests { }`
blocks, test-only functions, uses, fields, match arms) and files declared
under `#[cfg(test)] mod x;` are a separate part of their file that no
production code can use, so their edges can never close a circle of the
production code: they are left out of the graph. `--with-tests` counts them
as part of their file, to show what they would add.

The circles are the strongly connected components of more than one file
(Tarjan). Each is printed as one line, files relative to the source root and
sorted; then, for circles of three files or more, a shortest loop through its
first file, then every edge inside it with the line where it first appears
(`a.rs:12 -> b.rs`: a.rs names b.rs's module first on line 12).

    import_graph.py [--root node/src] [--max N] [--strict] [--with-tests] [--quiet]
    import_graph.py --edges         # the whole graph, one edge a line
    import_graph.py --self-test     # the fixture tree in scripts/testdata/import_graph

Exits 1 when there are more than --max circles (no limit when not given).
Standard library only; node/src takes well under a second.
"""
import argparse
import os
import re
import sys

# ---------------------------------------------------------------- tokenizer

_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_NUMBER = re.compile(r"[0-9][0-9A-Za-z_]*")
_RAW_STR = re.compile(r'(?:br|cr|r)(#*)"')
_PREFIXED_STR = re.compile(r'(?:b|c)"')


def tokenize(text):
    """Yields (kind, value, line): kind 'id' (identifiers and keywords), 'p'
    (punctuation, `::` as one token). Comments, strings, chars, lifetimes and
    numbers produce nothing."""
    toks = []
    i, n, line = 0, len(text), 1
    while i < n:
        c = text[i]
        if c == "\n":
            line += 1
            i += 1
        elif c in " \t\r":
            i += 1
        elif text.startswith("//", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
        elif text.startswith("/*", i):
            depth, i = 1, i + 2
            while i < n and depth:
                if text.startswith("/*", i):
                    depth, i = depth + 1, i + 2
                elif text.startswith("*/", i):
                    depth, i = depth - 1, i + 2
                else:
                    line += text[i] == "\n"
                    i += 1
        elif c == '"' or (c in "bcr" and (_RAW_STR.match(text, i) or _PREFIXED_STR.match(text, i))):
            m = _RAW_STR.match(text, i)
            if m:  # r"..", r#".."#: no escapes, ends at the quote and as many hashes
                end = text.find('"' + m.group(1), m.end())
                end = n if end < 0 else end + 1 + len(m.group(1))
                line += text.count("\n", i, end)
                i = end
                continue
            i = text.index('"', i) + 1
            while i < n and text[i] != '"':
                if text[i] == "\\":
                    i += 1
                line += text[i] == "\n"
                i += 1
            i += 1
        elif c == "'" or (c == "b" and text.startswith("b'", i)):
            j = i + (2 if c == "b" else 1)
            if j < n and text[j] == "\\":  # escaped char literal
                k = text.find("'", j + 2)
                i = n if k < 0 else k + 1
            elif j + 1 < n and text[j + 1] == "'":  # one-char literal
                i = j + 2
            else:  # lifetime or label: skip the quote, the identifier follows
                i = j
                m = _IDENT.match(text, i)
                if m:
                    i = m.end()
        elif c == "r" and text.startswith("r#", i) and _IDENT.match(text, i + 2):
            m = _IDENT.match(text, i + 2)  # raw identifier
            toks.append(("id", m.group(), line))
            i = m.end()
        elif c.isalpha() or c == "_":
            m = _IDENT.match(text, i)
            toks.append(("id", m.group(), line))
            i = m.end()
        elif c.isdigit():
            i = _NUMBER.match(text, i).end()
        elif text.startswith("::", i):
            toks.append(("p", "::", line))
            i += 2
        elif c == "$" and text.startswith("$crate", i):
            toks.append(("id", "crate", line))
            i += 6
        else:
            toks.append(("p", c, line))
            i += 1
    return toks


# ------------------------------------------------------------------- parser


class Module:
    """A module: a file or an inline `mod x { }` inside one."""

    def __init__(self, crate, path, file, test, parent):
        self.crate, self.path, self.file, self.test, self.parent = crate, path, file, test, parent
        self.children = {}  # name -> Module
        self.decls = {}  # name -> (test, line) for `mod x;`, file not yet read
        self.aliases = {}  # name -> (segments, Module where the use stands)
        self.globs = []  # segments of `use ...::*`
        self.refs = []  # (segments, line, test)



def attribute_is_cfg_test(toks, i, j):
    vals = [t[1] for t in toks[i:j]]
    return vals == ["cfg", "(", "test", ")"]


def item_end(toks, i):
    """Index of the last token of the item (or field, variant, match arm,
    statement) starting at i: ends at `;` or `,` outside brackets, or at the
    `}` matching the first `{`; stops before a `}` that closes an outer block."""
    depth = 0
    n = len(toks)
    while i < n:
        v = toks[i][1] if toks[i][0] == "p" else None
        if v in ("(", "["):
            depth += 1
        elif v in (")", "]"):
            depth -= 1
        elif v == "{" and depth == 0:
            d = 0
            while i < n:
                if toks[i][0] == "p" and toks[i][1] == "{":
                    d += 1
                elif toks[i][0] == "p" and toks[i][1] == "}":
                    d -= 1
                    if d == 0:
                        return i
                i += 1
            return n - 1
        elif v == "}" and depth == 0:
            return i - 1
        elif v in (";", ",") and depth == 0:
            return i
        i += 1
    return n - 1


def parse_use_tree(toks, i, prefix, out):
    """Parses a use tree at toks[i]; appends (segments, line, binding, glob)
    to out, binding being the local name the tree binds (None for globs).
    Returns the index after the tree."""
    segs = list(prefix)
    line = toks[i][2] if i < len(toks) else 0
    if toks[i][1] == "::":  # `use ::std::...`: an extern crate
        segs.append("::")
        i += 1
    while True:
        k, v, ln = toks[i]
        if v == "{":
            i += 1
            while toks[i][1] != "}":
                i = parse_use_tree(toks, i, segs, out)
                if toks[i][1] == ",":
                    i += 1
            return i + 1
        if v == "*":
            out.append((segs, ln, None, True))
            return i + 1
        if k == "id":
            if v == "self" and segs and segs != ["self"] and toks[i + 1][1] != "::":
                # `use a::b::{self}` binds b
                binding = segs[-1]
                i += 1
                if toks[i][1] == "as":
                    binding = toks[i + 1][1]
                    i += 2
                out.append((segs, ln, binding, False))
                return i
            segs = segs + [v]
            line = ln
            i += 1
            if toks[i][1] == "::":
                i += 1
                continue
            binding = v
            if toks[i][1] == "as":
                binding = toks[i + 1][1]
                i += 2
            out.append((segs, line, binding, False))
            return i
        # unexpected token: give up on this tree
        return i + 1


def scan_file(toks, root):
    """Fills root (the file's module) and its inline modules from the tokens."""
    n = len(toks)
    # scope stack: (module, brace depth at which it closes, test)
    stack = [(root, -1, root.test)]
    depth = 0
    test_until = -1  # tokens up to this index belong to a #[cfg(test)] item
    pending_test = False
    i = 0
    while i < n:
        k, v, ln = toks[i]
        mod, _, mod_test = stack[-1]
        in_test = mod_test or i <= test_until
        if k == "p" and v == "#":
            inner = i + 1 < n and toks[i + 1][1] == "!"
            j = i + (2 if inner else 1)
            if j < n and toks[j][1] == "[":
                d, e = 0, j
                while e < n:
                    if toks[e][1] == "[":
                        d += 1
                    elif toks[e][1] == "]":
                        d -= 1
                        if d == 0:
                            break
                    e += 1
                if attribute_is_cfg_test(toks, j + 1, e):
                    if inner:
                        stack[-1] = (mod, stack[-1][1], True)
                        mod.test = True
                    else:
                        pending_test = True
                i = e + 1
                continue
        if pending_test:
            pending_test = False
            test_until = max(test_until, item_end(toks, i))
            in_test = True
        if k == "p" and v == "{":
            depth += 1
        elif k == "p" and v == "}":
            depth -= 1
            while len(stack) > 1 and stack[-1][1] == depth:
                stack.pop()
        elif k == "id" and v == "mod" and i + 2 < n and toks[i + 1][0] == "id":
            name = toks[i + 1][1]
            if toks[i + 2][1] == ";":
                mod.decls[name] = (in_test, ln)
                i += 3
                continue
            if toks[i + 2][1] == "{":
                child = Module(mod.crate, mod.path + (name,), mod.file, in_test, mod)
                mod.children[name] = child
                stack.append((child, depth, in_test))
                depth += 1
                i += 3
                continue
        elif k == "id" and v == "use" and i + 1 < n and (toks[i + 1][0] == "id" or toks[i + 1][1] in ("::", "{")):
            out = []
            try:
                j = parse_use_tree(toks, i + 1, [], out)
            except IndexError:  # a use cut off by the end of the file
                j = n
            for segs, line, binding, glob in out:
                if glob:
                    mod.globs.append(segs)
                elif binding is not None and binding != "_":
                    mod.aliases.setdefault(binding, (segs, mod))
                mod.refs.append((segs, line, in_test))
            while j < n and toks[j][1] != ";":
                j += 1
            i = j + 1
            continue
        elif k == "id" and i + 1 < n and toks[i + 1][1] == "::" and not (i > 0 and toks[i - 1][1] in ("::", ".")):
            segs = [v]
            j = i + 1
            while j + 1 < n and toks[j][1] == "::" and toks[j + 1][0] == "id":
                segs.append(toks[j + 1][1])
                j += 2
            if len(segs) > 1:
                mod.refs.append((segs, ln, in_test))
            i = j
            continue
        i += 1


# --------------------------------------------------------------- the graph


class Graph:
    def __init__(self, src, with_tests=False, strict=False):
        self.src = src
        self.with_tests = with_tests
        self.strict = strict
        self.files = {}  # relative path -> root Module
        self.crates = {}  # crate name -> root Module
        self.unreached = []
        lib = os.path.join(src, "lib.rs")
        roots = []
        if os.path.exists(lib):
            roots.append(("crate", "lib.rs"))
        if os.path.exists(os.path.join(src, "main.rs")):
            roots.append(("main", "main.rs"))
        bindir = os.path.join(src, "bin")
        if os.path.isdir(bindir):
            for f in sorted(os.listdir(bindir)):
                if f.endswith(".rs"):
                    roots.append(("bin:" + f[:-3], "bin/" + f))
        for crate, rel in roots:
            root = Module(crate, (), rel, False, None)
            self.crates[crate] = root
            self.load(root, os.path.dirname(rel))
        every = set()
        for dirpath, _, names in os.walk(src):
            for f in names:
                if f.endswith(".rs"):
                    every.add(os.path.relpath(os.path.join(dirpath, f), src))
        self.unreached = sorted(every - set(self.files))
        self.lib = self.crates.get("crate")
        # The library's name, as the crate roots of main.rs and bin/ spell it.
        self.lib_names = set()
        cargo = os.path.join(src, "..", "Cargo.toml")
        if os.path.exists(cargo):
            m = re.search(r'^\s*name\s*=\s*"([^"]+)"', open(cargo).read(), re.M)
            if m:
                self.lib_names.add(m.group(1).replace("-", "_"))

    def load(self, mod, dirrel):
        """Reads mod's file, then the files of the modules it declares; dirrel
        is the directory its children's files are in."""
        self.files[mod.file] = mod
        with open(os.path.join(self.src, mod.file), encoding="utf-8") as fh:
            scan_file(tokenize(fh.read()), mod)
        self.load_decls(mod, dirrel)

    def load_decls(self, mod, dirrel):
        for name, (test, _line) in sorted(mod.decls.items()):
            for cand in (os.path.join(dirrel, name + ".rs"), os.path.join(dirrel, name, "mod.rs")):
                if os.path.exists(os.path.join(self.src, cand)):
                    child = Module(mod.crate, mod.path + (name,), os.path.normpath(cand), test or mod.test, mod)
                    mod.children[name] = child
                    sub = os.path.dirname(cand) if cand.endswith("mod.rs") else os.path.join(dirrel, name)
                    self.load(child, sub)
                    break
        for name, child in sorted(mod.children.items()):
            if child.file == mod.file:  # inline module: its `mod x;` live in dir/name/
                self.load_decls(child, os.path.join(dirrel, name))

    # Resolution: the module a path names (the deepest one its segments walk).
    def lookup(self, mod, name, seen):
        """The module `name` stands for as a first segment in mod, or None."""
        if name in mod.children:
            return mod.children[name]
        key = (id(mod), name)
        if key in seen:
            return None
        seen = seen | {key}
        if name in mod.aliases:
            segs, where = mod.aliases[name]
            return self.resolve(where, segs, seen, whole=True)
        for segs in mod.globs:
            src = self.resolve(mod, segs, seen, whole=True)
            if src is not None and src is not mod:
                found = self.lookup(src, name, seen)
                if found is not None:
                    return found
        if mod.parent is None and mod.crate != "crate" and name in self.lib_names:
            return self.lib
        return None

    def resolve(self, mod, segs, seen=frozenset(), whole=False, through=False):
        """The deepest module segs walk from mod; with whole, None unless
        every segment is a module; with through, a walk that ends at a name a
        module imports (`pub use x::Item`) goes on to where that name is."""
        if not segs:
            return None
        first, rest = segs[0], segs[1:]
        if first == "::":
            return None
        if first == "crate":
            cur = self.crates[mod.crate]
        elif first == "self":
            cur = mod
        elif first == "super":
            cur = mod.parent
        else:
            cur = self.lookup(mod, first, seen)
        if cur is None:
            return None
        for s in rest:
            if s == "super" and cur.parent is not None:
                cur = cur.parent
                continue
            nxt = self.lookup(cur, s, seen) if s in cur.children or s in cur.aliases else None
            if nxt is None and through and s in cur.aliases and (id(cur), s) not in seen:
                asegs, where = cur.aliases[s]
                return self.resolve(where, asegs, seen | {(id(cur), s)}, through=True) or cur
            if nxt is None:
                return None if whole else cur
            cur = nxt
        return cur

    def edges(self):
        """{(from file, to file): first line}, production code only unless
        with_tests; without strict, no edge runs to an enclosing mod.rs."""
        out = {}

        def visit(mod):
            above = set()
            m = mod.parent
            while m is not None and not self.strict:
                above.add(m.file)
                m = m.parent
            for segs, line, test in mod.refs:
                if test and not self.with_tests:
                    continue
                target = self.resolve(mod, segs, through=True)
                if target is None or target.file == mod.file or target.file in above:
                    continue
                if target.test and not self.with_tests:
                    continue
                key = (mod.file, target.file)
                if key not in out or line < out[key]:
                    out[key] = line
            for child in mod.children.values():
                if child.file == mod.file and (self.with_tests or not child.test):
                    visit(child)

        for mod in self.files.values():
            if self.with_tests or not mod.test:
                visit(mod)
        return out


def circles(edges):
    """Strongly connected components of more than one node (iterative Tarjan),
    each sorted, in sorted order."""
    succ = {}
    for a, b in edges:
        succ.setdefault(a, []).append(b)
        succ.setdefault(b, [])
    index, low, on, stack, comps = {}, {}, set(), [], []
    counter = 0
    for start in sorted(succ):
        if start in index:
            continue
        work = [(start, iter(sorted(succ[start])))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on.add(start)
        while work:
            v, it = work[-1]
            advanced = False
            for w in it:
                if w not in index:
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(succ[w]))))
                    advanced = True
                    break
                if w in on:
                    low[v] = min(low[v], index[w])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    comps.append(sorted(comp))
    return sorted(comps)


def shortest_loop(comp, edges):
    """A shortest cycle through the component's first file, as a list of
    files (first repeated at the end), found breadth-first."""
    inside = set(comp)
    succ = {}
    for a, b in sorted(edges):
        if a in inside and b in inside:
            succ.setdefault(a, []).append(b)
    start = comp[0]
    prev, queue = {}, [start]
    for v in queue:
        for w in succ.get(v, []):
            if w == start:
                path = [v]
                while path[-1] != start:
                    path.append(prev[path[-1]])
                return path[::-1] + [start]
            if w not in prev:
                prev[w] = v
                queue.append(w)
    return [start]


def report(g, quiet=False, out=sys.stdout):
    edges = g.edges()
    comps = circles(edges)
    for f in g.unreached:
        print(f"check-layers: note: node/src/{f} is declared by no module (not compiled), not in the graph", file=out)
    for comp in comps:
        print(f"check-layers: import circle ({len(comp)} files): {' '.join(comp)}", file=out)
        if quiet:
            continue
        if len(comp) > 2:
            loop = shortest_loop(comp, edges)
            hops = " -> ".join(f"{a}:{edges[(a, b)]}" for a, b in zip(loop, loop[1:]))
            print(f"    shortest loop: {hops} -> {loop[-1]}", file=out)
        inside = set(comp)
        for (a, b), line in sorted(edges.items()):
            if a in inside and b in inside:
                print(f"    {a}:{line} -> {b}", file=out)
    return comps


# ---------------------------------------------------------------- self-test


def self_test(here):
    """Checks the fixture tree testdata/import_graph/src against
    testdata/import_graph/expected.txt, whose lines are `circle a b ...` (the
    default graph), `strict-circle ...` (--strict), `test-circle ...`
    (--with-tests), `edge a b [line]` and `no-edge a b` (default graph)."""
    base = os.path.join(here, "testdata", "import_graph")
    src = os.path.join(base, "src")
    graphs = {"circle": Graph(src), "strict-circle": Graph(src, strict=True), "test-circle": Graph(src, with_tests=True)}
    edges = graphs["circle"].edges()
    want = {k: [] for k in graphs}
    fails = []
    for raw in open(os.path.join(base, "expected.txt")):
        words = raw.split("#", 1)[0].split()
        if not words:
            continue
        if words[0] in want:
            want[words[0]].append(sorted(words[1:]))
        elif words[0] == "edge":
            got = edges.get((words[1], words[2]))
            if got is None:
                fails.append(f"missing edge {words[1]} -> {words[2]}")
            elif len(words) > 3 and got != int(words[3]):
                fails.append(f"edge {words[1]} -> {words[2]} first on line {got}, expected {words[3]}")
        elif words[0] == "no-edge":
            if (words[1], words[2]) in edges:
                fails.append(f"unexpected edge {words[1]} -> {words[2]} (line {edges[(words[1], words[2])]})")
        else:
            fails.append(f"expected.txt: unknown line {raw.strip()!r}")
    for kind, g in graphs.items():
        got = circles(g.edges())
        if got != sorted(want[kind]):
            fails.append(f"{kind}s found {got}, expected {sorted(want[kind])}")
    for f in fails:
        print(f"import_graph self-test: {f}", file=sys.stderr)
    if fails:
        print("import_graph self-test: FAILED; the default graph's edges:", file=sys.stderr)
        for (a, b), line in sorted(edges.items()):
            print(f"    {a}:{line} -> {b}", file=sys.stderr)
        return 1
    n = sum(len(v) for v in want.values())
    print(f"import_graph self-test: ok ({len(edges)} edges, {n} circles as expected)")
    return 0


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--root", default=os.path.join(here, "..", "node", "src"), help="the crate's src directory")
    ap.add_argument("--max", type=int, default=None, help="fail when there are more circles than this")
    ap.add_argument("--with-tests", action="store_true", help="count #[cfg(test)] code as part of its file")
    ap.add_argument("--strict", action="store_true", help="count uses of an enclosing mod.rs's items as edges")
    ap.add_argument("--quiet", action="store_true", help="one line per circle, no edges")
    ap.add_argument("--edges", action="store_true", help="print every edge of the graph (from:line -> to) and exit")
    ap.add_argument("--self-test", action="store_true", help="check the fixture tree in scripts/testdata/import_graph")
    args = ap.parse_args()
    if args.self_test:
        return self_test(here)
    g = Graph(args.root, args.with_tests, args.strict)
    if args.edges:
        for (a, b), line in sorted(g.edges().items()):
            print(f"{a}:{line} -> {b}")
        return 0
    n = len(report(g, args.quiet))
    if args.max is None:
        print(f"check-layers: {n} import circles")
    elif n > args.max:
        print(f"check-layers: {n} import circles, more than the {args.max} allowed (MAX_CIRCLES in scripts/check-layers.sh)", file=sys.stderr)
        return 1
    elif n < args.max:
        print(f"check-layers: {n} import circles, fewer than MAX_CIRCLES={args.max}: lower it to {n} in scripts/check-layers.sh")
    else:
        print(f"check-layers: {n} import circles (MAX_CIRCLES={args.max})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
