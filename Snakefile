# creditbench: token-level credit assignment in RLVR, trained and evaluated end to end.
#   snakemake --cores 2                      # the embedded default (config/config.yaml)
#   snakemake --cores 2 --configfile config/experiments/ci.yaml
# Rules call `python -m <package>.<cli>`; see README.md for the file map.
from snakemake.utils import min_version

min_version("8.0")


configfile: "config/config.yaml"


report: "workflow/report/workflow.rst"  # the HTML report opens with the experiment and the main table


include: "workflow/rules/common.smk"
include: "workflow/rules/data.smk"
include: "workflow/rules/train.smk"
include: "workflow/rules/eval.smk"
include: "workflow/rules/fidelity.smk"
include: "workflow/rules/report.smk"
include: "workflow/rules/analysis.smk"


rule all:
    input:
        all_outputs(),
    default_target: True
