rule evaluate:
    input:
        model=model_for_eval,
        data=f"{OUT}/data/manifest.json",
    output:
        summary=f"{OUT}/eval/{{method}}/seed{{seed}}/step{{step}}/{{benchmark}}.summary.json",
        samples=f"{OUT}/eval/{{method}}/seed{{seed}}/step{{step}}/{{benchmark}}.samples.jsonl",
    params:
        prefix=f"{OUT}/eval/{{method}}/seed{{seed}}/step{{step}}/{{benchmark}}",
        data=eval_data_args,
        config=config_digest("evaluate"),
    log:
        f"{OUT}/logs/eval/{{method}}_seed{{seed}}_step{{step}}_{{benchmark}}.log",
    conda:
        "../../envs/eval.yaml"
    threads: 1
    resources:
        **slurm_resources(CFG, "evaluate"),
    shell:
        "{PY} -m evaluation.evaluate --config {CONFIG_FILE} --model-dir {input.model} "
        "--benchmark {wildcards.benchmark} {params.data} --method {wildcards.method} "
        "--seed {wildcards.seed} --step {wildcards.step} --out-prefix {params.prefix} > {log} 2>&1"


# Real benchmarks (config real_eval): generation (GPU-bound; the multiple-choice sets by log-likelihood
# through lm-eval) and scoring (CPU-bound: answer checker, EvalPlus sandbox) are separate jobs per checkpoint.
# Every evaluation rule is a thin CLI over the one driver (evaluation.driver) that `creditbench eval` runs.
if REAL_SETS:

    rule real_generate:
        input:
            model=model_for_eval,
        output:
            raw=real_files("raw.jsonl"),
            meta=real_files("gen.json"),
        params:
            out_dir=f"{REAL_DIR}/{{method}}/seed{{seed}}/step{{step}}",
            sets=" ".join(REAL_SETS),
            config=config_digest("real_generate"),
        log:
            f"{OUT}/logs/real_eval/{{method}}_seed{{seed}}_step{{step}}_generate.log",
        conda:
            "../../envs/eval.yaml"
        threads: 1
        resources:
            **slurm_resources(CFG, "evaluate"),
        shell:
            "{PY} -m evaluation.real_eval generate --config {CONFIG_FILE} --model-dir {input.model} "
            "--method {wildcards.method} --seed {wildcards.seed} --step {wildcards.step} "
            "--out-dir {params.out_dir} --sets {params.sets} > {log} 2>&1"

    rule real_score:
        input:
            raw=real_files("raw.jsonl"),
            meta=real_files("gen.json"),
        output:
            summaries=real_files("summary.json"),
            samples=real_files("samples.jsonl"),
        params:
            out_dir=f"{REAL_DIR}/{{method}}/seed{{seed}}/step{{step}}",
            sets=" ".join(REAL_SETS),
            config=config_digest("real_score"),
        log:
            f"{OUT}/logs/real_eval/{{method}}_seed{{seed}}_step{{step}}_score.log",
        conda:
            "../../envs/eval.yaml"
        threads: 1
        resources:
            **slurm_resources(CFG, "real_score"),
        shell:
            "{PY} -m evaluation.real_eval score --config {CONFIG_FILE} --out-dir {params.out_dir} "
            "--sets {params.sets} > {log} 2>&1"
