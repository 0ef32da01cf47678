"""labkit's layout: layers that point one way, no import circles, small modules (read with ast).

Nothing here imports labkit: the import graph is read from the source, so a lazy import inside
a function counts as much as one at the top of a file.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PKG = ROOT / "labkit"

# Lowest layer first. A module may import its own package and any lower layer; the lab topics
# (one layer) may not import each other; the course machinery may import everything.
LAYERS: list[tuple[str, ...]] = [
    ("runtime",),
    ("gpt",),
    ("measure",),
    ("matmul", "sharding", "precision", "export", "cost"),
    ("course",),
]
LAYER_OF = {pkg: i for i, layer in enumerate(LAYERS) for pkg in layer}
FACADE = "labkit"  # labkit/__init__.py: setup(), record(): may import any layer, imported by none
MAX_LINES = 400
GRAB_BAGS = {"utils", "util", "helpers", "misc", "common"}


def module_name(path: Path, root: Path = ROOT) -> str:
    """labkit/sharding/layouts.py -> 'labkit.sharding.layouts'; a package's __init__ -> the package."""
    parts = list(path.relative_to(root).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules(root: Path = PKG) -> dict[str, Path]:
    """Every module of the package under ``root``, by dotted name."""
    return {module_name(p, root.parent): p for p in sorted(root.rglob("*.py")) if "__pycache__" not in p.parts}


def resolve(name: str, mods: dict[str, Path]) -> str:
    """The module an imported dotted name lives in: itself if a module, else its parent."""
    while name not in mods and "." in name:
        name = name.rsplit(".", 1)[0]
    return name


def imports(path: Path, mods: dict[str, Path]) -> list[tuple[str, str, int]]:
    """(imported module, the name as written, line) for every labkit import in ``path``."""
    me = next(m for m, p in mods.items() if p == path)
    here = me if path.name == "__init__.py" else me.rsplit(".", 1)[0]
    out = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            out += [(resolve(a.name, mods), a.name, node.lineno) for a in node.names if a.name.split(".")[0] == "labkit"]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: from . import x / from .x import y
                anchor = here.rsplit(".", node.level - 1)[0] if node.level > 1 else here
                base = f"{anchor}.{base}" if base else anchor
            if base.split(".")[0] != "labkit":
                continue
            for a in node.names:  # `from labkit.sharding import layouts` imports a module
                full = f"{base}.{a.name}"
                out.append((resolve(full if full in mods else base, mods), f"{base}.{a.name}", node.lineno))
    return out


def graph(root: Path = PKG) -> dict[str, list[tuple[str, str, int]]]:
    """{module: [(imported module, name as written, line)]} over labkit, self-imports dropped."""
    mods = modules(root)
    return {m: [e for e in imports(p, mods) if e[0] != m] for m, p in mods.items()}


def package_of(mod: str) -> str:
    parts = mod.split(".")
    return parts[1] if len(parts) > 1 else FACADE


def forbidden(src: str, dst: str) -> str | None:
    """Why ``src`` may not import ``dst``; None if it may."""
    a, b = package_of(src), package_of(dst)
    if a == b or a == FACADE:
        return None
    if b == FACADE:
        return "only the notebooks import the labkit facade; import the module itself"
    if a not in LAYER_OF or b not in LAYER_OF:
        return f"package {a if a not in LAYER_OF else b!r} is in no layer; add it to LAYERS in tests/test_layout.py"
    la, lb = LAYER_OF[a], LAYER_OF[b]
    if lb > la:
        return f"{a} (layer {la}) may not import {b} (layer {lb}): layers point down only"
    if lb == la:
        return f"lab topics do not import each other ({a} -> {b}): move the shared part down a layer"
    return None


def cycles(g: dict[str, list[tuple[str, str, int]]]) -> list[list[str]]:
    """Every import circle, each as the modules around it (Tarjan's strongly connected components)."""
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w, _, _ in g.get(v, []):
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

    for v in sorted(g):
        if v not in index:
            visit(v)
    return out


def describe_cycle(comp: list[str], g: dict[str, list[tuple[str, str, int]]], root: Path = PKG) -> str:
    mods = modules(root)
    edges = [f"{mods[a].relative_to(root.parent)}:{line} imports {name}"
             for a in comp for b, name, line in g[a] if b in comp]
    return "import circle " + " <-> ".join(comp) + ":\n  " + "\n  ".join(edges)


# ------------------------------------------------------------------------------- the checks


def test_layers_point_one_way() -> None:
    g, mods = graph(), modules()
    bad = [f"{mods[src].relative_to(ROOT)}:{line} imports {name}: {why}"
           for src, edges in g.items() for dst, name, line in edges
           if (why := forbidden(src, dst))]
    assert not bad, "\n".join(bad)


def test_no_import_circles() -> None:
    g = graph()
    found = cycles(g)
    assert not found, "\n".join(describe_cycle(c, g) for c in found)


def test_every_package_is_in_a_layer_and_documents_its_modules() -> None:
    for pkg in sorted(p for p in PKG.iterdir() if (p / "__init__.py").exists()):
        assert pkg.name in LAYER_OF, f"labkit/{pkg.name} is in no layer of tests/test_layout.py"
        doc = ast.get_docstring(ast.parse((pkg / "__init__.py").read_text())) or ""
        assert "lab" in doc.splitlines()[0].lower(), f"labkit/{pkg.name}/__init__.py: first line names no lab"
        for child in sorted(pkg.iterdir()):
            name = child.stem if child.suffix == ".py" else child.name
            if name.startswith("__") or not (child.suffix == ".py" or (child / "__init__.py").exists()):
                continue
            assert f"``{name}``" in doc, f"labkit/{pkg.name}/__init__.py does not list ``{name}``"


def test_modules_are_small_and_named_by_concept() -> None:
    too_long = {str(p.relative_to(ROOT)): n for p in modules().values()
                if (n := len(p.read_text().splitlines())) > MAX_LINES}
    assert not too_long, f"modules over {MAX_LINES} lines (split by concept): {too_long}"
    bags = [str(p.relative_to(ROOT)) for p in modules().values() if p.stem in GRAB_BAGS]
    assert not bags, f"grab-bag modules (name them by what they do): {bags}"


def test_tests_mirror_the_packages() -> None:
    # tests/<package>/test_<module>.py for a module labkit/<package>/<module>.py
    stray = []
    for t in sorted((ROOT / "tests").rglob("test_*.py")):
        rel = t.relative_to(ROOT / "tests")
        if len(rel.parts) == 1:
            continue  # course-wide tests: the labs, this layout
        target = PKG.joinpath(*rel.parts[:-1]) / (t.stem.removeprefix("test_") + ".py")
        if not target.exists() and not PKG.joinpath(*rel.parts[:-1], t.stem.removeprefix("test_")).is_dir():
            stray.append(f"tests/{rel.as_posix()} (no labkit/{target.relative_to(PKG).as_posix()})")
    assert not stray, "tests that mirror no module: " + ", ".join(stray)


# ------------------------------------------------------------------ the checks can fail


def _tree(tmp: Path, files: dict[str, str]) -> Path:
    for rel, text in {"labkit/__init__.py": "", **files}.items():
        (tmp / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp / rel).write_text(text)
    return tmp / "labkit"


def test_a_circle_is_found_and_named(tmp_path: Path) -> None:
    root = _tree(tmp_path, {
        "labkit/cost/__init__.py": "",
        "labkit/cost/model.py": "def f():\n    from labkit.cost import claims  # lazy still counts\n",
        "labkit/cost/claims.py": "from labkit.cost.model import f\n",
        "labkit/cost/routing.py": "from labkit.cost import model\n",  # not in the circle
    })
    g = graph(root)
    assert cycles(g) == [["labkit.cost.claims", "labkit.cost.model"]]
    text = describe_cycle(cycles(g)[0], g, root)
    assert "labkit/cost/claims.py:1 imports labkit.cost.model.f" in text
    assert "labkit/cost/model.py:2 imports labkit.cost.claims" in text
    assert "routing" not in text


def test_a_forbidden_direction_is_named() -> None:
    assert forbidden("labkit.runtime.device", "labkit.cost.model").startswith("runtime (layer 0) may not import cost")
    assert "do not import each other" in forbidden("labkit.cost.model", "labkit.sharding.layouts")
    assert "facade" in forbidden("labkit.measure.bench", "labkit")
    assert forbidden("labkit.course.cli", "labkit.runtime.device") is None
    assert forbidden("labkit.sharding.layouts", "labkit.gpt.config") is None
    assert "no layer" in forbidden("labkit.newthing.x", "labkit.runtime.device")
