# Shortcuts for the scripts under tools/ (which are what README and CI run).
.PHONY: demo test lint native asan

demo:
	bash tools/run_demo.sh

test:
	bash tools/run_tests.sh

lint:
	ruff check . && ruff format --check .

native:
	python3 setup.py build_ext --inplace

asan:
	RECIO_NATIVE_DEBUG=asan python3 setup.py build_ext --inplace --force
