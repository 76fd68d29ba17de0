"""The structure stays true: one-way layers (common <- evaluation <- training), no import cycles, small
modules, and torch/sympy-free imports where the jobs need no model (issue 12's rules, enforced)."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PACKAGES = ("common", "evaluation", "training")
# what each layer may import of the project
ALLOWED = {"common": {"common"}, "evaluation": {"common", "evaluation"}, "training": set(PACKAGES)}
MAX_LINES = 600
MAX_LINES_IN = {"evaluation/report": 500, "evaluation/grading": 500}


def project_modules() -> dict[str, Path]:
    mods = {}
    for pkg in PACKAGES:
        for path in sorted((REPO / pkg).rglob("*.py")):
            parts = path.relative_to(REPO).with_suffix("").parts
            name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
            mods[name] = path
    return mods


def _resolve(name: str, path: Path, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    base = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def _call_name(node: ast.Call) -> str:
    f = node.func
    return f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""


def import_edges() -> dict[str, set[str]]:
    """module -> project modules it imports, counting imports inside functions and under TYPE_CHECKING, by
    ``importlib.import_module``/``__import__`` of a literal name, and jobs started with ``-m pkg.mod``."""
    mods = project_modules()
    edges: dict[str, set[str]] = {m: set() for m in mods}
    for name, path in mods.items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            targets = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.Call) and _call_name(node) in ("import_module", "__import__") and node.args:
                targets = [node.args[0].value] if isinstance(node.args[0], ast.Constant) else []
            elif isinstance(node, (ast.List, ast.Tuple)):  # a job started as [python, "-m", "pkg.mod", ...]
                items = [e.value if isinstance(e, ast.Constant) else None for e in node.elts]
                targets = [b for a, b in zip(items, items[1:]) if a == "-m" and isinstance(b, str)]
            elif isinstance(node, ast.ImportFrom):
                module = _resolve(name, path, node)
                targets = [f"{module}.{a.name}" if f"{module}.{a.name}" in mods else module for a in node.names]
            for target in targets:
                while target and target not in mods:  # `import a.b.c` of a non-module attribute: its module
                    target = target.rpartition(".")[0]
                if target and target != name:
                    edges[name].add(target)
    return edges


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index, low, stack, on, out = {}, {}, [], set(), []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(edges[v]):
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

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return out


def test_layers_import_one_way():
    upward = [f"{m} -> {t}" for m, ts in import_edges().items() for t in sorted(ts)
              if t.split(".")[0] not in ALLOWED[m.split(".")[0]]]
    assert not upward, "upward imports (common <- evaluation <- training):\n" + "\n".join(upward)


# inside training: the credit functions <- the loop (phases, rl) <- the offline studies; never the reverse
LOOP = ("training.phases", "training.rl")
FORBIDDEN_INSIDE = {"training.credit": ("training.studies", *LOOP, "training.presets"),
                    "training.phases": ("training.studies",), "training.rl": ("training.studies",)}


def _package_violations(edges: dict[str, set[str]]) -> list[str]:
    return [f"{m} -> {t}" for m, ts in edges.items() for t in sorted(ts)
            for pkg, banned in FORBIDDEN_INSIDE.items()
            if (m == pkg or m.startswith(pkg + ".")) and any(t == b or t.startswith(b + ".") for b in banned)]


def test_credit_loop_and_studies_import_one_way():
    """``training.credit`` never imports the loop or the studies, the loop never the studies (issue 23: they
    imported each other through ``training.credit.analysis`` -> ``training.rl`` -> ``training.credit``)."""
    assert not _package_violations(import_edges()), _package_violations(import_edges())
    assert any(m.startswith("training.studies.") and t in LOOP for m, ts in import_edges().items() for t in ts)


def test_the_package_rule_catches_a_reverse_import():
    edges = {"training.credit.cf": {"training.studies.analysis"}, "training.rl": {"training.credit"},
             "training.studies.analysis": {"training.phases"}}
    assert _package_violations(edges) == ["training.credit.cf -> training.studies.analysis"]


def test_every_project_import_names_a_module_or_an_attribute_of_one():
    """A stale path after a move (``evaluation.generate``) must fail here, not in a job after training."""
    mods = project_modules()
    missing = []
    for name, path in mods.items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and not node.level and (node.module or "").split(".")[0] in PACKAGES:
                if node.module not in mods:
                    missing.append(f"{name}: from {node.module} import ...")
            elif isinstance(node, ast.Import):
                missing += [f"{name}: import {a.name}" for a in node.names
                            if a.name.split(".")[0] in PACKAGES and a.name not in mods]
    assert not missing, "\n".join(missing)


def private_crossings(mods: dict[str, Path] | None = None) -> list[str]:
    """``importer -> module._name`` for every private name (one underscore) that one project module takes from
    another, by ``from m import _x`` or by attribute (``m._x``, ``import m as a; a._x``): a name used across a
    module boundary is part of that module's interface and is spelt public."""
    mods = project_modules() if mods is None else mods
    out = set()
    for name, path in mods.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        aliases: dict[str, str] = {}
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                module = _resolve(name, path, node)
                for a in node.names:
                    if f"{module}.{a.name}" in mods:
                        aliases[a.asname or a.name] = f"{module}.{a.name}"
                    elif module in mods and module != name and re.match(r"_(?!_)", a.name):
                        out.add(f"{name} -> {module}.{a.name}")
            elif isinstance(node, ast.Import):
                aliases.update({a.asname or a.name: a.name for a in node.names if a.name in mods})
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and re.match(r"_(?!_)", node.attr):
                owner = ast.unparse(node.value)
                owner = aliases.get(owner, owner)
                if owner in mods and owner != name:
                    out.add(f"{name} -> {owner}.{node.attr}")
    return sorted(out)


def test_no_private_name_crosses_modules():
    assert not private_crossings(), "make these public or keep them inside:\n" + "\n".join(private_crossings())


def _fake_common(tmp_path: Path, **modules: str) -> dict[str, Path]:
    """A package ``common`` under ``tmp_path`` with the given modules' sources; module name -> path."""
    pkg = tmp_path / "common"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    for stem, src in modules.items():
        (pkg / f"{stem}.py").write_text(src)
    return {"common": pkg / "__init__.py", **{f"common.{n}": pkg / f"{n}.py" for n in modules}}


def test_the_private_name_rule_catches_both_spellings(tmp_path):
    mods = _fake_common(tmp_path, a="_x = 1\n__all__ = []\n", b="from common.a import _x, __all__\n",
                        c="import common.a as m\nfrom common import a\nm._x, a._y, a.__all__\n")
    assert private_crossings(mods) == ["common.b -> common.a._x", "common.c -> common.a._x", "common.c -> common.a._y"]


TOP_LEVEL_MAX = {"evaluation": 12}


def test_package_top_levels_stay_small():
    """``evaluation/`` shows its architecture: its parts are packages (grading, code, report, generation,
    checks, sets), at most 12 modules beside them."""
    for pkg, limit in TOP_LEVEL_MAX.items():
        top = sorted(p.name for p in (REPO / pkg).glob("*.py") if p.name != "__init__.py")
        assert len(top) <= limit, f"{pkg}/ has {len(top)} modules > {limit}: {top}"


def test_no_import_cycles():
    assert not cycles(import_edges()), cycles(import_edges())


def test_the_cycle_finder_finds_a_cycle():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_modules_are_small():
    big = []
    for path in project_modules().values():
        rel = path.relative_to(REPO).as_posix()
        limit = next((n for prefix, n in MAX_LINES_IN.items() if rel.startswith(prefix + "/")), MAX_LINES)
        lines = len(path.read_text(encoding="utf-8").splitlines())
        if lines > limit:
            big.append(f"{rel}: {lines} lines > {limit}")
    assert not big, "\n".join(big)


@pytest.mark.parametrize("modules", [
    "common.config, common.io, common.manifest, common.records, common.runtime",
    "evaluation.grading, evaluation.evaluate, evaluation.code.score, evaluation.report, evaluation.benchmarks",
    "evaluation.scoring, evaluation.driver, evaluation.suites, evaluation.harness",
])
def test_torch_and_sympy_free_imports(modules):
    code = f"import sys, {modules}; print(sorted({{'torch', 'sympy'}} & set(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and out.stdout.strip() == "[]", out.stdout + out.stderr


def test_import_scanner_sees_hidden_imports(tmp_path, monkeypatch):
    """The scanner is only as good as what it counts: a deferred import, a by-name import and a ``-m`` job."""
    _fake_common(tmp_path, a="def f():\n    import importlib\n    return importlib.import_module('common.b')\n",
                 b="import subprocess, sys\nsubprocess.run([sys.executable, '-m', 'common.c'])\n",
                 c="def g():\n    from common import a\n")
    monkeypatch.setattr(sys.modules[__name__], "REPO", tmp_path)
    monkeypatch.setattr(sys.modules[__name__], "PACKAGES", ("common",))
    edges = import_edges()
    assert edges["common.a"] == {"common.b"} and edges["common.b"] == {"common.c"} and edges["common.c"] == {"common.a"}
    assert cycles(edges) == [["common.a", "common.b", "common.c"]]


def test_ruff_clean():
    """``ruff check`` (rules and line length in pyproject.toml) passes on the whole tree."""
    out = subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache", "."], cwd=REPO, capture_output=True,
                         text=True, timeout=300)
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-2000:]


def test_readme_file_map_names_every_module():
    """The README's file map stays current: each module appears by its name (a ``stem*`` entry covers a family)."""
    text = (REPO / "README.md").read_text(encoding="utf-8").split("## File map", 1)[1]
    names = set(re.findall(r"[A-Za-z_]\w*\*?", text))
    families = [n[:-1] for n in names if n.endswith("*")]
    missing = [rel for name, path in project_modules().items()
               if path.stem not in ("__init__", "__main__") and path.stem not in names
               and not any(path.stem.startswith(f) for f in families)
               for rel in [path.relative_to(REPO).as_posix()]]
    assert not missing, f"README file map does not name: {missing}"


def test_readme_is_short():
    """At most 180 lines: measurement logs belong in results/MEASUREMENTS.md."""
    lines = (REPO / "README.md").read_text(encoding="utf-8").splitlines()
    assert len(lines) <= 180, f"README.md has {len(lines)} lines > 180; move detail to results/MEASUREMENTS.md"


def test_the_native_loop_reads_as_one_loop():
    """``training.rl.train`` stays one readable loop (issue 37: about 110 lines), resume, the critic's wiring and
    the update's micro-batching living beside it (``checkpoint.open_run``, ``critic.make_critic``,
    ``phases.update_policy``)."""
    tree = ast.parse((REPO / "training" / "rl.py").read_text(encoding="utf-8"))
    train = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "train")
    assert train.end_lineno - train.lineno + 1 <= 110, train.end_lineno - train.lineno + 1
