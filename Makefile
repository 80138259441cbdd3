# Two entry points, both from a fresh clone with Python 3.11:
#   make demo   set up, then profile the bundled transformer step on 8 simulated CPU devices
#   make test   set up, run `make check`, then run the test suite
#   make test-quick  the suite without the tests marked slow or browser, while working on a change
#   make test-fallbacks  the quick suite with no C extension loaded, as on an install without a compiler
#   make test-versions  the quick suite on Python 3.12 and 3.13, each in its own .venv-X.Y (CI runs both)
#   make check  ruff, then mypy (strict everywhere but the reference workloads)
#   make fuzz   the fuzz tests with many more examples, then a hostile-input campaign (minutes)
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: install check demo test test-quick test-fallbacks test-versions browser bench fuzz clean

$(STAMP): pyproject.toml setup.py parsers/xplane/_xline.c costmodel/_recency.c parsers/hlo/_hloscan.c parsers/wire/_protowire.h audit/base/_stamp.c
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[test,tpu]'
	$(BIN)/python -m audit.prepare  # compile the trace decoder and calibrate the CPU now, not on the first run
	touch $(STAMP)

install: $(STAMP)

# Headless Chromium for the HTML report tests: Debian's package, never a downloaded build.
browser:
	@command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1 || \
	  { if [ "$$(id -u)" = 0 ]; then apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; \
	    else sudo apt-get update -qq && sudo DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; fi; }

demo: $(STAMP)
	$(BIN)/audit run --out out/demo --json out/demo/report.json --html out/demo/report.html --markdown out/demo/report.md

# mypy sees the installed layout (package-dir maps audit.parsers to parsers/ etc.) through a symlink tree.
TYPECHECK := build/typecheck/audit
check: $(STAMP)
	$(BIN)/ruff check .
	rm -rf $(TYPECHECK) && mkdir -p $(TYPECHECK)
	ln -s $(CURDIR)/audit/* $(TYPECHECK)/
	for top in parsers costmodel reports workloads; do ln -s $(CURDIR)/$$top $(TYPECHECK)/$$top; done
	$(BIN)/mypy

# --durations: the slowest tests, printed after the summary, so a test that grew slow is seen.
test: $(STAMP) browser check
	$(BIN)/pytest -q --durations=25

# Every marker registered in pyproject.toml is deselected here (a test checks it).
test-quick: $(STAMP)
	$(BIN)/pytest -q --durations=10 -m "not slow and not browser"

# The quick suite on the install without a C compiler: every process refuses the C extensions
# (tests/conftest.py), so each part takes its fallback; the tests of the C build itself are skipped.
test-fallbacks: $(STAMP)
	AUDIT_TEST_WITHOUT_C=1 $(BIN)/pytest -q -m "not slow and not browser"

# The other Pythons the package claims (requires-python >= 3.11): the quick suite in a venv of each,
# installed as make install does; scripts/python-of.sh finds the interpreter or fails naming it.
PYTHON_VERSIONS := 3.12 3.13
test-versions:
	@for v in $(PYTHON_VERSIONS); do \
	  py=$$(scripts/python-of.sh $$v) || exit 1; \
	  if [ ! -f .venv-$$v/.installed ]; then \
	    $$py -m venv .venv-$$v && .venv-$$v/bin/pip install --quiet --upgrade pip && \
	    .venv-$$v/bin/pip install --quiet -e '.[test,tpu]' && .venv-$$v/bin/python -m audit.prepare && \
	    touch .venv-$$v/.installed || exit 1; \
	fi; \
	  echo "== Python $$v: the quick suite"; \
	  .venv-$$v/bin/pytest -q -p no:cacheprovider -m "not slow and not browser" || exit 1; \
	done

# The speed benchmarks from a fresh clone (their inputs made first where missing), written into
# bench/RESULTS.md between its speed markers with the machine's load (bench/record_speed.py):
# audit beside XProf on the big profile (first run after a bare install, warm, then with two
# CPU-bound processes beside both), the 50 MB HLO programs beside XLA's parser, and the NVIDIA
# path against the time to read its inputs. Tens of minutes; run it on a quiet machine.
bench: $(STAMP)
	@ls bench/data/big/plugins/profile/*/*.xplane.pb >/dev/null 2>&1 || $(BIN)/python bench/make_big_profile.py
	$(BIN)/python bench/record_speed.py

# The fuzz tests with many more examples (hypothesis profile "fuzz"), then a hostile-input campaign
# through the CLI with a fresh seed (bench/hostile_campaign.py): minutes, not part of `make test`.
fuzz: $(STAMP)
	AUDIT_FUZZ=1 $(BIN)/pytest -q tests/test_fuzz_hostile.py tests/test_fuzz_inputs.py tests/test_fuzz_paths.py
	$(BIN)/python bench/hostile_campaign.py --seed $$(date +%s) --per-family 25

clean:
	rm -rf $(VENV) .venv-3.* out build *.egg-info
