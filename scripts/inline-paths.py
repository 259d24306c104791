#!/usr/bin/env python3
"""The module imports that no `use` declaration shows: paths written inline.

cargo-modules (scripts/acyclic.sh) draws a module's "uses" edges from its `use`
declarations. A module that names another inline, in an expression or a type
(`crate::report::fleet::stat(..)`, `super::text::entry_json(..)`), imports it just the
same; this prints those edges, one `FROM TO` line each, module paths as cargo-modules
spells them (`CRATE::a::b`), for acyclic.sh to merge with cargo-modules' own.

It walks the crate's modules from its root file the way rustc does (`mod x;` in
`a.rs` is `a/x.rs` or `a/x/mod.rs`, `#[path]` honoured, inline `mod x { .. }`
blocks), with comments, strings and `use` declarations left out. Items under a
`#[cfg(..)]` that is false for the build being checked (not `test`, not `loom`; the
features given and the package's default features; Linux on x86-64) are left out, as
cargo-modules leaves them out. A path `crate::..`, `self::..` or `super::..` names the
deepest module it passes through, or, where it names an item a module imports (`use`,
`pub use`), the module the item comes from; an edge from a module to itself is not
printed. Macro bodies' `$crate::` paths are not followed.

usage: inline-paths.py ROOT_FILE CRATE_NAME [FEATURE...]
       inline-paths.py --self-test   (the reader on a small crate whose edges are known)
"""

import os
import re
import sys

TOKEN = re.compile(
    r"""
    (?P<ws>\s+)
  | (?P<line>//[^\n]*)
  | (?P<block>/\*)
  | (?P<raw>b?r(?P<hashes>\#*)")
  | (?P<str>b?"(?:[^"\\]|\\.)*")
  | (?P<char>b?'(?:[^'\\\n]|\\[^'\n]{1,10})')
  | (?P<life>'[A-Za-z_][A-Za-z0-9_]*)
  | (?P<ident>r\#[A-Za-z_][A-Za-z0-9_]*|[A-Za-z_][A-Za-z0-9_]*)
  | (?P<num>[0-9][A-Za-z0-9_.]*)
  | (?P<path>::)
  | (?P<punct>.)
    """,
    re.X | re.S,
)


def tokens(text):
    """The file's tokens, without whitespace, comments and literals' contents."""
    out, i = [], 0
    while i < len(text):
        m = TOKEN.match(text, i)
        kind = m.lastgroup if m.lastgroup != "hashes" else "raw"
        if kind == "block":
            depth, j = 1, m.end()
            while depth and j < len(text):
                if text.startswith("/*", j):
                    depth, j = depth + 1, j + 2
                elif text.startswith("*/", j):
                    depth, j = depth - 1, j + 2
                else:
                    j += 1
            i = j
            continue
        if m.group("raw") is not None:
            end = text.find('"' + m.group("hashes"), m.end())
            i = len(text) if end < 0 else end + 1 + len(m.group("hashes"))
            out.append(("lit", '""'))
            continue
        i = m.end()
        if kind in ("ws", "line"):
            continue
        if kind in ("str", "char", "num", "life"):
            out.append(("lit", m.group()))
        else:
            out.append((kind, m.group()))
    return out


def matching(toks, i):
    """The index past the group that opens at toks[i] (`(`, `[` or `{`)."""
    depth = 0
    for j in range(i, len(toks)):
        t = toks[j][1]
        if t in "([{" and toks[j][0] == "punct":
            depth += 1
        elif t in ")]}" and toks[j][0] == "punct":
            depth -= 1
            if depth == 0:
                return j + 1
    return len(toks)


def item_end(toks, i):
    """The index past the item or statement that starts at toks[i]: its `;` at depth 0,
    or the end of its first `{ .. }` block."""
    j = i
    while j < len(toks):
        kind, t = toks[j]
        if kind == "punct" and t in "([":
            j = matching(toks, j)
            continue
        if kind == "punct" and t == "{":
            return matching(toks, j)
        if kind == "punct" and t == ";":
            return j + 1
        j += 1
    return j


def cfg_true(toks, features):
    """Whether a cfg predicate (its tokens) holds for the build checked."""
    pos = [0]

    def pred():
        kind, t = toks[pos[0]]
        pos[0] += 1
        if t in ("all", "any", "not") and pos[0] < len(toks) and toks[pos[0]][1] == "(":
            pos[0] += 1
            vals = []
            while toks[pos[0]][1] != ")":
                vals.append(pred())
                if toks[pos[0]][1] == ",":
                    pos[0] += 1
            pos[0] += 1
            return all(vals) if t == "all" else any(vals) if t == "any" else not vals[0]
        if pos[0] < len(toks) and toks[pos[0]][1] == "=":
            value = toks[pos[0] + 1][1].strip('"')
            pos[0] += 2
            known = {
                "feature": value in features,
                "target_os": value == "linux",
                "target_family": value == "unix",
                "target_arch": value == "x86_64",
                "target_pointer_width": value == "64",
                "target_endian": value == "little",
            }
            return known.get(t, True)
        return {"test": False, "loom": False, "doc": False, "doctest": False, "unix": True, "windows": False}.get(t, True)

    try:
        return pred()
    except IndexError:
        return True


class Walker:
    def __init__(self, crate, modules, features):
        self.crate, self.modules, self.features = crate, modules, features
        self.uses = {}  # module -> {name: the path its `use` names}
        self.paths = []  # (module, path) of every inline path

    def resolve(self, here, segs, depth=0):
        """The module that defines what a path from module `here` (a tuple) names, or
        None (a path out of the crate). A name a module imports (`use`, `pub use`) is
        followed to the module it comes from, as cargo-modules follows it."""
        i, at = 0, list(here)
        if segs[0] == "crate":
            at, i = [], 1
        elif segs[0] not in ("super", "self"):
            if "::".join([self.crate, *here, segs[0]]) not in self.modules:
                return None
        while i < len(segs) and segs[i] in ("super", "self"):
            if segs[i] == "super":
                if not at:
                    return None
                at.pop()
            i += 1
        while i < len(segs):
            if "::".join([self.crate, *at, segs[i]]) in self.modules:
                at.append(segs[i])
                i += 1
                continue
            imported = self.uses.get(tuple(at), {}).get(segs[i])
            if imported is not None and depth < 16:
                return self.resolve(tuple(at), imported + segs[i + 1 :], depth + 1)
            break
        return tuple(at)

    def use_tree(self, toks, i, end, prefix, here):
        """Records the names a `use` tree (toks[i:end]) brings into module `here`."""
        segs = list(prefix)
        while i < end:
            kind, t = toks[i]
            if kind == "ident" and t != "as":
                segs.append(t)
                i += 1
            elif kind == "path" or t == "::":
                i += 1
            elif t == "{":
                close = matching(toks, i)
                j = i + 1
                while j < close - 1:
                    k, depth = j, 0
                    while k < close - 1 and not (toks[k][1] == "," and depth == 0):
                        depth += toks[k][1] in "({[" and toks[k][0] == "punct"
                        depth -= toks[k][1] in ")}]" and toks[k][0] == "punct"
                        k += 1
                    self.use_tree(toks, j, k, segs, here)
                    j = k + 1
                return
            elif t == "as":
                alias = toks[i + 1][1] if i + 1 < end else None
                if segs and alias and alias != "_":
                    self.uses.setdefault(here, {})[alias] = segs
                return
            else:  # `*`, or the end
                return
        if segs:
            name = segs[-2] if segs[-1] == "self" and len(segs) > 1 else segs[-1]
            path = segs[:-1] if segs[-1] == "self" else segs
            self.uses.setdefault(here, {})[name] = path

    def file(self, path, here, mod_rs):
        """Reads the module `here` (a tuple of names) from `path`."""
        try:
            with open(path, encoding="utf-8") as f:
                toks = tokens(f.read())
        except OSError:
            return
        # Where `mod x;` finds x: beside a mod-rs file (lib.rs, main.rs, mod.rs), in
        # a directory named after any other file.
        base = os.path.dirname(path)
        if not mod_rs:
            base = os.path.join(base, os.path.splitext(os.path.basename(path))[0])
        self.block(toks, 0, len(toks), here, base, os.path.dirname(path))

    def block(self, toks, i, end, here, base, attr_base):
        path_attr = None
        while i < end:
            kind, t = toks[i]
            if kind == "punct" and t == "#" and i + 1 < end and toks[i + 1][1] in ("[", "!"):
                open_at = i + 1 if toks[i + 1][1] == "[" else i + 2
                close = matching(toks, open_at)
                inner = toks[open_at + 1 : close - 1]
                if inner and inner[0][1] == "cfg" and len(inner) > 2 and inner[1][1] == "(":
                    if not cfg_true(inner[2:-1], self.features):
                        if toks[i + 1][1] == "!":
                            return  # the whole module is left out
                        j = close
                        while j < end and toks[j][1] == "#":  # further attributes
                            j = matching(toks, j + 1)
                        i = item_end(toks, j)
                        continue
                if inner and inner[0][1] == "path" and len(inner) > 2:
                    path_attr = inner[2][1].strip('"')
                i = close
                continue
            if kind == "ident" and t == "use":
                stop = item_end(toks, i)
                self.use_tree(toks, i + 1, stop - 1, [], here)
                i = stop
                path_attr = None
                continue
            if kind == "ident" and t == "mod" and i + 2 < end and toks[i + 1][0] == "ident":
                name = toks[i + 1][1].removeprefix("r#")
                sub = here + (name,)
                self.modules.add("::".join([self.crate, *sub]))
                if toks[i + 2][1] == ";":
                    if path_attr is not None:
                        p = os.path.join(attr_base, path_attr)
                        self.file(p, sub, True)
                    else:
                        p = os.path.join(base, name + ".rs")
                        if os.path.exists(p):
                            self.file(p, sub, False)
                        else:
                            self.file(os.path.join(base, name, "mod.rs"), sub, True)
                    i += 3
                elif toks[i + 2][1] == "{":
                    close = matching(toks, i + 2)
                    sub_base = os.path.join(base, name)
                    self.block(toks, i + 3, close - 1, sub, sub_base, sub_base)
                    i = close
                else:
                    i += 1
                path_attr = None
                continue
            after = toks[i - 1][1] if i > 0 else ""
            if kind == "ident" and t in ("crate", "super", "self") and after not in ("::", "$", "in"):
                segs, j = [t], i + 1
                while j + 1 < end and toks[j][0] == "path" and toks[j + 1][0] == "ident":
                    segs.append(toks[j + 1][1])
                    j += 2
                if len(segs) > 1:
                    self.paths.append((here, segs))
                i = j
                continue
            if kind == "punct" and t in (";", "{", "}"):
                path_attr = None
            i += 1


def with_defaults(root, features):
    """`features` with the package's default features, and the features each enables."""
    try:
        import tomllib

        with open(os.path.join(os.path.dirname(os.path.dirname(root)), "Cargo.toml"), "rb") as f:
            table = tomllib.load(f).get("features", {})
    except (ImportError, OSError, ValueError):
        return features
    todo, out = list(features) + table.get("default", []), set()
    while todo:
        x = todo.pop()
        if x not in out and "/" not in x and not x.startswith("dep:"):
            out.add(x)
            todo.extend(table.get(x, []))
    return out


def self_test():
    """The reader on a small crate written to a temporary directory: what it must find
    and what it must leave out. Returns the failures' descriptions."""
    import tempfile

    files = {
        "lib.rs": """
            //! `crate::a::f()` in a comment is not a path.
            mod a;
            mod b;
            mod d;
            pub mod c { pub fn g() {} }
            pub use b::Item;
            #[cfg(test)]
            mod tests { fn t() { crate::a::f(); } }
        """,
        "a.rs": """
            use crate::d::z as _;
            pub fn f() -> &'static str { let _ = 'x'; "crate::b::nope()" }
            fn h() { super::c::g(); let _: crate::Item; }
            #[cfg(loom)]
            fn l() { crate::d::z(); }
            #[cfg(feature = "on")]
            fn on() { crate::b::inner::x(); }
        """,
        "b.rs": """
            pub struct Item;
            mod inner;
            fn k() { self::inner::x(); }
        """,
        "b/inner.rs": "pub fn x() { super::super::a::f(); }",
        "d.rs": "pub fn z() {}",
    }
    want = {
        ("t", "t::a", "t::c"),  # super::c::g(): a's parent is the root, c its module
        ("t", "t::a", "t::b"),  # crate::Item is b's, re-exported by the root
        ("t", "t::b", "t::b::inner"),
        ("t", "t::b::inner", "t::a"),
    }
    failures = []
    with tempfile.TemporaryDirectory() as d:
        for name, text in files.items():
            os.makedirs(os.path.dirname(os.path.join(d, name)), exist_ok=True)
            with open(os.path.join(d, name), "w", encoding="utf-8") as f:
                f.write(text)
        for features, extra in (((), set()), (("on",), {("t", "t::a", "t::b::inner")})):
            w = Walker("t", {"t"}, set(features))
            w.file(os.path.join(d, "lib.rs"), (), True)
            got = set()
            for here, segs in w.paths:
                target = w.resolve(here, segs)
                if target is not None and target != here:
                    got.add(("t", "::".join(["t", *here]), "::".join(["t", *target])))
            if got != want | extra:
                failures.append(f"features {features}: found {sorted(got)}, expected {sorted(want | extra)}")
    return failures


def main(argv):
    if argv[1:] == ["--self-test"]:
        failures = self_test()
        for f in failures:
            print(f"inline-paths: self-test: {f}", file=sys.stderr)
        return 1 if failures else 0
    if len(argv) < 3:
        sys.stderr.write("usage: " + __doc__.split("usage: ")[1])
        return 2
    root, crate = argv[1], argv[2]
    features = with_defaults(root, set(argv[3:]))
    modules = {crate}
    w = Walker(crate, modules, features)
    w.file(root, (), True)
    edges = set()
    for here, segs in w.paths:
        target, src = w.resolve(here, segs), "::".join([crate, *here])
        if target is not None and target != here and src in modules:
            edges.add((src, "::".join([crate, *target])))
    for a, b in sorted(edges):
        print(a, b)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
