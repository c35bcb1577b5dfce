# The two commands a newcomer needs are `make run` (the main job) and `make test`; both set the
# machine up first (scripts/setup.sh is idempotent and takes a second when nothing changed).
.PHONY: setup run test bench doctor

setup:
	bash scripts/setup.sh

run: setup
	.venv/bin/r3 run --task V --seed 3

test: setup
	.venv/bin/python -m pytest

bench: setup
	.venv/bin/python bench/run_all.py

doctor: setup
	.venv/bin/r3 doctor
