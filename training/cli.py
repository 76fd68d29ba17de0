"""``creditbench``: one command over the project's entry points (the console script of ``pyproject.toml``).

Each subcommand hands its arguments to the module that the workflow rules also run, so
``creditbench report ...`` and ``python -m evaluation.report ...`` are the same code. It lives in
``training`` because ``plan`` and ``run`` reach the training side (``evaluation`` imports no training).
Modules are imported only when their subcommand runs, so ``creditbench --help`` is instant.
"""

from __future__ import annotations

import importlib
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]

COMMANDS: dict[str, tuple[str, str]] = {
    "eval": ("evaluation.harness", "evaluate a model on registered sets: results JSON + per-sample JSONL"),
    "grade": ("evaluation.grading.__main__", "grade a JSONL of prediction/answer pairs with the answer checker"),
    "benchmarks": ("", "list the registered sets, or verify their files (sha256, count)"),
    "plan": ("training.plan", "jobs, tokens, GPU-hours and peak GPU memory of a recipe"),
    "contamination": ("evaluation.contamination", "a model's reconstruction of test problems from their first 60 % "
                      "(vs a shuffled control) beside the sets' n-gram overlap with training data"),
    "report": ("evaluation.report.__main__", "tables (and figures) of a results tree"),
    "compare": ("evaluation.report.compare", "models compared: creditbench eval runs, paired per problem"),
    "regress": ("evaluation.checks.regress", "compare result tables cell by cell against a reference"),
    "run": ("", "run the Snakemake workflow (arguments go to snakemake; default --cores 2)"),
}


def usage() -> str:
    width = max(map(len, COMMANDS))
    lines = ["usage: creditbench COMMAND [ARGS] (creditbench COMMAND --help for its options)", "", "commands:"]
    lines += [f"  {name:<{width}}  {text}" for name, (_, text) in COMMANDS.items()]
    return "\n".join(lines)


def benchmarks(argv: Sequence[str]) -> int:
    """``list`` (name, kind, count, templates, license) or ``verify [NAMES]`` (evaluation.benchmarks)."""
    from evaluation import benchmarks as bm

    if not argv or argv[0] in ("-h", "--help"):
        print("usage: creditbench benchmarks list | verify [--data-dir D] [--gpqa-dir G] [NAMES...]")
        return 0
    if argv[0] == "list":  # the sets `creditbench eval --sets` takes (a generated set is the workflow's own)
        print(f"{'set':<16} {'kind':<5} {'split':<5} {'problems':>9}  {'templates':<28} license")
        for b in bm.BENCHMARKS.values():
            if not b.generated:
                print(f"{b.name:<16} {b.kind:<5} {b.split:<5} {b.count:>9}  {','.join(b.templates):<28} {b.license}")
        print(f"suites: {', '.join(f'{n} ({len(s)})' for n, s in bm.SUITES.items())}")
        return 0
    if argv[0] == "verify":
        return bm.main(list(argv[1:]))
    print(f"creditbench benchmarks: unknown action {argv[0]!r} (list, verify)", file=sys.stderr)
    return 2


RUN_HELP = """usage: creditbench run [SNAKEMAKE ARGS...]

Runs the Snakemake workflow of the current folder (its Snakefile; else the installed checkout's,
{root}) with this interpreter; --cores 2 unless given. Every argument goes to snakemake, e.g.:

  creditbench run                          # the default DAG (config/config.yaml)
  creditbench run -n                       # dry run: the jobs it would run
  creditbench run --configfile config/ci.yaml
  creditbench run --cores all results/default/tables/main.md

snakemake's own options: creditbench run --snakemake-help"""


def run(argv: Sequence[str]) -> int:
    """``snakemake`` in the current folder (a checkout: it has a Snakefile; else the installed checkout) with
    this interpreter; ``--cores 2`` unless given."""
    args = list(argv)
    root = Path.cwd() if (Path.cwd() / "Snakefile").is_file() else REPO_ROOT
    if args[:1] in (["-h"], ["--help"]):
        print(RUN_HELP.format(root=REPO_ROOT))
        return 0
    if args[:1] == ["--snakemake-help"]:
        args = ["--help"]
    elif not any(a in ("-c", "--cores", "-j", "--jobs") or a.startswith("--cores=") for a in args):
        args = ["--cores", "2", *args]
    return subprocess.call([sys.executable, "-m", "snakemake", *args], cwd=root)


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help"):
        print(usage())
        return 0
    name, rest = argv[0], argv[1:]
    if name not in COMMANDS:
        print(f"creditbench: unknown command {name!r}\n\n{usage()}", file=sys.stderr)
        return 2
    if name == "benchmarks":
        return benchmarks(rest)
    if name == "run":
        return run(rest)
    module = importlib.import_module(COMMANDS[name][0])
    sys.argv = [f"creditbench {name}", *rest]  # argparse's prog in the modules' own usage lines
    if name == "eval":
        return int(module.main(rest, prog="creditbench eval") or 0)
    return int(module.main(rest) or 0)


if __name__ == "__main__":
    sys.exit(main())
