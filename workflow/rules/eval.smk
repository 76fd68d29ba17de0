# Evaluation (config eval.suites): per suite and checkpoint, generation (GPU-bound: samples of the math and code
# sets; the multiple-choice sets by log-likelihood through lm-eval) and scoring (CPU-bound: answer checker,
# EvalPlus sandbox) are separate jobs, both thin CLIs over the one driver (evaluation.driver) that
# `creditbench eval` runs. Written once, a pair per suite (eval_generate_<suite>, eval_score_<suite>): a
# suite's sets are its jobs' declared outputs. The SFT start is one job per suite (evaluation.suites).
for _suite in SUITE_SETS:

    rule:
        name:
            f"eval_generate_{_suite}"
        input:
            model=model_for_eval,
            data=[f"{OUT}/data/manifest.json"] if "synthetic" in SUITE_SETS[_suite] else [],
        output:
            raw=suite_files(_suite, "raw.jsonl"),
            meta=suite_files(_suite, "gen.json"),
        params:
            out_dir=eval_dir(_suite, "{method}", "{seed}", "{step}"),
            args=suite_args(_suite),
            config=rule_digest(CFG.raw, "eval_generate", suite=_suite),
        log:
            f"{OUT}/logs/eval/{_suite}/{{method}}_seed{{seed}}_step{{step}}_generate.log",
        conda:
            "../../envs/eval.yaml"
        threads: 1
        resources:
            **slurm_resources(CFG, "eval_generate"),
        shell:
            "{PY} -m evaluation.evaluate generate --config {CONFIG_FILE} {params.args} --model-dir {input.model} "
            "--method {wildcards.method} --seed {wildcards.seed} --step {wildcards.step} "
            "--out-dir {params.out_dir} > {log} 2>&1"

    rule:
        name:
            f"eval_score_{_suite}"
        input:
            raw=suite_files(_suite, "raw.jsonl"),
            meta=suite_files(_suite, "gen.json"),
        output:
            summaries=suite_files(_suite, "summary.json"),
            samples=suite_files(_suite, "samples.jsonl"),
        params:
            out_dir=eval_dir(_suite, "{method}", "{seed}", "{step}"),
            args=suite_args(_suite),
            config=rule_digest(CFG.raw, "eval_score", suite=_suite),
        log:
            f"{OUT}/logs/eval/{_suite}/{{method}}_seed{{seed}}_step{{step}}_score.log",
        conda:
            "../../envs/eval.yaml"
        threads: 1
        resources:
            **slurm_resources(CFG, "eval_score"),
        shell:
            "{PY} -m evaluation.evaluate score --config {CONFIG_FILE} {params.args} --out-dir {params.out_dir} "
            "> {log} 2>&1"
