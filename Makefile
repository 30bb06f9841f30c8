# bench: side-by-side benchmarks (bench/README.md); never part of the test command.
.PHONY: bench bench-quick
bench:
	python3 bench/run.py
bench-quick:
	python3 bench/run.py --quick
