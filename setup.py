"""The packages, found from the folders, and the C parts, built by pip at install.

Packages: every folder with an `__init__.py` under the folders `pyproject.toml` maps into the
`audit` namespace (`package-dir`), and the data folders it ships (`package-data`), so the list is
the tree's and is written nowhere.

C parts, `optional`: without a C compiler the install still succeeds and each falls back to
Python: the trace decoder to numba or Python (parsers/xplane/xline.py), the residency walk to
costmodel/residency_walk.py, the HLO proto reader's split of each instruction to
parsers/hlo/proto.py's own, the record copier to dataclasses.replace (audit/base/stamping.py).
"""

import tomllib
from pathlib import Path

from setuptools import Extension, setup

_HERE = Path(__file__).parent
_CONFIG = tomllib.loads((_HERE / "pyproject.toml").read_text())["tool"]["setuptools"]
_WIRE = ["parsers/wire/_protowire.h"]  # the protobuf wire reading both C readers include


def _packages() -> list[str]:
    found = set(_CONFIG.get("package-data", {}))
    for name, folder in _CONFIG["package-dir"].items():
        for init in (_HERE / folder).rglob("__init__.py"):
            found.add(".".join([name, *init.parent.relative_to(_HERE / folder).parts]))
    return sorted(found)


setup(packages=_packages(),
      ext_modules=[Extension("audit.parsers.xplane._xline", ["parsers/xplane/_xline.c"], depends=_WIRE, optional=True),
                   Extension("audit.costmodel._recency", ["costmodel/_recency.c"], optional=True),
                   Extension("audit.parsers.hlo._hloscan", ["parsers/hlo/_hloscan.c"], depends=_WIRE,
                             optional=True),
                   Extension("audit.base._stamp", ["audit/base/_stamp.c"], optional=True)])
