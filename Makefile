# Two jobs: `make demo` (the offline demo) and `make test` (the whole suite). Each sets itself up:
# a virtual environment in .venv with rlmnb and its dev dependencies, made on first use.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-stamp

.PHONY: demo test bench lint clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e ".[dev]"
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/rlmnb demo

test: $(STAMP)
	$(BIN)/python -m pytest tests notebooks --nbval --nbval-sanitize-with notebooks/sanitize.cfg -q

bench: $(STAMP)
	for b in bench/*.py; do echo "== $$b"; $(BIN)/python $$b || exit 1; done

lint: $(STAMP)
	$(BIN)/ruff check rlmnb tests bench
	$(BIN)/mypy rlmnb

clean:
	rm -rf $(VENV) build dist *.egg-info rlmnb-demo.html
