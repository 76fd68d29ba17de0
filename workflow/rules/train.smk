rule sft:
    input:
        model=f"{OUT}/models/init",
        train=f"{OUT}/data/train.jsonl",
    output:
        model=directory(f"{OUT}/models/sft"),
        metrics=f"{OUT}/models/sft_metrics.jsonl",
    params:
        config=config_digest("sft"),
    log:
        f"{OUT}/logs/sft.log",
    conda:
        "../../envs/train.yaml"
    threads: 1
    resources:
        **slurm_resources(CFG, "sft"),
    shell:
        "{PY} -m training.sft --config {CONFIG_FILE} --model {input.model} --train {input.train} "
        "--out {output.model} --metrics {output.metrics} > {log} 2>&1"


# Checkpoints are the rule's outputs; the resume state lives inside them, so a killed job rerun with
# --rerun-incomplete continues from the last checkpoint Snakemake has not removed (see README).
# Priority LONG_FIRST (common.smk): every rl job starts before the short evaluations.
rule rl:
    input:
        sft=f"{OUT}/models/sft",
        train=f"{OUT}/data/train.jsonl",
    output:
        metrics=f"{OUT}/runs/{{method}}/seed{{seed}}/metrics.jsonl",
        manifest=f"{OUT}/runs/{{method}}/seed{{seed}}/manifest.json",
        checkpoints=[directory(f"{OUT}/runs/{{method}}/seed{{seed}}/checkpoints/step{s}") for s in CFG.rl.checkpoint_steps],
    params:
        run_dir=f"{OUT}/runs/{{method}}/seed{{seed}}",
        config=rl_config_digest,
    log:
        f"{OUT}/logs/rl/{{method}}_seed{{seed}}.log",
    conda:
        "../../envs/train.yaml"
    threads: RL_THREADS
    priority: LONG_FIRST
    resources:
        **slurm_resources(CFG, "rl"),
    shell:
        "{RL_LAUNCH} -m training.rl --config {CONFIG_FILE} --method {wildcards.method} --seed {wildcards.seed} "
        "--sft {input.sft} --train {input.train} --run-dir {params.run_dir} > {log} 2>&1"


# Not part of `all`: before a long run, `snakemake --profile workflow/profiles/slurm --configfile CFG launch_check`
# submits the rl job's resources and launcher with the start-up check alone (training.launch), in minutes.
rule launch_check:
    output:
        f"{OUT}/launch_check.json",
    params:
        config=config_digest("launch_check"),
    log:
        f"{OUT}/logs/launch_check.log",
    threads: RL_THREADS
    resources:
        **slurm_resources(CFG, "launch_check"),
    shell:
        "{RL_LAUNCH} -m training.launch --config {CONFIG_FILE} --out {output} > {log} 2>&1"
