"""Generated blocks in the docs: write them, or check that the docs hold them.

A generated block lies between `<!-- NAME:begin -->` and `<!-- NAME:end -->`
in a markdown file (the convention of compare_tables.py and capacity_lab.py).
A table's block holds whole lines (its text starts and ends with a newline); a
figure quoted in a sentence sits in an inline block inside the line, so that
the prose around it reads on and the figure is still the script's.

Generators build a list of (path relative to the repository, NAME, text) and
pass it to `apply`, which rewrites the blocks or, with check=True, rewrites
nothing and names every block whose text differs from what its data gives.
"""
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def markers(name):
    return f"<!-- {name}:begin -->", f"<!-- {name}:end -->"


def held(doc, name, path):
    """The text between NAME's markers in doc; exits when they are not there once each."""
    b, e = markers(name)
    if doc.count(b) != 1 or doc.count(e) != 1:
        sys.exit(f"{path}: block {name}: expected one {b} and one {e}")
    return doc.split(b, 1)[1].split(e, 1)[0]


def splice(doc, name, text, path):
    held(doc, name, path)
    b, e = markers(name)
    head, rest = doc.split(b, 1)
    return head + b + text + e + rest.split(e, 1)[1]


def first_difference(old, new):
    for a, b in zip(old.splitlines(), new.splitlines()):
        if a != b:
            return a, b
    return old[-200:], new[-200:]


def apply(blocks, check=False):
    """Write each block into its file, or (check) report the stale ones.

    Returns the number of blocks that differ from their data."""
    stale = 0
    files = {}
    for path, name, text in blocks:
        files.setdefault(path, []).append((name, text))
    for path, items in files.items():
        full = os.path.join(ROOT, path)
        with open(full) as f:
            doc = f.read()
        new = doc
        for name, text in items:
            old = held(new, name, path)
            if old != text:
                stale += 1
                if check:
                    was, now = first_difference(old, text)
                    print(f"{path}: block {name} differs from its data\n"
                          f"    docs: {was.strip()[:240]}\n    data: {now.strip()[:240]}")
            new = splice(new, name, text, path)
        if not check and new != doc:
            with open(full, "w") as f:
                f.write(new)
            print(f"wrote {path}", file=sys.stderr)
    return stale
