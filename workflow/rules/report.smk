# seeds: auto: after look j of the sequential design, which methods get the next batch of seeds (common.smk).
checkpoint seed_plan:
    input:
        look_evals,
    output:
        f"{OUT}/seeds/look{{look}}.json",
    params:
        methods=",".join(CFG.methods),
        baseline=CFG.report.baseline,
        looks=",".join(map(str, LOOKS)),
        margin=CFG.report.equivalence_margin,
        spending=CFG.report.spending,
    log:
        f"{OUT}/logs/seed_plan/look{{look}}.log",
    conda:
        "../../envs/report.yaml"
    threads: 1
    shell:
        "{PY} -m evaluation.report.plan --results {OUT} --eval-dir eval/{MAIN_SUITE} --out {output} "
        "--methods {params.methods} "
        "--baseline {params.baseline} --looks {params.looks} --look {wildcards.look} "
        "--equivalence-margin {params.margin} --spending {params.spending} > {log} 2>&1"


rule report:
    input:
        summaries=report_summaries,
        metrics=report_metrics,
        fidelity=fidelity_outputs(),  # fidelity.smk; copied into tables/ and figures/ below
    output:
        main=f"{OUT}/tables/main.md",
        wallclock=f"{OUT}/tables/wallclock.md",
        power=f"{OUT}/tables/power.md",
        tables=report(directory(f"{OUT}/tables"), patterns=["{name}.html"],
                      caption="../report/tables.rst", category="Tables", labels={"table": "{name}"}),
        figures=report(directory(f"{OUT}/figures"), patterns=["{name}.png"],
                       caption="../report/figures.rst", category="Figures", labels={"figure": "{name}"}),
    params:
        baseline=CFG.report.baseline,
        audit=CFG.report.audit_max_samples,
        drops=CFG.report.max_drop_pct,
        mix="--mix-engines " if CFG.report.mix_engines else "",
        verdicts=f"--equivalence-margin {CFG.report.equivalence_margin} --spending {CFG.report.spending}"
        + (f" --looks {','.join(map(str, LOOKS))}" if LOOKS else ""),
    log:
        f"{OUT}/logs/report.log",
    conda:
        "../../envs/report.yaml"
    threads: 1
    shell:
        "{PY} -m evaluation.report --results {OUT} --eval-dir eval/{MAIN_SUITE} --out {OUT}/tables "
        "--baseline {params.baseline} "
        "--audit-max-samples {params.audit} --max-drop-pct {params.drops} {params.mix}{params.verdicts} "
        "--plots --figures {OUT}/figures > {log} 2>&1" + fidelity_copy()


# Every other suite (config eval.suites) has its own tables, OUT/<suite>_tables (real: OUT/real_tables).
for _suite in OTHER_SUITES:

    rule:
        name:
            f"suite_report_{_suite}"
        input:
            summaries=suite_targets(_suite),
            metrics=[f"{OUT}/runs/{m}/seed{s}/metrics.jsonl" for m in CFG.methods for s in CFG.seeds],
        output:
            report(directory(f"{OUT}/{tables_dir(_suite)}"), patterns=["{name}.html"], caption="../report/tables.rst",
                   category=f"Suite {_suite}", labels={"table": "{name}"}),
        params:
            eval_dir=f"eval/{_suite}",
            baseline=CFG.report.baseline,
            audit=CFG.report.audit_max_samples,
            drops=CFG.report.max_drop_pct,
            mix="--mix-engines " if CFG.report.mix_engines else "",
            margin=CFG.report.equivalence_margin,
        log:
            f"{OUT}/logs/{tables_dir(_suite)}.log",
        conda:
            "../../envs/report.yaml"
        threads: 1
        shell:
            "{PY} -m evaluation.report --results {OUT} --eval-dir {params.eval_dir} --out {output} "
            "--baseline {params.baseline} --audit-max-samples {params.audit} --max-drop-pct {params.drops} "
            "{params.mix}--equivalence-margin {params.margin} > {log} 2>&1"
