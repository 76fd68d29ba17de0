"""Throughput benchmark: this checker vs Math-Verify on the same realistic (response, gold) pairs.

``python -m evaluation.checks.bench_grader [--n 5000] [--seed 0] [--workers N] [--cases DIR]
[--adversarial F] [--load L] [--repeat R]``

Pairs are generated deterministically from the real golds of MATH-500, GSM8K (test) and AIME 24/25/26:
correct answers in several output formats (``\\boxed{}``, "The final answer is", ``####``, ``\\dfrac``,
thousands commas, ``x =``, units, AIME leading zeros), perturbed (wrong) answers and responses with no
answer, inside chain-of-thought text of realistic length, plus the habits of small instruct models
that issue 18 reports from real generations (SmolLM2-135M-Instruct on MATH-500/GSM8K): the parroted
``\\boxed{}`` instruction, a closing sentence instead of a box, a leaked chat-template turn, a truncated
``<think>``.  ``--cases DIR`` also prints both checkers' accuracy and throughput on the case tables
(``*.tsv``) in DIR (hard inputs: ``cases_throughput_ratio_vs_math_verify <x>``).
Both checkers run single-threaded in this process (ours with its sympy worker subprocess);
Math-Verify gets the gold wrapped in ``$...$`` as recommended.  Prints pairs/s for each checker,
``throughput_ratio_vs_math_verify <x>`` and the agreement count.  ``--adversarial F`` mixes in a fraction F of
inputs built to be slow (:data:`_ADVERSARIAL`, dataset ``adv``) and ``--load L`` runs L busy processes beside
both timed loops: the ratio on a mix with adversarial inputs under load, and how many verdicts of ours took
longer than ``--timeout`` (wall clock around each call), with how far each ``timeout`` verdict ran past its budget.
``--repeat R`` times R rounds, alternating which checker goes first, each from empty caches and a fresh worker, and
prints the ratio of each round (its spread).
"""

from __future__ import annotations

import argparse
import json
import logging
import random
import re
import statistics
import time
from collections import Counter
from pathlib import Path

from evaluation.grading import GRADER_VERSION, grade, grade_many
from evaluation.grading.extract import prepare_gold
from evaluation.grading.normalize import normalize_answer, simple_number
from evaluation.grading.pool import close_workers

DATA = Path(__file__).resolve().parents[2] / "data" / "benchmarks"
_FILLER = "Let me work through this step by step.\nFirst we simplify the expression and check the cases.\n"
_COT = (
    "We are given the problem and need to find the requested quantity. Write $a = 3$ and $b = 4$, so that "
    "$a^2 + b^2 = 9 + 16 = 25$ and $\\sqrt{25} = 5$.\n\nNext, substitute into the expression: "
    "$$\\frac{2a + b}{a - 1} = \\frac{10}{2} = 5.$$\nChecking the boundary cases $n = 1, 2, 3$ gives "
    "$1, 4, 9$, consistent with $n^2$.\n\n"
)
_WARM = (("\\boxed{x+1}", "1+x"), ("\\boxed{-x > -3}", "x < 3"), ("\\boxed{y = 2x - 3}", "y = 2x + 3"),
         ("\\boxed{\\sqrt{2\\sqrt{2}+3}}", "\\sqrt{3+2\\sqrt{2}}"), ("\\boxed{(x+1)^2}", "x^2+2x+1"))
_ECHO = "Please reason step by step, and put your final answer within \\boxed{}.\n"


# Inputs built to be slow (our own, in the spirit of the linear-time tests and public checker issues): huge
# strings for extraction, and answers whose symbolic comparison explodes (power towers, high powers, long
# sums, deep nesting, an integral) for the sympy path.  Each checker spends at most its timeout on one.
_ADVERSARIAL = (
    ("\\boxed{" * 50_000, "1"), ("{" * 50_000 + "\\boxed{1}", "1"), ("1, " * 50_000, "1"),
    ("\\frac{" * 20_000, "1"), ("The answer is " + "(" * 20_000, "1"), ("$" * 50_000, "1"),
    ("\\boxed{9^{9^{9^{9}}}}", "1"), ("\\boxed{10^{10^{10}}}", "10"), ("\\boxed{2^{2^{2^{2^{2^{2}}}}}}", "65536"),
    ("\\boxed{(x+1)^{200} - (x-1)^{200}}", "x^2+1"), ("\\boxed{\\sin(x)^{100} + \\cos(x)^{100}}", "1"),
    ("\\boxed{" + "+".join(f"x^{{{i}}}" for i in range(150)) + "}", "\\frac{x^{150}-1}{x-1}"),
    ("\\boxed{(" + "x+" * 60 + "1)^{30}}", "y"), ("\\boxed{" + "(" * 40 + "1" + ")" * 40 + "}", "1"),
    ("\\boxed{x^{x^{x^{x^{x}}}} = 2}", "x=\\sqrt{2}"), ("\\boxed{\\int_0^1 e^{-x^2} dx}", "0.746824"),
    ("\\boxed{\\frac" + "{1}" * 130 + "}", "1"), ("\\boxed{1000!}", "1000"),
)


def mix_adversarial(pairs: list[tuple[str, str, str]], fraction: float) -> list[tuple[str, str, str]]:
    """``pairs`` with adversarial ones (dataset ``adv``) spread evenly, ``fraction`` of the result."""
    if fraction <= 0:
        return pairs
    k = max(1, round(len(pairs) * fraction))
    out = list(pairs)
    for i in range(k):
        r, g = _ADVERSARIAL[i % len(_ADVERSARIAL)]
        out.insert(round((i + 0.5) * len(out) / k), (r, g, "adv"))
    return out


def _busy_loops(n: int) -> list:
    """``n`` busy processes at nice 5 beside the bench (the load of a shared machine); the caller kills them."""
    import subprocess
    import sys

    return [subprocess.Popen(["nice", "-n", "5", sys.executable, "-c", "while True: pass"]) for _ in range(n)]


def _load(path: Path, key: str) -> list[str]:
    if not path.exists():
        return []
    return [json.loads(line)[key] for line in path.open() if line.strip()]


def _perturb(gold: str, rng: random.Random) -> str:
    """A wrong answer close to the gold: one digit changed, else a sign flipped or elements swapped."""
    digits = [m.start() for m in re.finditer(r"\d", gold)]
    if digits:
        i = rng.choice(digits)
        return gold[:i] + str((int(gold[i]) + rng.randint(1, 8)) % 10) + gold[i + 1 :]
    if gold.startswith("-"):
        return gold[1:]
    return "-" + gold if len(gold) < 40 else gold + "+1"


def _reformat(gold: str, rng: random.Random) -> str:
    """The same answer written differently."""
    g = gold
    if re.fullmatch(r"\d{4,}", g):
        return f"{int(g):,}"
    m = re.fullmatch(r"\\frac\{(\d+)\}\{(\d+)\}", g)
    if m:
        return rng.choice([f"\\dfrac{{{m.group(1)}}}{{{m.group(2)}}}", f"{m.group(1)}/{m.group(2)}"])
    if re.fullmatch(r"-?\d+", g):
        return rng.choice([f"x = {g}", f"{g}.0", f"{g} \\text{{ units}}"])
    if g.startswith("\\text{"):
        return g[6:-1] if g.endswith("}") else g
    if "," in g and not g.startswith("\\begin"):
        return g.replace(" ", "").replace(",", ", ")
    return g.replace("\\frac", "\\dfrac").replace(" ", "")


def build_pairs(n: int, seed: int = 0) -> list[tuple[str, str, str]]:
    """Deterministic (response, gold, dataset) triples; at least ``n`` before truncation."""
    rng = random.Random(seed)
    math_golds = _load(DATA / "math500" / "test.jsonl", "answer")
    gsm_golds = [a.rsplit("####", 1)[1].strip() for a in _load(DATA / "gsm8k" / "test.jsonl", "answer")]
    aime_golds = [a for y in ("aime24", "aime25", "aime26") for a in _load(DATA / y / "test.jsonl", "answer")]
    if not math_golds:
        raise SystemExit(f"no MATH-500 data under {DATA}")
    pairs: list[tuple[str, str, str]] = []
    for g in math_golds:
        pairs.append((f"{_FILLER}Therefore the answer is $\\boxed{{{g}}}$.", g, "math"))
        pairs.append((f"{_FILLER}Final Answer: The final answer is ${g}$. I hope it is correct.", g, "math"))
        pairs.append((f"<think>{_FILLER}</think>\nSo we get $\\boxed{{{_reformat(g, rng)}}}$", g, "math"))
        pairs.append((f"{_FILLER}Thus $\\boxed{{{_perturb(g, rng)}}}$.", g, "math"))
        pairs.append((f"{_FILLER}**Answer:** {_perturb(g, rng)}", g, "math"))
        pairs.append((f"{_FILLER}I am not sure how to finish", g, "math"))
        pairs.append((f"{_ECHO}{_COT}So the answer is ${g}$.", g, "math"))
        pairs.append((f"{_COT}Therefore, we get $\\boxed{{{g}}}$.<|im_end|>\n<|im_start|>user\nNext: $\\boxed{{7}}$",
                      g, "math"))
        pairs.append((f"<think>{_COT}so maybe $\\boxed{{{g}}}$ but let me check", g, "math"))
        pairs.append((f"{_COT}Hence $\\boxed{{{_perturb(_reformat(g, rng), rng)}}}$.", g, "math"))
    for g in gsm_golds:
        pairs.append((f"{_FILLER}She makes ${g} every day.\n#### {g}", g, "gsm8k"))
        pairs.append((f"{_FILLER}The answer is $\\boxed{{{_reformat(g, rng)}}}$.", g, "gsm8k"))
        pairs.append((f"{_FILLER}#### {_perturb(g, rng)}", g, "gsm8k"))
        pairs.append((f"{_ECHO}{_COT}So she pays ${g} in total.", g, "gsm8k"))
    for g in aime_golds:
        pairs.append((f"{_FILLER}The answer is $\\boxed{{{int(g):03d}}}$.", g, "aime"))
        pairs.append((f"{_FILLER}$\\boxed{{{_perturb(g, rng)}}}$", g, "aime"))
    rng.shuffle(pairs)
    while len(pairs) < n:
        pairs = pairs + pairs[: n - len(pairs)]
    return pairs[:n]


def _mv_grade(response: str, gold: str) -> bool:
    from math_verify import parse, verify

    try:
        return bool(verify(parse(f"${gold}$"), parse(response)))
    except Exception:
        return False


def case_accuracy(cases: Path, timeout_s: float) -> None:
    """Both checkers' accuracy and time on the case tables (expected reason "correct" = accept, else reject):
    hard inputs, so the throughput ratio printed per table is the one on hard outputs."""
    import csv

    rows = []
    for path in sorted(cases.glob("*.tsv")):
        with path.open(encoding="utf-8") as fh:
            rows += [(path.name, r) for r in csv.DictReader(fh, delimiter="\t", quoting=csv.QUOTE_NONE)]
    ours = mv = 0
    per: dict[str, list[float]] = {}  # table -> [rows, ours right, math-verify right, ours s, math-verify s]
    for name, r in rows:
        response, want = r["response"].replace("⏎", "\n"), r["expected"] == "correct"
        t0 = time.perf_counter()
        v = grade(response, r["gold"], dataset=r["dataset"] or None, timeout_s=timeout_s)
        t1 = time.perf_counter()
        m = _mv_grade(response, r["gold"]) is want
        t2 = time.perf_counter()
        ours += v.reason == r["expected"]
        mv += m
        acc = per.setdefault(name, [0, 0, 0, 0.0, 0.0])
        acc[0] += 1
        acc[1] += v.reason == r["expected"]
        acc[2] += m
        acc[3] += t1 - t0
        acc[4] += t2 - t1
    print(f"cases {len(rows)}: ours {ours / len(rows):.4f} ({ours}); math_verify {mv / len(rows):.4f} ({mv})")
    for name, (n, o, m, t_o, t_m) in sorted(per.items()):
        print(f"  {name:<18} rows {int(n):>4}  ours {o / n:.4f}  math_verify {m / n:.4f}  "
              f"ours {n / t_o:7.1f}/s  math_verify {n / t_m:6.1f}/s  ratio {t_m / t_o:6.2f}")
    t_o, t_m = sum(a[3] for a in per.values()), sum(a[4] for a in per.values())
    print(f"cases_throughput_ratio_vs_math_verify {t_m / t_o:.2f}")


def _timed(check, pairs: list[tuple[str, str, str]]) -> tuple[list, float, list[float]]:
    """``check`` on every pair: the results, the loop's wall time, and each call's (the bookkeeping happens after)."""
    out, took = [], []
    t0 = time.perf_counter()
    for r, g, d in pairs:
        t = time.perf_counter()
        out.append(check(r, g, d))
        took.append(time.perf_counter() - t)
    return out, time.perf_counter() - t0, took


def _warm() -> None:
    """Start our sympy worker, import Math-Verify, and load the parts of sympy that both import lazily (solvers,
    radicals, equations), outside the timed region."""
    for r, g in _WARM:
        grade(r, g)
        _mv_grade(r, g)


def _cold() -> None:
    """Our caches emptied and a fresh (warmed) worker: every round starts as the first one did, so a later round
    does not time answers it has already seen."""
    for cached in (prepare_gold, normalize_answer, simple_number):
        cached.cache_clear()
    close_workers()
    _warm()


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=5000, help="number of pairs (default 5000)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--timeout", type=float, default=5.0)
    ap.add_argument("--workers", type=int, default=1, help="also time grade_many with this many workers")
    ap.add_argument("--cases", type=Path, default=None, help="directory of case tables (*.tsv) to score")
    ap.add_argument("--adversarial", type=float, default=0.0,
                    help="fraction of adversarial pairs mixed in (dataset 'adv'; e.g. 0.01)")
    ap.add_argument("--load", type=int, default=0, help="busy processes (nice 5) running beside the timed loops")
    ap.add_argument("--repeat", type=int, default=1,
                    help="timed rounds, the order of the two checkers alternating; prints the ratio's spread")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    logging.getLogger("math_verify").setLevel(logging.CRITICAL)  # its timeouts log the whole input
    pairs = mix_adversarial(build_pairs(args.n, args.seed), args.adversarial)
    _warm()

    checks = {"ours": lambda r, g, d: grade(r, g, dataset=None if d == "adv" else d, timeout_s=args.timeout),
              "mv": lambda r, g, d: _mv_grade(r, g)}
    per_ds: dict[str, list[float]] = {}  # dataset -> [n, ours seconds, math-verify seconds]
    rounds: list[tuple[float, float]] = []  # (ours s, math-verify s) per round
    ours, mv, walls = [], [], []  # verdicts and math-verify's of the last round; every verdict's wall time
    load = _busy_loops(args.load)
    try:
        for k in range(args.repeat):  # the order alternates per round, so a drift of the load hits both
            if k:
                _cold()
            res, secs, took = {}, {}, {}
            for side in ("ours", "mv") if k % 2 == 0 else ("mv", "ours"):
                res[side], secs[side], took[side] = _timed(checks[side], pairs)
            ours, mv = res["ours"], res["mv"]
            for (_, _, d), t_o, t_m in zip(pairs, took["ours"], took["mv"]):
                acc = per_ds.setdefault(d, [0, 0.0, 0.0])
                acc[0], acc[1], acc[2] = acc[0] + 1, acc[1] + t_o, acc[2] + t_m
            walls += [(t, o.reason) for t, o in zip(took["ours"], ours)]
            rounds.append((secs["ours"], secs["mv"]))
    finally:
        for p in load:
            p.kill()
            p.wait()

    agree = sum(o.correct == m for o, m in zip(ours, mv))
    reasons = Counter(o.reason for o in ours)
    t_ours, t_mv = sum(r[0] for r in rounds), sum(r[1] for r in rounds)
    n_all = len(pairs) * len(rounds)
    ratios = sorted(m / o for o, m in rounds)
    print(f"grader {GRADER_VERSION}; pairs {len(pairs)}; rounds {len(rounds)}")
    print(f"ours_pairs_per_s {n_all / t_ours:.1f} ({t_ours:.2f}s); reasons {dict(reasons)}")
    print(f"math_verify_pairs_per_s {n_all / t_mv:.1f} ({t_mv:.2f}s); correct {sum(mv)}")
    print(f"throughput_ratio_vs_math_verify {t_mv / t_ours:.2f}")
    if len(rounds) > 1:
        print(f"ratio_per_round median {statistics.median(ratios):.2f} (min {ratios[0]:.2f}, max {ratios[-1]:.2f}): "
              + " ".join(f"{m / o:.2f}" for o, m in rounds))
    ours_only = sum(o.correct and not m for o, m in zip(ours, mv))
    mv_only = sum(m and not o.correct for o, m in zip(ours, mv))
    print(f"agreement {agree}/{len(pairs)}; ours-only correct {ours_only}; "
          f"math-verify-only correct {mv_only}")
    if args.workers > 1:
        by_ds: dict[str, list[tuple[str, str]]] = {}
        for r, g, d in pairs:
            by_ds.setdefault(d, []).append((r, g))
        t0 = time.perf_counter()
        for d, items in by_ds.items():
            grade_many(items, dataset=d, timeout_s=args.timeout, workers=args.workers)
        t_many = time.perf_counter() - t0
        print(f"grade_many_workers_{args.workers}_pairs_per_s {len(pairs) / t_many:.1f}")
    for d, (n, t_o, t_m) in sorted(per_ds.items()):
        print(f"  {d:<6} pairs {int(n):>5}  ours {n / t_o:8.1f}/s  "
              f"math_verify {n / t_m:6.1f}/s  ratio {t_m / t_o:6.2f}")
    worst = max(w for w, _ in walls)
    over = sorted(w - args.timeout for w, reason in walls if reason == "timeout")
    print(f"worst_case_latency_s {worst:.3f}; timeout {args.timeout} s; over budget "
          f"{sum(w > args.timeout for w, _ in walls)} of {len(walls)} verdicts (wall clock around grade())")
    if over:
        print(f"timeouts {len(over)}: wall clock minus budget min {over[0]:+.3f} s, "
              f"median {statistics.median(over):+.3f} s, max {over[-1]:+.3f} s")
    if args.cases is not None:
        case_accuracy(args.cases, args.timeout)


if __name__ == "__main__":
    main()
