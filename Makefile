# The two commands of the README: `make demo` and `make test`. Everything else is a helper.
.PHONY: bootstrap native test unit demo stack-up stack-down stack-status lint clean

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
