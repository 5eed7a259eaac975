#!/usr/bin/env python3
"""Counts the shape of the workspace's library code, the figures a newcomer stumbles on.

For every crate under crates/ (its src/ tree, test modules cut off at the first
`#[cfg(test)]`):
  - root names: the names a crate root re-exports or declares public (`pub use` names,
    `pub mod`, public items), `#[doc(hidden)]` items left out;
  - import circles: groups of files that import each other in a circle (strongly
    connected components of the file graph; `crate::`, `super::` and `self::` paths,
    followed through re-exports to the file that defines the name);
  - files over 600 code lines (blank and `//` lines not counted);
  - functions over 100 lines (signature to closing brace);
  - modules without a `//!` paragraph (a crate root that includes its README counts).

Usage: python3 scripts/code_shape.py [--details] [repository root]
"""

import re
import sys
from pathlib import Path

FILE_LIMIT = 600
FN_LIMIT = 100
IDENT = r"[A-Za-z_][A-Za-z0-9_]*"


def library_part(text):
    """The file's text before its first `#[cfg(test)]` (the test module)."""
    cut = text.find("#[cfg(test)]")
    return text if cut < 0 else text[:cut]


def strip_comments(text):
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    return re.sub(r"//[^\n]*", "", text)


def code_lines(text):
    return sum(1 for line in text.splitlines() if line.strip() and not line.strip().startswith("//"))


def expand_use(tree):
    """The paths of one `use` tree: `a::{b, c::{d, e as f}}` -> [a::b, a::c::d, a::c::e]."""
    tree = re.sub(r"\s+", "", re.sub(r"\s+as\s+", "@", tree))
    depth, start, parts = 0, 0, []
    brace = tree.find("{")
    if brace < 0:
        return [tree]
    prefix, inner = tree[:brace], tree[brace + 1 : tree.rfind("}")]
    for i, ch in enumerate(inner):
        if ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(inner[start:i])
            start = i + 1
    parts.append(inner[start:])
    out = []
    for part in parts:
        if not part:
            continue
        for sub in expand_use(part):
            out.append(prefix + sub)
    return out


class Crate:
    def __init__(self, root):
        self.root = root
        self.src = root / "src"
        self.files = {}  # module path tuple -> file
        for f in sorted(self.src.rglob("*.rs")):
            rel = f.relative_to(self.src)
            if rel.parts[0] == "bin":
                continue
            parts = list(rel.with_suffix("").parts)
            if parts[-1] in ("lib", "mod"):
                parts = parts[:-1]
            self.files[tuple(parts)] = f
        self.text = {m: library_part(f.read_text()) for m, f in self.files.items()}
        self.code = {m: strip_comments(t) for m, t in self.text.items()}
        self.reexports = {m: self._reexports(m) for m in self.files}

    def _uses(self, module):
        """(is_pub, path) of every `use` in the module's library code."""
        out = []
        for m in re.finditer(r"(pub(?:\([^)]*\))?\s+)?use\s+([^;]+);", self.code[module]):
            for path in expand_use(m.group(2)):
                out.append((bool(m.group(1)), path.replace(" ", "")))
        return out

    def _reexports(self, module):
        names = {}
        for is_pub, path in self._uses(module):
            if not is_pub:
                continue
            path, _, alias = path.partition("@")
            names[alias or path.split("::")[-1]] = path
        return names

    def absolute(self, module, path):
        segs = path.split("::")
        if segs[0] == "crate":
            return segs[1:]
        base = list(module)
        while segs and segs[0] in ("super", "self"):
            if segs[0] == "super":
                base = base[:-1]
            segs = segs[1:]
        if path.startswith(("super::", "self::")):
            return base + segs
        if tuple(base + segs[:1]) in self.files:
            return base + segs  # a child module named without `self::`
        return None  # an external crate or std

    def resolve(self, segs, seen=0):
        """The file module that defines the item at absolute path `segs`."""
        if seen > 8:
            return None
        for n in range(len(segs), -1, -1):
            mod = tuple(segs[:n])
            if mod in self.files:
                rest = segs[n:]
                if rest and rest[0] in self.reexports[mod]:
                    target = self.absolute(mod, self.reexports[mod][rest[0]])
                    if target is not None and tuple(target[:-1]) != mod:
                        inner = self.resolve(target + rest[1:], seen + 1)
                        if inner is not None:
                            return inner
                return mod
        return None

    def edges(self):
        graph = {m: set() for m in self.files}
        for m in self.files:
            paths = [p.partition("@")[0] for _, p in self._uses(m)]
            paths += re.findall(r"\b(?:crate|super)(?:::" + IDENT + ")+", self.code[m])
            for p in paths:
                segs = self.absolute(m, p)
                if segs is None:
                    continue
                target = self.resolve(segs)
                # A parent's `mod child;` is not an import; a child naming its parent is.
                if target is not None and target != m:
                    graph[m].add(target)
        return graph

    def circles(self):
        graph = self.edges()
        index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]

        def visit(v):
            index[v] = low[v] = counter[0]
            counter[0] += 1
            stack.append(v)
            on.add(v)
            for w in graph[v]:
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
        for v in graph:
            if v not in index:
                visit(v)
        return out

    def root_names(self):
        text = self.code[()]
        # Items inside inline modules (`pub mod limits { ... }`) are not at the root.
        out, i = [], 0
        for m in re.finditer(r"\bmod\s+" + IDENT + r"\s*\{", text):
            if m.start() < i:
                continue
            depth, j = 0, m.end() - 1
            while j < len(text):
                depth += {"{": 1, "}": -1}.get(text[j], 0)
                if depth == 0:
                    break
                j += 1
            out.append(text[i : m.end()])
            i = j + 1
        text = "".join(out) + text[i:]
        names = set()
        hidden = set(m.end() for m in re.finditer(r"#\[doc\(hidden\)\]\s*", text))
        for m in re.finditer(r"pub\s+use\s+([^;]+);", text):
            if m.start() in hidden:
                continue
            for path in expand_use(m.group(1)):
                path, _, alias = path.partition("@")
                names.add(alias or path.split("::")[-1])
        for m in re.finditer(
            r"pub\s+(?:mod|fn|struct|enum|trait|const|static|type|async\s+fn)\s+(" + IDENT + ")", text
        ):
            if m.start() in hidden:
                continue
            names.add(m.group(1))
        for m in re.finditer(r"#\[macro_export\]\s*macro_rules!\s*(" + IDENT + ")", text):
            names.add(m.group(1) + "!")
        return sorted(names)

    def long_functions(self):
        out = []
        for m, f in self.files.items():
            lines = self.text[m].splitlines()
            i = 0
            while i < len(lines):
                sig = re.match(r"\s*(?:pub(?:\([^)]*\))?\s+)?(?:const\s+)?(?:async\s+)?(?:unsafe\s+)?fn\s+(" + IDENT + ")", lines[i])
                if not sig:
                    i += 1
                    continue
                depth, opened, j = 0, False, i
                while j < len(lines):
                    code = re.sub(r'"(?:\\.|[^"\\])*"', '""', re.sub(r"//.*", "", lines[j]))
                    code = re.sub(r"'(?:\\.|[^'\\])'", "''", code)
                    for ch in code:
                        if ch == "{":
                            depth, opened = depth + 1, True
                        elif ch == "}":
                            depth -= 1
                    if not opened and code.rstrip().endswith(";"):
                        break
                    if opened and depth <= 0:
                        break
                    j += 1
                length = j - i + 1
                if opened and length > FN_LIMIT:
                    out.append((f, sig.group(1), length))
                i = i + 1 if not opened else i + 1
            # nested functions are counted on their own as well
        return out

    def big_files(self):
        return [(f, code_lines(self.text[m])) for m, f in self.files.items() if code_lines(self.text[m]) > FILE_LIMIT]

    def undocumented(self):
        out = []
        for f in sorted(self.src.rglob("*.rs")):
            head = f.read_text().lstrip()
            if head.startswith("//!") or head.startswith("#![doc"):
                continue
            out.append(f)
        return out


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    details = "--details" in sys.argv
    repo = Path(args[0] if args else Path(__file__).resolve().parent.parent)
    total = {"names": 0, "circles": 0, "files": 0, "fns": 0, "undoc": 0}
    print(f"{'crate':<22} {'root names':>10} {'circles':>8} {'files>600':>10} {'fns>100':>8} {'no //!':>7}")
    for root in sorted((repo / "crates").iterdir()):
        if not (root / "src" / "lib.rs").is_file():
            continue
        c = Crate(root)
        names, circles = c.root_names(), c.circles()
        files, fns, undoc = c.big_files(), c.long_functions(), c.undocumented()
        print(f"{root.name:<22} {len(names):>10} {len(circles):>8} {len(files):>10} {len(fns):>8} {len(undoc):>7}")
        for key, value in zip(total, (names, circles, files, fns, undoc)):
            total[key] += len(value)
        if details:
            for circle in circles:
                print("    circle:", " <-> ".join("/".join(m) or "lib" for m in circle))
            for f, n in files:
                print(f"    file: {f.relative_to(repo)} {n} code lines")
            for f, name, n in fns:
                print(f"    fn: {f.relative_to(repo)} {name} {n} lines")
            for f in undoc:
                print(f"    no //!: {f.relative_to(repo)}")
    print(f"{'total':<22} {total['names']:>10} {total['circles']:>8} {total['files']:>10} {total['fns']:>8} {total['undoc']:>7}")


if __name__ == "__main__":
    main()
