# Entry points; each sets up what it needs (venv, Docker engine, node images) on first use.
#   make test      lint, unit tests and every molecule scenario (scripts/test.sh)
#   make demo      a local node container provisioned with site.yml (scripts/demo.sh)
#   make bench     first converge and no-op re-run of site.yml on 1 and 4 nodes (bench/provision.py)
#                  e.g. make bench BENCH_ARGS="--nodes 1 --pipelining on"
PYTHON ?= .venv/bin/python
BENCH_ARGS ?=

.PHONY: test demo bench bench-setup

test:
	bash scripts/test.sh

demo:
	bash scripts/demo.sh

bench-setup:
	bash -c '. scripts/lib.sh && ensure_venv && ensure_docker && ensure_images debian12'

bench: bench-setup
	bash -c '. scripts/lib.sh && resolve_upstream_dir && exec $(PYTHON) bench/provision.py $(BENCH_ARGS)'
