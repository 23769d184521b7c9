# Two commands on a fresh machine: `make serve` (answer calls) and `make test` (run the tests).
# Both install what they need first: Debian packages, the venv (torch==2.13.0 before anything
# that depends on it), the project, and the bundled offline models.
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip
export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1
APT_PACKAGES := sip-tester tshark espeak-ng sox libsndfile1 postgresql chromium chromium-driver kamailio
# llama.cpp is built from source once into a wheelhouse that survives fresh venvs and clones.
# -march=native is avoided on purpose: on this CPU its AMX int8 kernels segfault in
# ggml_backend_amx_mul_mat, and a native wheel would not be portable anyway. AVX2+FMA is.
WHEELHOUSE ?= $(HOME)/.cache/callagent/wheels
LLAMA_VERSION := 0.3.36
LLAMA_CMAKE_ARGS := -DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON \
	-DGGML_BMI2=ON -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF

.PHONY: setup serve test apt bench

setup: $(VENV)/.deps $(VENV)/.models

$(VENV)/.apt:
	@if ! command -v sipp >/dev/null || ! command -v tshark >/dev/null || ! command -v espeak-ng >/dev/null \
	   || ! command -v chromium >/dev/null || ! command -v chromedriver >/dev/null || ! ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 \
	   || ! [ -x /usr/sbin/kamailio ]; then \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  $$SUDO apt-get update -q && $$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -q $(APT_PACKAGES); \
	  : "callagent cluster runs kamailio itself; Debian's service would take port 5060"; \
	  $$SUDO systemctl disable --now kamailio >/dev/null 2>&1 || true; \
	fi
	@mkdir -p $(VENV) && touch $@

$(VENV)/.deps: $(VENV)/.apt pyproject.toml
	@[ -x $(PY) ] || python3.11 -m venv $(VENV) || python3 -m venv $(VENV)
	$(PIP) install -q --upgrade pip
	$(PIP) install -q torch==2.13.0
	@ls $(WHEELHOUSE)/llama_cpp_python-$(LLAMA_VERSION)-*.whl >/dev/null 2>&1 || { \
	  echo "building llama-cpp-python $(LLAMA_VERSION) from source (about 12 min on 2 cores)"; \
	  rm -rf $(WHEELHOUSE).tmp && CMAKE_ARGS="$(LLAMA_CMAKE_ARGS)" $(PIP) wheel --no-deps --no-cache-dir \
	    llama-cpp-python==$(LLAMA_VERSION) -w $(WHEELHOUSE).tmp && mkdir -p $(WHEELHOUSE) \
	    && mv $(WHEELHOUSE).tmp/llama_cpp_python-*.whl $(WHEELHOUSE)/; }
	$(PIP) install -q $(WHEELHOUSE)/llama_cpp_python-$(LLAMA_VERSION)-*.whl
	$(PIP) install -q -e ".[test,bench,postgres]"
	touch $@

$(VENV)/.models: $(VENV)/.deps models/catalog.py models/tts/kokoro_voices.py
	$(VENV)/bin/callagent models install
	touch $@

serve: setup
	$(VENV)/bin/callagent serve --config config.toml

test: setup
	$(VENV)/bin/pytest -q -rs

bench: setup
	$(VENV)/bin/callagent bench pipeline
