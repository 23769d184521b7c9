# Two commands on a fresh machine: `make serve` (answer calls) and `make test` (run the tests).
# Both install what they need first: Debian packages, the venv (torch==2.13.0 before anything
# that depends on it), the project, and the bundled offline models.
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip
export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1
APT_PACKAGES := sip-tester tshark espeak-ng sox libsndfile1 postgresql chromium

.PHONY: setup serve test apt bench

setup: $(VENV)/.deps $(VENV)/.models

$(VENV)/.apt:
	@if ! command -v sipp >/dev/null || ! command -v tshark >/dev/null || ! command -v espeak-ng >/dev/null \
	   || ! command -v chromium >/dev/null || ! ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; then \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  $$SUDO apt-get update -q && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -q $(APT_PACKAGES); \
	fi
	@mkdir -p $(VENV) && touch $@

$(VENV)/.deps: $(VENV)/.apt pyproject.toml
	@[ -x $(PY) ] || python3.11 -m venv $(VENV) || python3 -m venv $(VENV)
	$(PIP) install -q --upgrade pip
	$(PIP) install -q torch==2.13.0
	$(PIP) install -q -e ".[test,postgres]"
	touch $@

$(VENV)/.models: $(VENV)/.deps models/catalog.py
	$(VENV)/bin/callagent models install
	touch $@

serve: setup
	$(VENV)/bin/callagent serve --config config.toml

test: setup
	$(VENV)/bin/pytest -q -rs

bench: setup
	$(VENV)/bin/callagent bench pipeline
