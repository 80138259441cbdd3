"""The install without a C compiler, for the suite run on the fallbacks (`make test-fallbacks`): with
AUDIT_TEST_WITHOUT_C=1, tests/conftest.py puts this folder first on PYTHONPATH, so the test process and
every Python process it starts import this first, and none can import the C extensions: each part
takes the path it takes where pip built no C (the trace decoder numba or Python, the HLO split, the
record copier and the residency walk Python)."""

import sys

C_EXTENSIONS = frozenset({"audit.parsers.xplane._xline", "audit.parsers.hlo._hloscan", "audit.base._stamp",
                          "audit.costmodel._recency"})


class NoCompiler:
    """A finder that refuses the C extensions, as an install without them would."""

    def find_spec(self, name, path=None, target=None):
        if name in C_EXTENSIONS:
            raise ImportError(f"No module named {name!r}", name=name)  # as on an install without a compiler
        return None


if not any(isinstance(finder, NoCompiler) for finder in sys.meta_path):
    sys.meta_path.insert(0, NoCompiler())
