# The two commands of the README: `make demo` and `make test`. Everything else is a helper.
.PHONY: bootstrap native test check unit docs demo stack-up stack-down stack-status lint clean

PYTEST ?= .venv/bin/pytest
# Test workers: the suite waits on servers about half the time, so two workers on 2 cores
# take 21-23 minutes instead of ~34 (`make test TEST_WORKERS=0` runs it in one process).
TEST_WORKERS ?= 2
LAKE ?= local

bootstrap:            ## install system packages, .venv and the stack's jars (idempotent)
	scripts/bootstrap

native:               ## rebuild the C extension after editing connector/native/*.c
	.venv/bin/pip install -q --no-deps -e .

test: bootstrap       ## lint (ruff, mypy), then the whole suite against real PostgreSQL 15/18, Kafka, registry, Spark
	.venv/bin/ruff check connector spark_jobs tests scripts benchmarks
	.venv/bin/mypy connector spark_jobs
	$(PYTEST) -q -p no:cacheprovider -n $(TEST_WORKERS) --dist loadfile --durations=30

unit: bootstrap       ## pure-code tests only (no servers)
	$(PYTEST) -q tests/unit

check: bootstrap      ## the fast tier to iterate with: lint, mypy and the pure-code tests (no servers)
	.venv/bin/ruff check connector spark_jobs tests scripts benchmarks
	.venv/bin/mypy connector spark_jobs
	$(PYTEST) -q -p no:cacheprovider -n $(TEST_WORKERS) tests/unit

# The suite checks both (tests/unit/test_docs.py): the reference equals what the parsers give,
# and the site builds with --strict (a broken link or anchor, a page missing from nav fails).
docs: bootstrap       ## regenerate docs/reference/options.md and docs/index.md, build the site in .site/
	.venv/bin/python scripts/docs_options.py
	.venv/bin/python scripts/docs_index.py
	.venv/bin/mkdocs build --strict --site-dir .site

demo: bootstrap       ## the local stack and the product end to end (LAKE=s3: the lake in the stack's bucket)
	PGCDC_DEMO_LAKE=$(LAKE) scripts/demo

stack-up: bootstrap
	scripts/stack up

stack-down:
	scripts/stack down

stack-status:
	scripts/stack status

lint:
	.venv/bin/ruff check connector spark_jobs tests scripts benchmarks
	.venv/bin/mypy connector spark_jobs

clean: stack-down     ## stop the stack and delete its data (keeps the download cache)
	rm -rf .stack/postgres .stack/kafka .stack/registry
