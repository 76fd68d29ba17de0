"""Hand-kept copies cannot drift (issue 23): the config keys a rule's job reads are those its params hash
(``common.config.RULE_SECTIONS``), the summary keys and verdict reasons have one copy (``common.records``), and
``training/ALGORITHMS.md`` names only presets, functions and files that exist. Each check is shown to fail on a
copy edited alone."""

from __future__ import annotations

import ast
import re
from dataclasses import fields
from pathlib import Path

import pytest
from test_layout import import_edges, project_modules

from common import config as config_module
from common.config import Config

REPO = Path(__file__).resolve().parents[1]
CONFIG_SECTIONS = {f.name for f in fields(Config)} - {"raw"}
# Upstream rules' keys arrive as the job's inputs (their outputs), so a job may read them unlisted.
UPSTREAM = {"build_model": ("make_data",), "sft": ("make_data", "build_model"),
            "rl": ("make_data", "build_model", "sft"), "eval_generate": ("make_data", "build_model", "sft", "rl"),
            "eval_score": ("make_data", "build_model", "sft", "rl"),
            "credit_analysis": ("make_data", "build_model", "sft", "rl"),
            "credit_fidelity": ("make_data", "build_model", "sft", "rl"),
            "real_credit": ("make_data", "build_model", "sft", "rl")}
NEVER_HASHED = {"tracking"}  # where metrics are mirrored (TensorBoard, MLflow): changes no output, reruns nothing
WHOLE_READS = {"runtime"}  # setup_runtime(cfg.runtime): torch_threads only sets the thread count
STOP = {"get", "items", "keys", "values"}  # a mapping method ends the key path


def rule_entry_points() -> dict[str, str]:
    """rule -> the module its shell runs with ``-m`` (rules whose module is a literal name; a rule written once
    per evaluation suite, ``name: f"eval_generate_{_suite}"``, by its name without the suite)."""
    out = {}
    for smk in sorted((REPO / "workflow" / "rules").glob("*.smk")):
        for block in re.split(r"^\s*rule\b", smk.read_text(encoding="utf-8"), flags=re.M)[1:]:
            named = re.match(r":\s*name:\s*f\"([a-z_]+)_\{_suite\}\"", block)
            name = named.group(1) if named else block.split(":", 1)[0].strip()
            module = re.search(r"-m ([a-z_][\w.]*)", block)
            if module and module.group(1) in project_modules():
                out[name] = module.group(1)
    return out


def config_reads(path: Path) -> set[str]:
    """Key paths ``section/key/...`` read as ``cfg.<section>.<key>...`` of a ``Config`` in one module."""
    out = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        parts, n = [], node
        while isinstance(n, ast.Attribute):
            parts.append(n.attr)
            n = n.value
        if not (isinstance(n, ast.Name) and n.id == "cfg" and parts and parts[-1] in CONFIG_SECTIONS):
            continue
        parts = parts[::-1]
        parts = parts[: next((i for i, p in enumerate(parts) if p in STOP), len(parts))]
        out.add("/".join(parts))
    return {c for c in out if not any(o != c and o.startswith(c + "/") for o in out)}


def closure(module: str, edges: dict[str, set[str]]) -> set[str]:
    seen, todo = set(), [module]
    while todo:
        m = todo.pop()
        if m not in seen and not m.startswith("common."):
            seen.add(m)
            todo += sorted(edges.get(m, ()))
    return seen


def unlisted_reads(rule_sections: dict[str, tuple[str, ...]]) -> list[str]:
    """``rule: key (module)`` for every key a rule's job reads that neither it nor an upstream rule hashes."""
    mods, edges, out = project_modules(), import_edges(), []
    for rule, entry in rule_entry_points().items():
        listed = [re.sub(r"/\{\w+\}", "", k) for r in (rule, *UPSTREAM.get(rule, ())) for k in rule_sections.get(r, ())]
        for module in sorted(closure(entry, edges)):
            for key in sorted(config_reads(mods[module])):
                covered = any(key == k or key.startswith(k + "/") for k in listed) or (
                    key in WHOLE_READS and any(k.startswith(key + "/") for k in listed)) or (
                    key.split("/")[0] in NEVER_HASHED)
                if not covered:
                    out.append(f"{rule}: {key} ({module})")
    return out


def test_every_config_key_a_job_reads_is_in_its_rule_sections():
    """Toggling a key a job reads must rerun the job: ``fidelity/grad_snr`` (read by ``training.rl``) was not."""
    assert not unlisted_reads(config_module.RULE_SECTIONS), unlisted_reads(config_module.RULE_SECTIONS)
    rules = {"rl", "sft", "credit_fidelity", "credit_analysis", "eval_generate", "eval_score"}
    assert rules <= set(rule_entry_points())


@pytest.mark.parametrize("rule,key", [("rl", "fidelity/grad_snr"), ("rl", "eval/grader_timeout_s"),
                                      ("credit_fidelity", "fidelity"), ("eval_score", "data")])
def test_the_rule_check_fails_when_a_key_is_dropped(rule, key):
    sections = config_module.RULE_SECTIONS
    edited = dict(sections, **{rule: tuple(k for k in sections[rule] if k != key)})
    assert any(line.startswith(f"{rule}: {key}") for line in unlisted_reads(edited)), unlisted_reads(edited)


# ---- one copy of each stage contract, and every reason a scorer emits is in it ------------------------------
CONTRACTS = ("PHASES", "REASONS", "FAILURE_REASONS", "CODE_ONLY_REASONS", "UNGRADED_REASONS", "SUMMARY_KEYS",
             "DROP_KEYS")


def contract_copies(mods: dict[str, Path]) -> list[str]:
    """Modules other than ``common.records`` that assign a stage contract's name at module level."""
    return [f"{name}: {t.id}" for name, path in mods.items() if name != "common.records"
            for node in ast.parse(path.read_text(encoding="utf-8")).body
            if isinstance(node, (ast.Assign, ast.AnnAssign))
            for t in (node.targets if isinstance(node, ast.Assign) else [node.target])
            if isinstance(t, ast.Name) and t.id in CONTRACTS]


def _literals(value: ast.expr) -> set[str]:
    """The string literals an expression can evaluate to (a literal, either branch of ``a if c else b``)."""
    if isinstance(value, ast.Constant) and isinstance(value.value, str):
        return {value.value}
    if isinstance(value, ast.IfExp):
        return _literals(value.body) | _literals(value.orelse)
    if isinstance(value, ast.BoolOp):
        return set().union(*map(_literals, value.values))
    return set()


def emitted_reasons(mods: dict[str, Path]) -> dict[str, set[str]]:
    """String literals a module gives a verdict reason: ``reason = ...`` / ``reason=...`` values."""
    out: dict[str, set[str]] = {}
    for name, path in mods.items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            value = None
            if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "reason" for t in node.targets):
                value = node.value
            elif isinstance(node, ast.keyword) and node.arg == "reason":
                value = node.value
            if value is not None:
                out.setdefault(name, set()).update(_literals(value))
    return out


def test_stage_contracts_have_one_copy():
    assert not contract_copies(project_modules()), contract_copies(project_modules())


def test_a_second_copy_is_caught(tmp_path):
    fake = tmp_path / "load.py"
    fake.write_text('SUMMARY_KEYS: tuple[str, ...] = ("benchmark",)\n')
    assert contract_copies({"evaluation.report.load": fake}) == ["evaluation.report.load: SUMMARY_KEYS"]


def test_every_emitted_reason_is_a_known_reason():
    """The code scorer's ``crash`` was missing from ``REASONS``; the failures table shows it when it occurs."""
    from common.records import REASONS

    emitted = emitted_reasons(project_modules())
    assert "crash" in emitted["evaluation.scoring"] and "parse_error" in emitted["evaluation.grading.worker"]
    unknown = {m: sorted(r - set(REASONS)) for m, r in emitted.items() if r - set(REASONS)}
    assert not unknown, unknown


# ---- training/ALGORITHMS.md names only what exists -----------------------------------------------------------
CARDS = REPO / "training" / "ALGORITHMS.md"
# authors' code the cards cite by its own paths and names (not this repository's)
EXTERNAL = ("verl/", "backends/", "dp_actor.py", "core_algos.", "np.", "trl/", "GRPOTrainer.")


def _defined(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            for t in node.targets if isinstance(node, ast.Assign) else [node.target]:
                names |= {n.id for n in ast.walk(t) if isinstance(n, ast.Name)}
    return names


def stale_card_names(text: str) -> list[str]:
    """Backticked test names, ``*.py`` files and ``module.name`` references of the cards that resolve to nothing."""
    from training.credit import TOKEN_ADVANTAGES, TOKEN_WEIGHTS
    from training.presets import PRESETS, Preset

    mods = project_modules()
    tests = {p.relative_to(REPO / "tests").as_posix(): p for p in (REPO / "tests").rglob("test_*.py")}
    known = {"knobs": {k for p in PRESETS.values() for k in p.knobs},
             "advantage_knobs": {k for p in PRESETS.values() for k in p.advantage_knobs},
             "outcome_knobs": {k for p in PRESETS.values() for k in p.outcome_knobs},
             "terms_knobs": {k for p in PRESETS.values() for k in p.terms_knobs},
             "critic": {k for p in PRESETS.values() for k in p.critic},
             "token_weights": set(TOKEN_WEIGHTS), "token_advantage": set(TOKEN_ADVANTAGES),
             "preset": {f.name for f in fields(Preset)}
             | {n for n, v in vars(Preset).items() if isinstance(v, property)}}

    def is_test_file(ref: str) -> bool:
        return any(t == ref or t.endswith("/" + ref) for t in tests)

    test_names = {n for p in tests.values() for n in _defined(p) if n.startswith("test_")}
    sections = {f.name: f.type for f in fields(Config)}
    stale = []
    for ref in sorted(set(re.findall(r"`([^`\s]+)`", text))):
        file, _, name = ref.rpartition("::")
        if ref.startswith(EXTERNAL):
            continue
        if file and not is_test_file(file):
            stale.append(ref)
        elif re.fullmatch(r"test_\w+\*?", name):
            if not any(t == name or (name.endswith("*") and t.startswith(name[:-1])) for t in test_names):
                stale.append(ref)
        elif re.fullmatch(r"[\w/]+\.py", ref):
            if not (REPO / ref).exists() and not is_test_file(ref.removeprefix("tests/")) and not any(
                    p.name == ref for p in mods.values()):
                stale.append(ref)
        elif re.fullmatch(r"[a-z_]+(\.[a-z_]+)*\.[A-Za-z_]\w*(\(\w*=?\))?", ref):
            dotted = ref.split("(")[0]
            owner, _, attr = dotted.rpartition(".")
            module_ref = any(m == dotted or m.endswith("." + dotted) for m in mods)
            if module_ref or attr in {"md", "yaml", "sh", "json", "jsonl", "csv"} or attr in known.get(owner, ()):
                continue
            in_module = any((m == owner or m.endswith("." + owner)) and attr in _defined(p) for m, p in mods.items())
            config_key = owner in sections and attr in {f.name for f in fields(getattr(config_module, sections[owner]))}
            if not (in_module or config_key):
                stale.append(ref)
    if "shared/research" in text:
        stale.append("shared/research (a file outside the repository)")
    return stale


def test_algorithm_cards_name_what_exists():
    assert not stale_card_names(CARDS.read_text(encoding="utf-8")), stale_card_names(CARDS.read_text(encoding="utf-8"))


def test_a_stale_card_name_is_caught():
    text = CARDS.read_text(encoding="utf-8") + "\n`credit_cf.cf_with_spans`, `test_no_such_test`, `rl.no_such`\n"
    assert stale_card_names(text)[-3:] != [] and {"credit_cf.cf_with_spans", "test_no_such_test",
                                                   "rl.no_such"} <= set(stale_card_names(text))


def test_every_preset_has_a_card():
    from training.presets import PRESETS

    text = CARDS.read_text(encoding="utf-8")
    missing = [name for name in PRESETS if f"`{name}`" not in text]
    assert not missing, f"presets without a card in training/ALGORITHMS.md: {missing}"


# ------------------------------------------------ training.credit's docstrings vs its modules and the registry


def credit_doc_drift(package_doc: str, module_docs: dict[str, str], registered: dict[str, list[str]]) -> list[str]:
    """What the package docstring's module list and each module docstring's function names miss or name wrongly.

    ``module_docs``: module name -> docstring; ``registered``: module name -> the registered functions it defines."""
    para = next(p for p in package_doc.split("\n\n") if p.startswith("Modules"))
    listed = set(re.findall(r"``(\w+)``", para.split(":", 1)[1]))
    out = [f"module {m} not in the package docstring" for m in sorted(set(module_docs) - listed)]
    out += [f"package docstring names {m}, no such module" for m in sorted(listed - set(module_docs))]
    for module, names in sorted(registered.items()):
        out += unnamed(module, module_docs.get(module, ""), names)
    return out


def unnamed(module: str, doc: str, names: list[str]) -> list[str]:
    """The registered ``names`` that ``module``'s docstring does not name (as ``name`` or :func:`name`)."""
    return [f"{module}'s docstring does not name {n!r}" for n in names if f"``{n}``" not in doc
            and f":func:`{n}`" not in doc]


def _registered_by_module() -> dict[str, list[str]]:
    import training.credit  # noqa: F401  (imports every registering module)
    from training.registry import KINDS, methods

    registered: dict[str, list[str]] = {}
    for kind in KINDS:
        for name, m in methods(kind).items():
            registered.setdefault(m.fn.__module__, []).append(name)
    return registered


def _credit_docs() -> tuple[str, dict[str, str], dict[str, list[str]]]:
    import training.credit as credit

    package = REPO / "training" / "credit"
    docs = {p.stem: ast.get_docstring(ast.parse(p.read_text(encoding="utf-8"))) or ""
            for p in package.glob("*.py") if p.stem != "__init__"}
    registered = {module.rsplit(".", 1)[1]: names for module, names in _registered_by_module().items()
                  if module.startswith("training.credit.")}
    return credit.__doc__ or "", docs, registered


def test_the_credit_docstrings_name_every_module_and_registered_function():
    package_doc, docs, registered = _credit_docs()
    assert len(registered) >= 6 and sum(map(len, registered.values())) >= 14  # the registry was read
    assert not credit_doc_drift(package_doc, docs, registered), credit_doc_drift(package_doc, docs, registered)
    outside = {m: names for m, names in _registered_by_module().items() if not m.startswith("training.credit.")}
    assert set(outside) == {"training.losses"}, outside  # a new registering module: give it this check
    losses_doc = ast.get_docstring(ast.parse((REPO / "training" / "losses.py").read_text(encoding="utf-8"))) or ""
    assert not unnamed("training.losses", losses_doc, outside["training.losses"])


def test_a_stale_credit_docstring_is_caught():
    package_doc, docs, registered = _credit_docs()
    assert credit_doc_drift(package_doc, {**docs, "newmod": ""}, registered) == [
        "module newmod not in the package docstring"]
    stale = {**docs, "tree": docs["tree"].replace("``tempo``", "TEMPO")}
    assert credit_doc_drift(package_doc, stale, registered) == ["tree's docstring does not name 'tempo'"]
    assert credit_doc_drift(package_doc, {**docs, "new": ""}, {**registered, "new": ["brand_new"]}) == [
        "module new not in the package docstring", "new's docstring does not name 'brand_new'"]
    gone = {m: d for m, d in docs.items() if m != "gradsnr"}
    assert credit_doc_drift(package_doc, gone, registered) == ["package docstring names gradsnr, no such module"]
