# Two entry points for a new user: `make demo` and `make test`. Each builds .venv on first use.
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed-stamp
CORE_STAMP := $(VENV)/.core-stamp
EXTRAS ?= test
# The reference implementation (mosaicml-streaming) for tests/parity, in a venv of its own: its
# import name `streaming` collides with ours. When it cannot be built the parity tests skip
# (and fail under CI=true, where parity must be checked).
REF_VENV  ?= .venv-reference
REF_STAMP := $(REF_VENV)/.installed-stamp
# Composer and llm-foundry (tests/clients) join the test venv without their dependency pins; see
# tests/support/clients-requirements.txt. The reference (mosaicml-streaming) must never be there.
CLIENTS_REQ   := tests/support/clients-requirements.txt
CLIENTS_STAMP := $(VENV)/.clients-stamp
# The tests run on TEST_WORKERS pytest-xdist workers, whole modules per worker
# (tests/conftest.py); `make test TEST_WORKERS=` runs them in one process.
TEST_WORKERS ?= 2
XDIST := $(if $(TEST_WORKERS),-n $(TEST_WORKERS))

.PHONY: demo test lint bench clean venv azurite reference-venv clients lock

# Azurite (the Azure Blob Storage emulator the tests start) lives in .node/, never globally.
AZURITE_VERSION := 3.35.0
AZURITE_STAMP   := .node/.azurite-$(AZURITE_VERSION)

venv: $(STAMP)

# Every install takes its versions from a lock file (pip constraints) that `make lock` writes, so a
# new release of a dependency cannot change what a clone of yesterday's main installs. The
# library's own ranges in pyproject.toml stay wide; the locks pin only what the repo installs.
LOCK      := requirements/test.lock
REF_LOCK  := requirements/reference.lock
HOLDS     := requirements/holds.txt
PIP       := $(PY) -m pip install -q --disable-pip-version-check
# The long installs print pip's own lines (what is collected, downloaded, installed); a line
# before each step says what it installs and about how long it takes.
PIP_SHOWN := $(PY) -m pip install --disable-pip-version-check
SAY       := @printf '\n==> %s\n'

# The core venv: torch and this package with its core dependencies only (numpy, zstandard, boto3,
# xxhash, tqdm), no extras. `make demo` needs nothing more; tests/test_demo.py checks it.
$(CORE_STAMP): pyproject.toml $(LOCK)
	$(SAY) "[1/3] $(VENV): a virtual environment with current pip, setuptools and wheel (seconds)"
	test -x $(PY) || python3 -m venv $(VENV)
	$(PIP) -c $(LOCK) --upgrade pip setuptools wheel
	$(SAY) "[2/3] torch 2.13.0 (about 200 MB; under a minute from a local wheel or pip's cache)"
	$(PIP_SHOWN) torch==2.13.0
	$(SAY) "[3/3] mds-streaming and its core dependencies: numpy, zstandard, boto3, xxhash, tqdm (seconds)"
	$(PIP) -c $(LOCK) --no-build-isolation -e .
	touch $(CORE_STAMP)

$(STAMP): $(CORE_STAMP)
	$(SAY) "the test extra: pytest, the S3/GCS/Azure emulators, pyarrow, pyspark, Ray, Dask, Lightning, transformers... (about 160 packages, 2.6 GB: several minutes)"
	$(PIP_SHOWN) -c $(LOCK) --no-build-isolation -e '.[$(EXTRAS)]'
	touch $(STAMP)

clients: $(CLIENTS_STAMP)

$(CLIENTS_STAMP): $(STAMP) $(CLIENTS_REQ)
	$(PIP) --no-deps -r $(CLIENTS_REQ)
	$(PIP) -c $(LOCK) opentelemetry-sdk torch==2.13.0
	@! $(PY) -m pip show -q mosaicml-streaming 2>/dev/null || \
	  { echo "mosaicml-streaming is installed in $(VENV): it would shadow this project"; exit 1; }
	touch $(CLIENTS_STAMP)

reference-venv: $(REF_STAMP)

$(REF_STAMP): $(REF_LOCK)
	@( test -x $(REF_VENV)/bin/python || python3 -m venv $(REF_VENV) ) && \
	  $(REF_VENV)/bin/python -m pip install -q -c $(REF_LOCK) torch==2.13.0 mosaicml-streaming==0.13.0 && \
	  touch $(REF_STAMP) || \
	  echo "reference venv $(REF_VENV) could not be built: tests/parity will be skipped"

demo: $(CORE_STAMP)
	$(SAY) "the demo: write, read, pack, mix two sources with 2 workers, stop and resume (seconds)"
	$(PY) -m streaming.cli.demo

azurite: $(AZURITE_STAMP)

$(AZURITE_STAMP):
	npm install --silent --no-audit --no-fund --prefix .node azurite@$(AZURITE_VERSION)
	touch $(AZURITE_STAMP)

test: $(STAMP) $(CLIENTS_STAMP) $(AZURITE_STAMP) $(REF_STAMP)
	$(PY) -m ruff check streaming writers tests benchmarks
	STREAMING_REFERENCE_PYTHON=$(abspath $(REF_VENV))/bin/python $(PY) -m pytest -q -p no:cacheprovider --durations=25 $(XDIST) tests

lint: $(STAMP)
	$(PY) -m ruff check streaming writers tests benchmarks

bench: $(STAMP)
	bash benchmarks/peers/setup.sh
	$(PY) benchmarks/format.py
	$(PY) benchmarks/plan.py
	$(PY) benchmarks/iterate.py
	$(PY) benchmarks/remote.py
	$(PY) benchmarks/packing.py
	$(PY) benchmarks/convert.py
	$(PY) benchmarks/cache_egress.py

# `make lock`: resolve the test extra (with Composer's and llm-foundry's runtime imports) and the
# reference's venv afresh in scratch venvs, under the holds, and write both lock files. Run it on
# purpose, then `make test`, and commit the locks with the change that needed them.
LOCK_VENV := .venv-lock
lock:
	rm -rf $(LOCK_VENV) $(LOCK_VENV)-ref
	python3 -m venv $(LOCK_VENV)
	$(LOCK_VENV)/bin/python -m pip install -q --upgrade pip setuptools wheel
	$(LOCK_VENV)/bin/python -m pip install -q torch==2.13.0
	$(LOCK_VENV)/bin/python -m pip install -q -c $(HOLDS) -e '.[test]' torch==2.13.0
	$(LOCK_VENV)/bin/python -m pip install -q --no-deps -r $(CLIENTS_REQ)
	$(LOCK_VENV)/bin/python -m pip install -q -c $(HOLDS) opentelemetry-sdk torch==2.13.0
	{ echo "# Written by \`make lock\` from pyproject.toml's test extra, $(CLIENTS_REQ) and $(HOLDS)."; \
	  echo "# Do not edit by hand: change those, then run \`make lock\`."; \
	  $(LOCK_VENV)/bin/python -m pip freeze --all --exclude-editable | sed 's/+cpu$$//'; } > $(LOCK)
	python3 -m venv $(LOCK_VENV)-ref
	$(LOCK_VENV)-ref/bin/python -m pip install -q --upgrade pip
	$(LOCK_VENV)-ref/bin/python -m pip install -q torch==2.13.0 mosaicml-streaming==0.13.0
	{ echo "# Written by \`make lock\`: the reference's venv (mosaicml-streaming 0.13.0) for tests/parity."; \
	  echo "# Do not edit by hand: run \`make lock\`."; \
	  $(LOCK_VENV)-ref/bin/python -m pip freeze --all | sed 's/+cpu$$//'; } > $(REF_LOCK)
	rm -rf $(LOCK_VENV) $(LOCK_VENV)-ref

clean:
	rm -rf $(VENV) $(REF_VENV) $(LOCK_VENV) $(LOCK_VENV)-ref build *.egg-info .node
