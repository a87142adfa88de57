# The two commands of the README: `make demo` and `make test`. Both set up first.
.PHONY: setup setup-matrix browser demo test test-matrix test-fast lint bench kafka-demo docs reference clean

# Every jar the repository resolves stays in .cache/jars (quarantine.spark.jars' spark-<version>/,
# scripts/resolve_jars.sh's spark/ and kafka/); a user's install uses ~/.cache/quarantine/jars.
export QUARANTINE_JAR_CACHE ?= $(CURDIR)/.cache/jars

setup:
	bash scripts/bootstrap.sh

demo: setup
	.venv/bin/quarantine init-demo --out data/demo
	.venv/bin/quarantine run --conf conf/orders_demo.yml

# Two workers (one per core), each with its own Spark session and broker; tests that
# start Spark or broker processes of their own share one worker (tests/conftest.py).
# The 30 slowest tests are listed at the end (where the suite's time goes, issue 11).
# The e2e tests' headless Chromium (Debian's package; the demo does not need it).
browser:
	bash scripts/install_browser.sh

test: setup browser
	.venv/bin/python -m pytest tests -q -n 2 --dist loadgroup --durations=30

# The support matrix's second pair (docs/getting-started.md: Support matrix): Python 3.12 + Spark 4.0 with
# its Delta, in .venv-py312-spark40; the end-to-end subset (tests marked matrix in
# tests/conftest.py: batch, Kafka streaming, replay, expectations, MLflow) on it, with the
# test sessions generating code as a user's does (tests/conftest.py: INTERPRETED).
setup-matrix:
	bash scripts/bootstrap_matrix.sh

test-matrix: setup-matrix
	QUARANTINE_TEST_CODEGEN=1 .venv-py312-spark40/bin/python -m pytest tests -q -m matrix

# The unit tier only (no JVM): seconds, for the edit-test loop. Every unit test lives in
# tests/unit (tests/unit/test_tiers.py), so only that folder is collected (collecting the other
# tiers' modules imports what they need: half the tier's time); both cores run it. The checks
# that collect the whole suite or start xdist over stand-ins are e2e (tests/e2e/test_suite_layout.py).
test-fast: setup
	.venv/bin/python -m pytest tests/unit -q -m unit -n 2 --dist loadgroup

lint: setup
	.venv/bin/ruff check quarantine tests benchmarks
	.venv/bin/mypy

# docs/reference/config.md and stages.md, generated from the config models and the stage table
# (tests/unit/test_config_reference.py fails while the committed pages are stale).
reference: setup
	.venv/bin/python -m quarantine.config.reference --out docs/reference

bench: setup
	.venv/bin/python -m benchmarks.run

clean:
	rm -rf data spark-warehouse mlflow.db mlruns .pytest_cache site

# The manual (docs/, mkdocs.yml) as a site in site/; --strict: a broken link or anchor, or a
# page left out of the nav, fails (tests/unit/test_docs_site.py builds it the same way).
docs: setup
	.venv/bin/mkdocs build --strict
