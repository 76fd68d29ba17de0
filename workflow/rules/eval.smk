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
