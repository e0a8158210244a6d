# Two jobs: `make demo` (the offline demo) and `make test` (the whole suite). Each sets itself up:
# a virtual environment in .venv with rlmnb and its dev dependencies, made on first use. Installing
# rlmnb builds the JupyterLab extension (extension/) with npm; the venv then links to the build, so
# `make extension` after editing extension/src is all JupyterLab needs (reload the page).
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-stamp

LABEXT := $(VENV)/share/jupyter/labextensions/rlmnb-jupyterlab
EXT_SRC := $(wildcard extension/src/*.ts extension/style/*) extension/package.json extension/tsconfig.json

.PHONY: demo test bench lint clean extension

$(STAMP): pyproject.toml extension/package.json
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e ".[dev]"
	rm -rf $(LABEXT) && ln -s $(CURDIR)/rlmnb/labextension $(LABEXT)
	touch $(STAMP)

rlmnb/labextension/package.json: $(EXT_SRC) | $(STAMP)
	cd extension && PATH="$(CURDIR)/$(BIN):$$PATH" npm install --no-audit --no-fund --silent && PATH="$(CURDIR)/$(BIN):$$PATH" npm run --silent build
	touch $@

extension: rlmnb/labextension/package.json

demo: $(STAMP)
	$(BIN)/rlmnb demo

test: $(STAMP) rlmnb/labextension/package.json
	$(BIN)/python -m pytest tests notebooks --nbval --nbval-sanitize-with notebooks/sanitize.cfg -q

bench: $(STAMP)
	for b in bench/*.py; do echo "== $$b"; $(BIN)/python $$b || exit 1; done

lint: $(STAMP)
	$(BIN)/ruff check rlmnb tests bench
	$(BIN)/mypy rlmnb
	$(BIN)/lint-imports

clean:
	rm -rf $(VENV) build dist *.egg-info rlmnb-demo.html rlmnb/labextension extension/lib extension/node_modules extension/tsconfig.tsbuildinfo
