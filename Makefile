# Everything a fresh machine needs (Python 3.11 and make) is installed from here.
# The first Python 3.11 that can make a venv, the distribution's own first: Debian builds it with
# profile-guided and link-time optimisation, which runs the scheduler's policy code (the simulator,
# the live pass) 1.2-1.4x faster than a plain source build such as pyenv's on the same machine.
PYTHON ?= $(shell for candidate in /usr/bin/python3.11 python3.11 python3; do \
	found=$$(command -v $$candidate) && $$found -c 'import ensurepip, venv' 2>/dev/null && { echo $$found; break; }; \
	done)
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-$(shell cksum pyproject.toml | cut -d' ' -f1)

.PHONY: install demo test coverage typecheck lint format system-deps browsers slurm-up slurm-down clean

$(STAMP): pyproject.toml
	@test -x $(BIN)/python || { echo "Creating $(VENV) with $(PYTHON)"; $(PYTHON) -m venv $(VENV); }
	@echo "==> Installing the project and its test dependencies into $(VENV) (1-3 min on a fresh machine; pip lists each package)"
	@$(BIN)/python -m pip install --quiet --upgrade pip
	@$(BIN)/python -m pip install --progress-bar off -e '.[test]' | grep -E --line-buffered '^(Collecting|Installing|Successfully)' || true
	@$(BIN)/python -c 'import django, celery, plotly' || { echo "make: the install failed; run: $(BIN)/python -m pip install -e '.[test]'"; exit 1; }
	@rm -f $(VENV)/.installed-*
	@touch $(STAMP)

## make install: the venv and the project with its test dependencies
install: $(STAMP)

## make demo: migrate the embedded SQLite database, load the demo organisation, serve on :8000.
demo: $(STAMP)
	@bash scripts/demo.sh

## make test: the whole test suite (SQLite unless DATABASE_URL is set)
test: install
	SECRET_KEY=$${SECRET_KEY:-test-only-secret-key} $(BIN)/python -m pytest $(PYTEST_ARGS)

## make coverage: the whole suite with branch coverage, printed; fails under the floor in pyproject.toml
coverage:
	@$(MAKE) --no-print-directory test PYTEST_ARGS="--cov --cov-report=term-missing:skip-covered $(PYTEST_ARGS)"

## make typecheck: mypy (django-stubs, djangorestframework-stubs) over portal/, budgets/, scheduling/, notifications/ and gpus_cli/
typecheck: install
	SECRET_KEY=$${SECRET_KEY:-test-only-secret-key} $(BIN)/mypy

lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

format: install
	$(BIN)/ruff check --fix .
	$(BIN)/ruff format .

## Debian packages the browser tests need (run as root; .ci/run does it)
browsers:
	@test -x /usr/bin/chromium || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; }

## docker-compose for the deploy tests
system-deps: browsers
	@command -v docker-compose >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq docker-compose >/dev/null; }

## make slurm-up / slurm-down: the real Slurm test cluster (4 nodes x 8 GPUs; root; see docs/backends.md)
slurm-up:
	@bash scripts/slurm-cluster.sh start

slurm-down:
	@bash scripts/slurm-cluster.sh stop

clean:
	rm -rf $(VENV) var staticfiles test-artifacts .pytest_cache
