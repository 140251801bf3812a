#!/usr/bin/env python3
"""Import cycles between the top-level modules of each crate (issue 47: the firewall in
layers). A module's imports are the `crate::X` paths in the code of its files (`src/X.rs` and
`src/X/**`; comments and test modules left out); `super::` inside `src/X/` stays in X. Prints each crate's cycles; exits 1 if
any crate not listed in ALLOWED has one.

    scripts/import-cycles.py [CRATE_DIR...]     default: every crates/*
"""
import pathlib
import re
import sys

# Crates whose cycles are known and being worked off (issue 47): the modules each crate
# may have in cycles. A new cycle, or a module more in one, fails.
ALLOWED = {}

USE = re.compile(r"\bcrate::([a-z_][a-z0-9_]*)")


def modules(src: pathlib.Path) -> dict:
    """Top-level module -> the set of top-level modules it names."""
    deps = {}
    for f in src.rglob("*.rs"):
        rel = f.relative_to(src)
        top = rel.parts[0].removesuffix(".rs")
        if top in ("lib", "main"):
            continue
        # Code only: a doc link to another module is no dependency, nor is a test module
        # (written last in a file, after `#[cfg(test)]`).
        code = f.read_text().split("#[cfg(test)]")[0]
        text = "\n".join(l.split("//")[0] for l in code.splitlines())
        named = {m for m in USE.findall(text) if m != top}
        deps.setdefault(top, set()).update(named)
    return {m: {d for d in ds if d in deps} for m, ds in deps.items()}


def cycles(deps: dict) -> list:
    """The strongly connected components with more than one module (Tarjan)."""
    index, low, stack, on, out, n = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = n[0]
        n[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(deps.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in sorted(deps):
        if v not in index:
            visit(v)
    return out


def main() -> int:
    root = pathlib.Path(__file__).resolve().parent.parent
    dirs = [pathlib.Path(a) for a in sys.argv[1:]] or sorted((root / "crates").iterdir())
    failed = False
    for d in dirs:
        src = d / "src"
        if not src.is_dir():
            continue
        found = cycles(modules(src))
        name = d.name
        for c in found:
            print(f"{name}: cycle among {', '.join(c)}")
        in_cycles = sum(len(c) for c in found)
        allowed = ALLOWED.get(name, 0)
        if in_cycles > allowed:
            failed = True
            print(f"{name}: {in_cycles} modules in cycles, {allowed} allowed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
