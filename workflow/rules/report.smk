rule report:
    input:
        summaries=eval_targets(),
        metrics=[f"{OUT}/runs/{m}/seed{s}/metrics.jsonl" for m in CFG.methods for s in CFG.seeds],
    output:
        main=report(f"{OUT}/tables/main.md", caption="../report/main.rst", category="Tables"),
        wallclock=report(f"{OUT}/tables/wallclock.md", caption="../report/wallclock.rst", category="Tables"),
        figures=touch(f"{OUT}/figures/done"),
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
