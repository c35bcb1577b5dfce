# The two commands a newcomer needs are `make run` (the main job) and `make test`; both set the
# machine up first (scripts/setup.sh is idempotent and takes a second when nothing changed).
.PHONY: setup run test bench doctor mini mini-quick

setup:
	bash scripts/setup.sh

run: setup
	.venv/bin/r3 run --task V --seed 3

# Three test processes, each with its own ROS domain (test/ros_domains.py) and one compute thread, a
# test file each at a time (a file's module fixtures, e.g. a served model, start once), the longest
# files first (test/conftest.py, LONGEST_FILES): 14 min 22 s to 17 min 17 s for 3,045-3,140 tests on 2
# idle cores (22 min 31 s for 2,994 before the longest went first); 27 min 20 s in one process (a smaller suite).
test: setup
	.venv/bin/python -m pytest -n 3 --dist loadfile --no-loadscope-reorder

bench: setup
	.venv/bin/python bench/run_all.py

doctor: setup
	.venv/bin/r3 doctor

# R^3 in miniature (docs/mini.md): the whole recipe on a laptop CPU, about 90 minutes on 2 cores; mini-quick: toy size.
mini: setup
	.venv/bin/r3 mini

mini-quick: setup
	.venv/bin/r3 mini --quick
