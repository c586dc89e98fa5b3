#!/usr/bin/env python3
"""Find import circles between sibling modules in each crate (issue 31).

A module may use its parent's items and its children's, but two siblings
that use each other — directly or around a loop (`methods::registry` uses
`methods::trust`, which uses `methods::registry`) — make a circle: neither
can be read, moved or tested without the other.  This walks every crate's
`src/`, maps each file to its module path, reads the `crate::`, `super::` and
`self::` paths it names (in `use` lines and in code), lifts each reference to
the two children of the modules' nearest common ancestor, and reports every
strongly connected group of siblings.  Exit 1 when there is one.  Test code
(`tests.rs`, `#[cfg(test)]` modules and blocks) is left out: a test may take
its fixtures from a sibling without making the code depend on it.

    python3 scripts/module_cycles.py           # check every crate
    python3 scripts/module_cycles.py -v        # also print each crate's edges
"""
import os
import re
import sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "crates")
PATH_RE = re.compile(r"\b((?:crate|super|self)(?:::[A-Za-z_][A-Za-z0-9_]*)+)")
COMMENT_RE = re.compile(r"//.*?$", re.M)
TEST_MOD_RE = re.compile(r"#\[cfg\(test\)\]\s*(pub(\([a-z]+\))?\s+)?mod\s+\w+\s*\{")


def is_test_only(path, src):
    """Files that exist only under `cfg(test)`: a `tests.rs`, or a module its
    parent declares with `#[cfg(test)]`."""
    if os.path.basename(path) == "tests.rs":
        return True
    name = os.path.basename(path)[:-3]
    if name == "mod":
        name = os.path.basename(os.path.dirname(path))
        parent_dir = os.path.dirname(os.path.dirname(path))
    else:
        parent_dir = os.path.dirname(path)
    for parent in (parent_dir + ".rs", os.path.join(parent_dir, "mod.rs"),
                   os.path.join(parent_dir, "lib.rs"), os.path.join(parent_dir, "main.rs")):
        if os.path.isfile(parent):
            text = open(parent, encoding="utf-8").read()
            if re.search(r"#\[cfg\(test\)\]\s*(pub(\([a-z]+\))?\s+)?mod\s+" + name + r"\s*;", text):
                return True
    return False


def module_of(src, path):
    rel = os.path.relpath(path, src)[:-3].split(os.sep)
    if rel[-1] in ("mod", "lib", "main"):
        rel = rel[:-1]
    return tuple(rel)


def resolve(here, is_mod_file, ref, modules):
    parts = ref.split("::")
    if parts[0] == "crate":
        base, rest = (), parts[1:]
    else:
        # `self` inside foo.rs or foo/mod.rs is `foo`; each `super` climbs one.
        base = here
        rest = parts
        while rest and rest[0] in ("self", "super"):
            if rest[0] == "super":
                base = base[:-1]
            rest = rest[1:]
    target = base
    for p in rest:
        if target + (p,) in modules:
            target = target + (p,)
        else:
            break
    return target


def lifted(a, b):
    """The two siblings under a and b's nearest common ancestor, or None
    when one contains the other."""
    i = 0
    while i < len(a) and i < len(b) and a[i] == b[i]:
        i += 1
    if i == len(a) or i == len(b):
        return None
    return a[: i + 1], b[: i + 1]


def sccs(nodes, edges):
    index, low, stack, on, out = {}, {}, [], set(), []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in edges.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                out.append(sorted(group))

    sys.setrecursionlimit(10000)
    for v in sorted(nodes):
        if v not in index:
            visit(v)
    return out


def crate_cycles(crate_dir, verbose):
    src = os.path.join(crate_dir, "src")
    files = []
    for d, _, fs in os.walk(src):
        files += [os.path.join(d, f) for f in fs if f.endswith(".rs")]
    modules = {module_of(src, f) for f in files}
    # Inline `mod x { ... }` blocks (tests) are part of their file's module.
    edges, why = {}, {}
    for f in files:
        here = module_of(src, f)
        is_mod = os.path.basename(f) in ("mod.rs", "lib.rs", "main.rs")
        if is_test_only(f, src):
            continue
        text = COMMENT_RE.sub("", open(f, encoding="utf-8").read())
        # A file's `#[cfg(test)] mod tests` block (by house style its last
        # item) is test code: it may reach across siblings for fixtures.
        m = TEST_MOD_RE.search(text)
        if m:
            text = text[: m.start()]
        for ref in PATH_RE.findall(text):
            # In foo.rs (not foo/mod.rs) `super` is foo's parent too: the
            # file is the module either way, so the rule is the same.
            to = resolve(here, is_mod, ref, modules)
            pair = lifted(here, to)
            if pair is None:
                continue
            a, b = pair
            edges.setdefault(a, set()).add(b)
            why.setdefault((a, b), (os.path.relpath(f, crate_dir), ref))
    if verbose:
        for (a, b), (f, ref) in sorted(why.items()):
            print(f"  {'::'.join(a)} -> {'::'.join(b)}  ({f}: {ref})")
    nodes = set(edges) | {b for bs in edges.values() for b in bs}
    found = []
    for group in sccs(nodes, edges):
        names = ["::".join(g) for g in group]
        links = [
            f"{'::'.join(a)} -> {'::'.join(b)} ({why[(a, b)][0]}: {why[(a, b)][1]})"
            for a in group
            for b in sorted(edges.get(a, ()))
            if b in group
        ]
        found.append((names, links))
    return found


def main():
    verbose = "-v" in sys.argv[1:]
    failed = False
    for name in sorted(os.listdir(ROOT)):
        crate = os.path.join(ROOT, name)
        if not os.path.isdir(os.path.join(crate, "src")):
            continue
        if verbose:
            print(name)
        for names, links in crate_cycles(crate, verbose):
            failed = True
            print(f"{name}: import circle between {', '.join(names)}")
            for l in links:
                print(f"    {l}")
    if failed:
        sys.exit(1)
    print("module_cycles: no import circles between sibling modules")


if __name__ == "__main__":
    main()
