"""Credit analyses: token classes of synthetic solutions (case table), CF critical/distractor shares on
hand-made span records, λ~ tables by hand, the rollout re-sampled exactly as the RL loop's step 0, and
one end-to-end run on a tiny model whose rollouts are known solutions."""

from __future__ import annotations

import json
import math
import statistics

import pytest
import torch

from common.config import config_from_dict
from common.io import read_jsonl
from training.credit.cf import CFSpanRecord
from training.data import SCAFFOLD
from training.presets import get_preset
from training.rl import train
from training.studies import analysis as ca

pytestmark = pytest.mark.timeout(120)

S, OP, R, A, O = "scaffolding", "calc_operands", "calc_result", "answer", "other"  # noqa: E741  (token-class initials)
EOS = "<|endoftext|>"
SCAF = [" Let", "'s", " think", " step", " by", " step", "."]

# (pieces as the tiny tokenizer splits them, expected fine label per token)
CLASS_CASES = [
    pytest.param(
        SCAF + [" 2", " +", " 1", " =", " 3", ".", " \\", "boxed", "{", "3", "}", EOS],
        [S] * 7 + [OP, OP, OP, OP, R, OP] + [A] * 6, id="one-step solution, EOS after the answer"),
    pytest.param(
        [" 7", " +", " 5", " =", " 1", "2", ".", " 1", "2", " -", " 3", " =", " 9", "."],
        [OP, OP, OP, OP, R, R, OP, OP, OP, OP, OP, OP, R, OP], id="two calculations, multi-digit result"),
    pytest.param([" 7", " +", " 5", " =", " 1", "3", "."], [OP, OP, OP, OP, R, R, OP],
                 id="a slip is still a calculation"),
    pytest.param([" 2", " +", " 3", " -", " 1", " =", " 4", "."], [OP] * 6 + [R, OP], id="three operands"),
    pytest.param([" Sam", " has", " 7", " pens", "."], [S] * 5, id="restatement"),
    pytest.param([" Sam", " has", " 7", " dogs", "."], [O] * 5, id="not a task object: other"),
    pytest.param([" 2", " +", " 3", " =", " so"], [O] * 5, id="calculation without a result"),
    pytest.param([" foo", " 3", " ", "bar", EOS], [O] * 5, id="no structure, no answer: other (EOS too)"),
    pytest.param([" ", "2", " ", "+", " ", "1", " ", "=", " ", "3", ".", " ", "L"],
                 [O] + [OP] * 8 + [R, OP, O, O], id="character tokens: spaces in a calculation belong to it"),
    pytest.param(["", " 2"], [O, O], id="empty piece"),
    pytest.param([" \\", "boxed", "{", "1", " +", " 1", " =", " 2", "}"], [A] * 9,
                 id="everything from \\boxed{ on is answer"),
    pytest.param([" ", " 4", " =", " 4", "."], [O, O, O, O, O], id="no operator: not a calculation"),
    pytest.param(SCAF[:-1] + [". 2", " +", "1", "=", "3", ". "], [S] * 7 + [OP, OP, OP, R, OP],
                 id="a token takes the class of its first non-space character"),
]


@pytest.mark.parametrize(("pieces", "expected"), CLASS_CASES)
def test_token_labels_case_table(pieces: list[str], expected: list[str]) -> None:
    assert ca.token_labels(pieces) == expected


def test_coarse_classes_and_sides() -> None:
    assert [ca.coarse_class(x) for x in (S, OP, R, A, O)] == [S, "calculation", "calculation", A, O]
    assert [ca.side_of(a) for a in (0.7, -0.1, 0.0)] == ["A>0", "A<0", "A=0"]


def test_char_labels_answer_overrides_and_scaffold_only_before_answer() -> None:
    text = "Let's think step by step. \\boxed{Let's think step by step.}"
    labels = ca.char_labels(text)
    cut = text.index("\\boxed{")
    assert set(labels[:25]) == {S} and labels[25] == O and set(labels[cut:]) == {A}


# ------------------------------------------------------------------------------------------------
# CF shares on hand-made records (threshold ln 2 = 0.6931)
# ------------------------------------------------------------------------------------------------


def _records(kind: str, drops: list[float]) -> list[CFSpanRecord]:
    return [CFSpanRecord(row=i, start=0, end=1, kind=kind, drop=d) for i, d in enumerate(drops)]


ARITH = [2.0, 0.8, 0.5, -0.1]  # critical: 2.0, 0.8 -> 2/4; distractor: -0.1 -> 1/4
SENT = [0.7, 0.1, 0.0, -0.2, 0.05]  # critical: 0.7 -> 1/5; I > 0: 0.7, 0.1, 0.05 -> 3/5; distractor 1/5


def test_cf_shares_by_hand() -> None:
    records = _records("arithmetic", ARITH) + _records("sentence", SENT)
    rows = {r["kind"]: r for r in ca.cf_span_table(records)}
    a, s, al = rows["arithmetic"], rows["sentence"], rows["all"]
    assert (a["n_spans"], a["n_critical"], a["share_critical"]) == (4, 2, 0.5)
    assert (a["n_distractor"], a["share_distractor"], a["share_supportive"]) == (1, 0.25, 0.75)
    assert (s["n_spans"], s["n_critical"], s["share_critical"]) == (5, 1, 0.2)
    assert (s["share_supportive"], s["share_distractor"]) == (0.6, 0.2)
    assert (al["n_spans"], al["n_critical"], al["n_distractor"]) == (9, 3, 2)
    assert al["share_distractor"] == pytest.approx(2 / 9)
    assert a["mean_drop"] == pytest.approx(0.8) and a["median_drop"] == pytest.approx(0.65)
    assert s["median_drop"] == pytest.approx(0.05)
    head = ca.cf_headline(list(rows.values()))
    assert head["ratio_critical_calculation_to_sentence"] == pytest.approx(2.5)
    assert head["share_distractor"] == pytest.approx(2 / 9) and head["n_distractor"] == 2
    assert head["n_spans"] == {"arithmetic": 4, "sentence": 5, "all": 9}


def test_cf_threshold_is_inclusive_and_configurable() -> None:
    assert ca.CRITICAL_THRESHOLD == pytest.approx(0.693147, abs=1e-6)
    rows = {r["kind"]: r for r in ca.cf_span_table(_records("arithmetic", [0.5, 0.49, 0.0]), threshold=0.5)}
    assert rows["arithmetic"]["n_critical"] == 1
    assert rows["arithmetic"]["n_supportive"] == 2  # 0.0 is neither supportive nor a distractor
    assert rows["arithmetic"]["n_distractor"] == 0


def test_cf_undefined_shares_are_none() -> None:
    rows = ca.cf_span_table(_records("arithmetic", [1.0]) + _records("sentence", [0.1]))
    assert ca.cf_headline(rows)["ratio_critical_calculation_to_sentence"] is None  # sentence share 0
    empty = ca.cf_span_table([])
    assert all(r["n_spans"] == 0 and r["share_critical"] is None for r in empty)
    assert ca.cf_headline(empty)["share_distractor"] is None
    other = {r["kind"] for r in ca.cf_span_table(_records("list_item", [1.0]))}
    assert other == {"arithmetic", "sentence", "list_item", "all"}


def test_ratio_bootstrap_resamples_responses() -> None:
    import numpy as np

    # 3 responses: (2 arithmetic spans, 1 critical; 1 sentence span, critical), ... as (kind, I) lists
    resp = [[("arithmetic", 2.0), ("arithmetic", 0.1), ("sentence", 0.9)],
            [("arithmetic", 1.0), ("sentence", 0.0)], [("arithmetic", 0.0), ("sentence", 0.0)]]
    ci = ca.ratio_bootstrap(resp, n_boot=500, seed=4)
    assert (ci["n_responses"], ci["n_boot"]) == (3, 500)
    # brute force with the same draws: pooled shares of each resample, 0/0 left out, x/0 = inf
    idx = np.random.default_rng(4).integers(0, 3, size=(500, 3))
    ratios = []
    for draw in idx:
        spans = [s for i in draw for s in resp[i]]
        crit = {k: sum(d >= ca.CRITICAL_THRESHOLD for kk, d in spans if kk == k) for k in ("arithmetic", "sentence")}
        n = {k: sum(kk == k for kk, _ in spans) for k in ("arithmetic", "sentence")}
        a, b = crit["arithmetic"] / n["arithmetic"], crit["sentence"] / n["sentence"]
        ratios.append(math.nan if a == b == 0 else math.inf if b == 0 else a / b)
    ok = sorted(r for r in ratios if not math.isnan(r))
    assert ci["n_undefined"] == 500 - len(ok) and ci["n_infinite"] == sum(map(math.isinf, ok)) > 0
    assert ci["ci_lo"] == ok[math.ceil(0.025 * len(ok)) - 1] and math.isinf(ok[math.ceil(0.975 * len(ok)) - 1])
    assert ci["ci_hi"] is None and ci["ci_hi_unbounded"] and "∞" in ca.ci_text(ci)
    json.dumps(ci, allow_nan=False)  # strict JSON: summary.json holds no Infinity
    assert "n = 3 responses, 500 resamples" in ca.ci_text(ci)
    same = ca.ratio_bootstrap([resp[0]] * 5)  # every resample is the data: the interval is the point (1/2 / 1)
    assert (same["ci_lo"], same["ci_hi"], same["n_undefined"], same["ci_hi_unbounded"]) == (0.5, 0.5, 0, False)
    assert ca.ratio_bootstrap([])["ci_lo"] is None


def test_lambda_table_by_hand() -> None:
    labels = [S, OP, R, A, R, O]
    sides = ["A>0", "A>0", "A>0", "A<0", "A<0", "A=0"]
    values = [0.9, 1.1, 1.3, 0.8, 1.0, 0.85]
    cell = {(r["class"], r["side"]): r for r in ca.lambda_table(labels, sides, values)}
    calc = cell[("calculation", "A>0")]
    assert (calc["n"], calc["mean"], calc["sd"]) == (2, pytest.approx(1.2), pytest.approx(0.2 / math.sqrt(2)))
    result = cell[("calc_result", "all")]
    assert (result["n"], result["mean"]) == (2, pytest.approx(1.15))
    assert cell[("answer", "A<0")]["sd"] is None  # n = 1
    empty = cell[("scaffolding", "A<0")]
    assert (empty["n"], empty["mean"], empty["sd"]) == (0, None, None)
    assert cell[("all", "all")]["mean"] == pytest.approx(sum(values) / 6)
    assert cell[("other", "A=0")]["n"] == 1
    with pytest.raises(ValueError):
        ca.lambda_table(labels, sides, values[:-1])


@pytest.mark.parametrize(("correct", "groups", "expected"), [
    ([False, True, True, False], [0, 0, 1, 1], [1, 0]),
    ([True, True, False, False], [0, 0, 1, 1], [0, 2]),  # no group with both: first correct, first wrong
    ([True, True], [0, 1], [0]),
    ([False, False, True, False], [0, 0, 1, 1], [2, 3]),
])
def test_pick_samples(correct: list[bool], groups: list[int], expected: list[int]) -> None:
    assert ca.pick_samples(correct, groups) == expected


# ------------------------------------------------------------------------------------------------
# The rollout and credit are the RL loop's: step 0 of training.rl.train reproduced
# ------------------------------------------------------------------------------------------------


def digit_reward(response: str, gold: str, *, timeout_s: float) -> float:
    """Rewards an untrained model earns sometimes (as tests/training/test_rl.py)."""
    return float(sum(ch.isdigit() for ch in response) % 2 == 0)


@pytest.mark.parametrize(("method", "lam_key"), [("delta", "lambda"), ("cf", "cf_w")])
def test_batch_zero_is_the_rl_loops_first_batch(tiny_env, tmp_path, method: str, lam_key: str) -> None:
    cfg = tiny_env["cfg"]
    run = tmp_path / "run"
    raw = dict(cfg.raw, rl={**cfg.raw["rl"], "steps": 1, "checkpoint_every": 1})
    cfg1 = config_from_dict(raw)
    train(cfg1, get_preset(method), seed=5, sft_dir=str(tiny_env["model"]), train_path=str(tiny_env["train"]),
          run_dir=str(run), reward_fn=digit_reward)
    step0 = json.loads((run / "metrics.jsonl").read_text().splitlines()[0])
    summary = ca.run_analysis(cfg1, model_dir=tiny_env["model"], train_path=tiny_env["train"],
                              out_dir=tmp_path / "analysis", seed=5, reward_fn=digit_reward)
    assert summary["accuracy"] == pytest.approx(step0["accuracy"])
    rows = read_jsonl(tmp_path / "analysis" / "tokens.jsonl")
    mask_key = "in_delta_loss" if method == "delta" else "in_cf_loss"
    w = torch.tensor([v for r in rows for v, m in zip(r[lam_key], r[mask_key]) if m], dtype=torch.float64)
    assert w.numel() == step0["tokens_trained"]
    assert float(w.mean()) == pytest.approx(step0["weight_mean"], abs=1e-5)
    assert float(w.std()) == pytest.approx(step0["weight_std"], abs=1e-5)
    if method == "delta":
        assert step0["weight_std"] > 1e-3  # non-trivial λ~, so the comparison can fail


# ------------------------------------------------------------------------------------------------
# End to end: rollouts are known solutions (even rows right, odd rows a wrong \boxed), CLI outputs
# ------------------------------------------------------------------------------------------------


def solution_sampler(problems: list[dict]):
    """A ``sample_hf`` stand-in: row k of each group is the problem's worked solution (slips and all) ending
    in the right boxed answer in even rows and in answer + 1 in odd rows; EOS-terminated and right padded,
    as sample_hf returns."""
    by_prompt = {p["prompt"]: p for p in problems}

    def sampler(model, tokenizer, prompt_ids, prompt_mask, *, n, temperature, top_p, max_new_tokens,
                generator_seed):
        prompts = tokenizer.batch_decode(prompt_ids, skip_special_tokens=True)
        rows = []
        for prompt in prompts:
            p = by_prompt[prompt]
            stem = p["solution"][: p["solution"].index("\\boxed{")]  # slipped solutions box a wrong value
            right, wrong = stem + f"\\boxed{{{p['answer']}}}", stem + f"\\boxed{{{int(p['answer']) + 1}}}"
            for k in range(n):
                text = wrong if k % 2 else right
                rows.append(tokenizer(text, add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id])
        width = max(map(len, rows))
        return torch.tensor([r + [tokenizer.pad_token_id] * (width - len(r)) for r in rows])

    return sampler


@pytest.fixture(scope="module")
def e2e(tiny_env, tmp_path_factory):
    raw = dict(tiny_env["cfg"].raw, rl={**tiny_env["cfg"].raw["rl"], "max_new_tokens": 64})
    cfg = config_from_dict(raw)
    out = tmp_path_factory.mktemp("analysis") / "sft"
    problems = read_jsonl(tiny_env["train"])
    summary = ca.run_analysis(cfg, model_dir=tiny_env["model"], train_path=tiny_env["train"], out_dir=out,
                              seed=3, sampler=solution_sampler(problems))
    return cfg, out, summary


def test_e2e_counts_and_classes(e2e) -> None:
    cfg, out, summary = e2e
    n_prompts, g = cfg.rl.prompts_per_step, cfg.rl.group_size
    assert summary["n_responses"] == n_prompts * g and summary["n_correct"] == n_prompts * g // 2
    rows = read_jsonl(out / "tokens.jsonl")
    for r in rows:  # structure of every solution: scaffold, calculations, answer ending in EOS
        pairs = list(zip(r["tokens"], r["labels"]))
        text = {lab: "".join(t for t, x in pairs if x == lab) for lab in (S, OP, R, A, O)}
        assert text[S].strip() == SCAFFOLD and text[A].startswith("\\boxed{") and text[A].endswith("}" + EOS)
        assert text[R].isdigit() and text[OP].count("=") == cfg.task.max_ops and not text[O].strip()
        assert r["correct"] == (r["row"] % 2 == 0) and (r["advantage_delta"] > 0) == r["correct"]
    # 2 unique completions per prompt (duplicates are scored once), min_ops = max_ops = 2 calculations
    # each and one sentence span (the scaffold); the synthetic task has no other sentence.
    cf = summary["cf"]
    n_ops = cfg.task.max_ops
    assert cf["n_spans"] == {"arithmetic": 2 * n_prompts * n_ops, "sentence": 2 * n_prompts,
                             "all": 2 * n_prompts * (n_ops + 1)}
    assert cf["n_completions_scored"] == 2 * n_prompts
    spans = [s for r in rows for s in r["cf_spans"]]
    crit = [s for s in spans if s["drop"] >= ca.CRITICAL_THRESHOLD]
    assert cf["n_critical"]["all"] == len(crit)
    assert cf["share_distractor"] == pytest.approx(sum(s["drop"] < 0 for s in spans) / len(spans))
    for r in rows:  # arithmetic spans lie on calculation tokens, sentence spans on the scaffold
        for s in r["cf_spans"]:
            cut = slice(s["start"], s["end"])
            labels = {lab for t, lab in zip(r["tokens"][cut], r["labels"][cut]) if t.strip()}
            assert labels <= ({OP, R} if s["kind"] == "arithmetic" else {S}), (s, r["tokens"])


def test_e2e_lambda_is_self_normalised_and_tables_agree(e2e) -> None:
    _, out, summary = e2e
    rows = read_jsonl(out / "tokens.jsonl")
    lam = [v for r in rows for v in r["lambda"]]
    assert statistics.fmean(lam) == pytest.approx(1.0, abs=1e-5)  # no A = 0 row: all tokens on a side
    delta = summary["delta"]
    assert delta["n_tokens"]["all"]["A=0"] == 0
    assert delta["n_tokens"]["all"]["all"] == len(lam) == summary["n_tokens"]
    n = delta["n_tokens"]
    for side in ("A>0", "A<0"):
        assert n["calculation"][side] == n["calc_operands"][side] + n["calc_result"][side]
        assert sum(n[c][side] for c in ca.CLASSES) == n["all"][side]
    pos = [v for r in rows if r["advantage_delta"] > 0
           for v, lab in zip(r["lambda"], r["labels"]) if lab == A]
    assert delta["lambda_mean"]["answer"]["A>0"] == pytest.approx(statistics.fmean(pos), abs=1e-5)
    csv_rows = (out / "delta_lambda_by_class.csv").read_text().splitlines()
    assert csv_rows[0] == "class,side,n,mean,sd"
    assert len(csv_rows) == 1 + len(ca.TABLE_CLASSES) * len(ca.SIDES)
    md = (out / "cf_spans_by_kind.md").read_text()
    assert "| arithmetic |" in md and "I(s) >= 0.6931" in md
    ci = summary["cf"]["ratio_ci"]  # the headline ratio has its interval over the scored responses
    assert ci["n_responses"] == summary["cf"]["n_completions_scored"] and ci["n_boot"] == ca.RATIO_N_BOOT
    assert f"bootstrap CI over n = {ci['n_responses']} responses" in md


def test_credit_by_class_shows_operands_and_results_apart(e2e, monkeypatch, tmp_path) -> None:
    from matplotlib.figure import Figure

    _, out, summary = e2e
    seen: list[list[str]] = []
    real = Figure.savefig
    monkeypatch.setattr(Figure, "savefig", lambda fig, *a, **k: (seen.append(
        [t.get_text() for t in fig.axes[0].get_xticklabels()]), real(fig, *a, **k))[1])
    ca.bar_figure(summary["delta"]["table"], summary["cf"]["table"], tmp_path, "sft")
    n = summary["delta"]["n_tokens"]
    ticks = seen[0]
    assert [t.split("\n")[0] for t in ticks] == ["scaffolding", "calc. operands", "calc. result", "answer", "other"]
    assert ticks[2] == f"calc. result\n(n={n['calc_result']['A>0']}/{n['calc_result']['A<0']})"


def test_e2e_files_and_cli(e2e, tiny_env, tmp_path) -> None:
    _, out, summary = e2e
    for stem in ("heatmap_delta", "heatmap_cf", "credit_by_class"):
        for ext in ("png", "pdf"):
            assert (out / f"{stem}.{ext}").stat().st_size > 1000, f"{stem}.{ext}"
    assert set(summary["files"]) <= {p.name for p in out.iterdir()}
    assert summary["model"]["weights_sha256"]["model.safetensors"]
    assert summary["manifest"]["seeds"] == {"analysis": 3}
    assert [(s["step"], s["row"]) for s in summary["heatmap_samples"]] == [(0, 0), (0, 1)]
    assert not math.isnan(json.loads((out / "summary.json").read_text())["delta"]["table"][-1]["mean"])
    # the CLI on the untrained model with real sampling, two analyses in one process (as the workflow's
    # rule): each writes the same set of files
    common = ["--config", str(tiny_env["config"]), "--train", str(tiny_env["train"])]
    runs = [("--model-dir", str(tiny_env["model"]), "--out-dir", str(tmp_path / name), "--seed", seed)
            for name, seed in (("cli_a", "1"), ("cli_b", "2"))]
    assert ca.main(common + [a for run in runs for a in run]) == 0
    for name, seed in (("cli_a", 1), ("cli_b", 2)):
        assert sorted(p.name for p in (tmp_path / name).iterdir()) == sorted(p.name for p in out.iterdir())
        cli = json.loads((tmp_path / name / "summary.json").read_text())
        assert (cli["label"], cli["seed"], cli["n_responses"]) == (name, seed, 8)
        assert cli["delta"]["knobs"]["K"] == 1 and cli["cf"]["knobs"]["boost"] == 4.0
    with pytest.raises(SystemExit):  # unpaired --seed
        ca.main(common + list(runs[0]) + ["--model-dir", str(tiny_env["model"])])


def test_e2e_real_text_block_counts_markers_spans_and_drops(e2e) -> None:
    """summary cf.real_text (issue 24): every worked solution has a \\boxed{ marker and n_ops + 1 spans."""
    cfg, out, summary = e2e
    rt, cf = summary["cf"]["real_text"], summary["cf"]
    n = cfg.rl.prompts_per_step * cfg.rl.group_size
    assert rt["n_responses"] == n and rt["share_with_marker"] == 1.0
    assert rt["markers"] == {"boxed": n, "####": 0, "answer phrase": 0, "closing statement": 0}
    assert rt["spans_per_response"] == cfg.task.max_ops + 1 and rt["share_with_spans"] == 1.0
    assert rt["spans_by_kind"] == {"arithmetic": n * cfg.task.max_ops, "sentence": n}
    assert rt["n_responses_scored"] == cf["n_completions_scored"] and rt["n_spans_scored"] == cf["n_spans"]["all"]
    drops = [s["drop"] for r in read_jsonl(out / "tokens.jsonl") for s in r["cf_spans"]]
    assert rt["drop"]["n"] == len(drops) and rt["drop"]["max"] == pytest.approx(max(drops), abs=1e-6)
    assert rt["share_drop_positive"] == pytest.approx(sum(d > 0 for d in drops) / len(drops))


def test_real_text_summary_without_markers_or_scored_spans() -> None:
    structure = [{"marker": None, "n_spans": 0, "kinds": []}, {"marker": "####", "n_spans": 2,
                                                              "kinds": ["sentence", "arithmetic"]}]
    rt = ca.real_text_summary(structure, [], 0)
    assert rt["share_with_marker"] == 0.5 and rt["markers"]["####"] == 1 and rt["spans_per_response"] == 1.0
    assert rt["spans_by_kind"] == {"arithmetic": 1, "sentence": 1} and rt["drop"] is None
    assert rt["share_drop_positive"] is None and rt["n_spans_scored"] == 0
    assert rt["spans_histogram"] == {"0": 1, "2": 1} and rt["drop_by_kind"] == {"arithmetic": None, "sentence": None}


@pytest.mark.parametrize("statement, kind", [("\\boxed{4}", "boxed"), ("#### 42", "####"),
                                             ("answer is 7.", "answer phrase"), ("Final Answer: 3", "answer phrase"),
                                             ("So she has 8 apples now.", "closing statement")])
def test_real_text_marker_kind(statement: str, kind: str) -> None:
    from training.studies.real_text import marker_kind

    assert marker_kind(statement) == kind
