# Two jobs: `make demo` (the offline demo) and `make test` (the whole suite). Each sets itself up:
# a virtual environment in .venv with rlmnb and its dev dependencies, made on first use, and the
# JupyterLab extension (extension/) built with `npm ci` from the committed lock (which it never rewrites);
# the venv links to the build, so `make extension` after editing extension/src is all JupyterLab needs.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-stamp

LABEXT := $(VENV)/share/jupyter/labextensions/rlmnb-jupyterlab
EXT_SRC := $(wildcard extension/src/*.ts extension/style/*) extension/package.json extension/tsconfig.json \
           extension/viewer.build.js

.PHONY: demo test bench lint clean extension lock upgrade-check

# constraints.txt pins every dependency to the versions the suite passed with; pyproject.toml keeps ranges for users
$(STAMP): pyproject.toml extension/package.json constraints.txt
	$(PYTHON) -m venv $(VENV)
	rm -rf $(LABEXT) rlmnb/labextension/install.json  # a re-install must not write through the link below
	$(BIN)/python -m pip install --quiet --upgrade pip
	HATCH_JUPYTER_BUILDER_SKIP_NPM=1 $(BIN)/python -m pip install --quiet -c constraints.txt -e ".[dev]"
	rm -rf $(LABEXT) && ln -s $(CURDIR)/rlmnb/labextension $(LABEXT)
	touch $(STAMP)

rlmnb/labextension/package.json: $(EXT_SRC) | $(STAMP)
	cd extension && PATH="$(CURDIR)/$(BIN):$$PATH" npm $(if $(wildcard extension/package-lock.json),ci,install) --no-audit --no-fund --silent && PATH="$(CURDIR)/$(BIN):$$PATH" npm run --silent build
	touch $@

extension: rlmnb/labextension/package.json

demo: $(STAMP) rlmnb/labextension/package.json
	$(BIN)/rlmnb demo

# tests/ on every core, at most 4 (each worker starts kernels, servers and browsers), a test file to a worker so a
# file's module fixtures stay together; then the tutorials under nbval, alone (under xdist one lost its kernel
# mid-notebook while other files ran beside it); both run, and either failing fails the target
PYTEST_TESTS := -m pytest tests -q -n auto --maxprocesses 4 --dist loadfile
PYTEST_NOTEBOOKS := -m pytest notebooks --nbval --nbval-sanitize-with notebooks/sanitize.cfg -q
test: $(STAMP) rlmnb/labextension/package.json
	$(BIN)/python $(PYTEST_TESTS); status=$$?; $(BIN)/python $(PYTEST_NOTEBOOKS) && exit $$status

bench: $(STAMP)
	for b in bench/*.py; do echo "== $$b"; $(BIN)/python $$b || exit 1; done

lint: $(STAMP)
	$(BIN)/ruff check rlmnb tests bench
	$(BIN)/mypy rlmnb
	$(BIN)/lint-imports

# the newest versions pyproject.toml allows, in a venv of their own: the suite against next week's releases
upgrade-check:
	rm -rf .venv-latest && $(PYTHON) -m venv .venv-latest
	.venv-latest/bin/python -m pip install --quiet --upgrade pip
	.venv-latest/bin/python -m pip install --quiet --upgrade -e ".[dev]"
	rm -rf .venv-latest/share/jupyter/labextensions/rlmnb-jupyterlab && ln -s $(CURDIR)/rlmnb/labextension .venv-latest/share/jupyter/labextensions/rlmnb-jupyterlab
	.venv-latest/bin/python $(PYTEST_TESTS); status=$$?; .venv-latest/bin/python $(PYTEST_NOTEBOOKS) && exit $$status

# refresh constraints.txt on purpose: what upgrade-check installed, once its suite passed
lock: upgrade-check
	( sed -n '1,3p' constraints.txt; .venv-latest/bin/pip freeze --exclude-editable | grep -v '^rlmnb' ) > constraints.new
	mv constraints.new constraints.txt

clean:
	rm -rf $(VENV) .venv-latest build dist *.egg-info rlmnb-demo.html rlmnb/labextension extension/lib extension/node_modules extension/tsconfig.tsbuildinfo
