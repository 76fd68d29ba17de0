rule report:
    input:
        summaries=eval_targets(),
        metrics=[f"{OUT}/runs/{m}/seed{s}/metrics.jsonl" for m in CFG.methods for s in CFG.seeds],
    output:
        main=f"{OUT}/tables/main.md",
        wallclock=f"{OUT}/tables/wallclock.md",
        tables=report(directory(f"{OUT}/tables"), patterns=["{name}.html"],
                      caption="../report/tables.rst", category="Tables", labels={"table": "{name}"}),
        figures=report(directory(f"{OUT}/figures"), patterns=["{name}.png"],
                       caption="../report/figures.rst", category="Figures", labels={"figure": "{name}"}),
    params:
        baseline=CFG.report.baseline,
    log:
        f"{OUT}/logs/report.log",
    conda:
        "../../envs/report.yaml"
    threads: 1
    shell:
        "{PY} -m evaluation.report --results {OUT} --out {OUT}/tables --baseline {params.baseline} "
        "--plots --figures {OUT}/figures > {log} 2>&1"
