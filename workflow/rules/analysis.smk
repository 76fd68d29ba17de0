# Credit-assignment analyses (training.studies.analysis): DelTA λ~ by token class, CF critical /
# distractor spans by kind, for each of analysis_runs() (common.smk). One job for all of them: the
# imports and model-class set-up are most of the cost of one analysis, so one process is ~2x cheaper.
ANALYSIS_FIGURES = ("heatmap_delta", "heatmap_cf", "credit_by_class")
ANALYSIS_FILES = ("tokens.jsonl", "delta_lambda_by_class.md", "delta_lambda_by_class.csv",
                  "cf_spans_by_kind.md", "cf_spans_by_kind.csv") + tuple(f"{f}.pdf" for f in ANALYSIS_FIGURES)
ANALYSIS_RUNS = analysis_runs()


if ANALYSIS_RUNS:

    rule credit_analysis:
        input:
            models=[model for _, model, _ in ANALYSIS_RUNS],
            train=f"{OUT}/data/train.jsonl",
        output:
            summaries=analysis_targets(),
            files=[f"{OUT}/analysis/{name}/{f}" for name, _, _ in ANALYSIS_RUNS for f in ANALYSIS_FILES],
            figures=[report(f"{OUT}/analysis/{name}/{fig}.png", caption="../report/analysis.rst",
                            category="Credit analysis", subcategory=name, labels={"figure": fig})
                     for name, _, _ in ANALYSIS_RUNS for fig in ANALYSIS_FIGURES],
        params:
            runs=" ".join(f"--model-dir {model} --out-dir {OUT}/analysis/{name} --seed {seed}"
                          for name, model, seed in ANALYSIS_RUNS),
            config=config_digest("credit_analysis"),
        log:
            f"{OUT}/logs/credit_analysis.log",
        conda:
            "../../envs/eval.yaml"
        threads: 1
        priority: LONG_FIRST
        shell:
            "{PY} -m training.studies.analysis --config {CONFIG_FILE} --train {input.train} {params.runs} "
            "> {log} 2>&1"
