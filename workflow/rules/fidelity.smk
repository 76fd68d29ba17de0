# Credit fidelity (issue 16, training.studies.fidelity_run): effective per-token credit of every trained
# preset (final checkpoints, each seed) and of the controls on the shared SFT checkpoint, against exact
# token importance; plus the per-step LM-head gradient SNR table. Synthetic task only. The report rule
# copies the tables and figure into tables/ and figures/ (its directory outputs).
# On real text with the CPU-size real model (issue 34, rule real_credit, training.studies.real_credit): DelTA's
# lambda~ by real-text token class, CF's spans and drops, and every preset's credit against Monte-Carlo
# importance and against exact labels where the task defines them (chain_sum), on the start model and the
# baseline's final checkpoint (first seed), in analysis/real_text/.
from training.presets import get_preset  # noqa: E402

FIDELITY_DIR = f"{OUT}/fidelity"


def fidelity_rows() -> list[tuple[str, str, str, int]]:
    """(label, preset, model folder, seed) per probed checkpoint; empty when disabled or not synthetic."""
    fid = CFG.fidelity
    if not fid.enabled or DATA_MODULE != "training.data":
        return []
    seeds = fid.seeds or CFG.seeds
    rows = [(m, m, f"{OUT}/runs/{m}/seed{s}/checkpoints/step{CFG.rl.steps}", s) for m in CFG.methods for s in seeds]
    for name in fid.controls:
        get_preset(name)  # an unknown control fails here, before anything runs
        rows += [(f"{name}@sft", name, f"{OUT}/models/sft", s) for s in seeds]
    return rows


FIDELITY_ROWS = fidelity_rows()
FIDELITY_TABLES = [f"{FIDELITY_DIR}/{n}.{e}" for n in ("credit_fidelity", "gradient_snr") for e in ("md", "csv")]
FIDELITY_FIGURES = [f"{FIDELITY_DIR}/credit_fidelity.{e}" for e in ("png", "pdf")]


def real_credit_runs() -> list[tuple[str, str]]:
    """(name, model folder) probed on real text, where the only ground truth is Monte-Carlo: empty unless
    fidelity.enabled and fidelity.mc.enabled, on a CPU-size real model (model.convert_gguf) and real data."""
    if not CFG.real_credit:
        return []
    seed, step, base = (CFG.fidelity.seeds or CFG.seeds)[0], CFG.rl.steps, CFG.report.baseline
    runs = [("sft", f"{OUT}/models/sft")]
    if base in CFG.methods:
        runs.append((f"{base}_seed{seed}_step{step}", f"{OUT}/runs/{base}/seed{seed}/checkpoints/step{step}"))
    return runs


REAL_CREDIT_RUNS = real_credit_runs()
REAL_CREDIT_FILES = ("delta_lambda_by_class.md", "delta_lambda_by_class.csv", "cf_real_text.md",
                     "credit_fidelity_mc.md", "credit_fidelity_mc.csv", "mc_records.jsonl",
                     "credit_fidelity_labels.md", "credit_fidelity_labels.csv", "label_records.jsonl", "summary.json")


def fidelity_outputs() -> list[str]:
    real = [f"{OUT}/analysis/real_text/{name}/{f}" for name, _ in REAL_CREDIT_RUNS for f in REAL_CREDIT_FILES]
    return (FIDELITY_TABLES + FIDELITY_FIGURES if FIDELITY_ROWS else []) + real


def fidelity_copy() -> str:
    """Shell suffix of the report rule: copy the fidelity tables and figure into its directories."""
    if not FIDELITY_ROWS:
        return ""
    return (f" && cp {' '.join(FIDELITY_TABLES)} {OUT}/tables/ && cp {' '.join(FIDELITY_FIGURES)} {OUT}/figures/")


if FIDELITY_ROWS:

    rule credit_fidelity:
        input:
            models=sorted({model for _, _, model, _ in FIDELITY_ROWS}),
            train=f"{OUT}/data/train.jsonl",
            metrics=[f"{OUT}/runs/{m}/seed{s}/metrics.jsonl" for m in CFG.methods for s in CFG.seeds],
        output:
            tables=FIDELITY_TABLES,
            figures=FIDELITY_FIGURES,
            records=f"{FIDELITY_DIR}/records.jsonl",
        params:
            rows=" ".join(f"--row {lab} {p} {model} {s}" for lab, p, model, s in FIDELITY_ROWS),
            metrics=" ".join(f"--metrics {m} {OUT}/runs/{m}/seed{s}/metrics.jsonl"
                             for m in CFG.methods for s in CFG.seeds),
            config=config_digest("credit_fidelity"),
        log:
            f"{OUT}/logs/credit_fidelity.log",
        conda:
            "../../envs/eval.yaml"
        threads: 1
        priority: LONG_FIRST
        shell:
            "{PY} -m training.studies.fidelity_run --config {CONFIG_FILE} --train {input.train} "
            "--out-dir {FIDELITY_DIR} {params.rows} {params.metrics} > {log} 2>&1"


if REAL_CREDIT_RUNS:

    rule real_credit:
        input:
            models=[model for _, model in REAL_CREDIT_RUNS],
            train=f"{OUT}/data/train.jsonl",
        output:
            [f"{OUT}/analysis/real_text/{name}/{f}" for name, _ in REAL_CREDIT_RUNS for f in REAL_CREDIT_FILES],
        params:
            runs=" ".join(f"--model-dir {model} --out-dir {OUT}/analysis/real_text/{name}"
                          for name, model in REAL_CREDIT_RUNS),
            seed=(CFG.fidelity.seeds or CFG.seeds)[0],
            config=config_digest("real_credit"),
        log:
            f"{OUT}/logs/real_credit.log",
        conda:
            "../../envs/eval.yaml"
        threads: 1
        priority: LONG_FIRST
        shell:
            "{PY} -m training.studies.real_credit --config {CONFIG_FILE} --train {input.train} {params.runs} "
            "--seed {params.seed} > {log} 2>&1"
