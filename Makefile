# Shortcuts for the scripts under tools/ (which are what README and CI run); native and asan
# build in the virtual environment tools/setup.sh makes (.venv).
.PHONY: demo test lint native asan

demo:
	bash tools/run_demo.sh

test:
	bash tools/run_tests.sh

lint:
	ruff check . && ruff format --check .

native:
	.venv/bin/python setup.py build_ext --inplace

asan:
	RECIO_NATIVE_DEBUG=asan .venv/bin/python setup.py build_ext --inplace --force
