"""The workflow's evaluation plan (config ``eval.suites``): which sets each suite runs (checked at DAG time,
before any training), which checkpoints it evaluates and where their summaries go. The jobs themselves are
``python -m evaluation.evaluate generate|score`` (thin CLIs over ``evaluation.driver``).

Output tree: ``OUT/eval/<suite>/<method>/seed<s>/step<n>/<set>.{raw.jsonl,gen.json,summary.json,samples.jsonl}``.
The shared SFT start (``sft``, step 0) is one model, so it is evaluated once per suite and set, sampled with the
suite's first seed (the folder's ``seed<s>``); every table and curve reads that one evaluation.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence

from common.config import Config, ConfigError, SuiteConfig
from common.io import sha256_file
from evaluation import driver
from evaluation.benchmarks import benchmark_file, expand_sets, get_benchmark
from evaluation.driver import Sampling
from evaluation.eval_checks import UsageError

log = logging.getLogger(__name__)

MAIN_SUITE = "curve"
"""The suite of OUT/tables (main table, learning curves) and of ``seeds: auto``'s looks."""


def tables_dir(suite: str) -> str:
    """The suite's tables folder under OUT: ``tables`` for the main suite, else ``<suite>_tables``."""
    return "tables" if suite == MAIN_SUITE else f"{suite}_tables"


def available_sets(cfg: Config, name: str, *, explicit: bool = False) -> tuple[str, ...]:
    """Suite ``name``'s sets (suites of sets expanded) without external sets (GPQA) whose file is not on this
    machine: left out with a warning when the list is the built-in default (``explicit`` False); a set the
    config names explicitly fails instead (:class:`ConfigError`): a table without it would silently answer
    another question. ``limit_per_set`` keys must be among the sets."""
    suite, key = cfg.eval.suites[name], f"config key 'eval/suites/{name}"
    sets = expand_sets(suite.sets)  # suite names (evaluation.benchmarks.SUITES) as their sets
    if extra := [s for s in suite.limit_per_set if s not in sets]:
        raise ConfigError(f"{key}/limit_per_set': {extra} not in its sets {list(sets)}")
    out = []
    for set_name in sets:
        try:
            bench = get_benchmark(set_name)
        except KeyError as err:
            raise ConfigError(f"{key}/sets': {err.args[0]}") from None
        path = None if bench.generated else benchmark_file(bench, data_dir=cfg.data.benchmarks_dir,
                                                           gpqa_dir=cfg.data.gpqa_dir)
        if bench.external and not path.is_file():
            if explicit:
                raise ConfigError(f"{key}/sets': {set_name} file {path} not found; set CREDITBENCH_GPQA_DIR or "
                                  f"data.gpqa_dir to its folder, or drop {set_name}")
            log.warning("eval suite %s: %s left out: %s not found (data.gpqa_dir)", name, set_name, path)
            continue
        out.append(set_name)
    return tuple(out)


def plan_sets(cfg: Config, given: Mapping) -> dict[str, tuple[str, ...]]:
    """suite -> its available sets, for every suite with any (``given``: the config as written, to tell an
    explicit ``sets`` from the built-in default); every data file and sampling knob checked here."""
    written = (given.get("eval") or {}).get("suites") or {}
    plan = {name: available_sets(cfg, name, explicit="sets" in (written.get(name) or {}))
            for name in cfg.eval.suites}
    check_data_files(cfg, plan)
    return {name: sets for name, sets in plan.items() if sets}


def check_data_files(cfg: Config, plan: Mapping[str, Sequence[str]]) -> None:
    """At DAG time, before any training: every benchmark the config uses (each suite's sets,
    train_data.dataset) has its file with the registry's sha256, and each suite's sampling knobs pass
    :meth:`evaluation.driver.Sampling.check`."""
    used = [(f"eval/suites/{suite}/sets", n) for suite, sets in plan.items() for n in sets]
    if cfg.train_data.dataset:
        used.append(("train_data/dataset", cfg.train_data.dataset))
    for key, name in used:
        try:
            bench = get_benchmark(name)
        except KeyError as err:
            raise ConfigError(f"config key '{key}': {err.args[0]}") from None
        if bench.generated:
            continue
        path = benchmark_file(bench, data_dir=cfg.data.benchmarks_dir, gpqa_dir=cfg.data.gpqa_dir)
        if not path.is_file():
            raise ConfigError(f"config key '{key}': {name} file {path} not found (data.benchmarks_dir / "
                              "data.gpqa_dir / CREDITBENCH_GPQA_DIR)")
        if bench.sha256 is not None and (actual := sha256_file(path)) != bench.sha256:
            raise ConfigError(f"config key '{key}': {path} has sha256 {actual[:12]}..., the registry pins "
                              f"{bench.sha256[:12]}...; restore the file (git checkout / re-download)")
    for suite, sets in plan.items():
        try:
            Sampling.from_suite(cfg.eval.suites[suite], 0).check(sets, driver.config_key(f"eval/suites/{suite}"))
        except UsageError as err:
            raise ConfigError(str(err)) from None


def suite_seeds(cfg: Config, suite: SuiteConfig, planned: Mapping[str, int] | None = None) -> dict[str, list[int]]:
    """method -> RL seeds whose checkpoints the suite evaluates (``planned``: ``seeds: auto``'s method ->
    seeds so far, for a suite on ``all`` seeds)."""
    methods = suite.methods if suite.methods is not None else cfg.methods
    if suite.seeds == "all":
        return {m: list(range(1, planned[m] + 1)) if planned else list(cfg.seeds) for m in methods}
    seeds = list(cfg.seeds[:1]) if suite.seeds == "first" else list(suite.seeds)
    return dict.fromkeys(methods, seeds)


def checkpoints(cfg: Config, name: str, planned: Mapping[str, int] | None = None) -> list[tuple[str, int, int]]:
    """(method, seed, step) the suite evaluates: the SFT start once (``sft``, step 0, sampled with the suite's
    first seed), and each method's kept RL checkpoints (``every``) or last step (``final``) on its seeds."""
    suite = cfg.eval.suites[name]
    per_method = suite_seeds(cfg, suite, planned)
    steps = sorted({*(cfg.rl.checkpoint_steps if "every" in suite.checkpoints else ()),
                    *((cfg.rl.steps,) if "final" in suite.checkpoints else ())})
    seeds = sorted({s for ss in per_method.values() for s in ss})
    out = [("sft", seeds[0], 0)] if "sft" in suite.checkpoints and seeds else []
    return out + [(m, s, step) for m, ss in per_method.items() for s in ss for step in steps]
