"""The C parts, built by pip at install; `optional`: without a C compiler the install still
succeeds and each falls back to Python: the trace decoder to numba or Python
(parsers/xline_decode.py), the residency walk to costmodel/residency_walk.py, the HLO proto
reader's split of each instruction to parsers/hlo_proto.py's own."""

from setuptools import Extension, setup

_WIRE = ["parsers/_protowire.h"]  # the protobuf wire reading both C readers include

setup(ext_modules=[Extension("audit.parsers._xline", ["parsers/_xline.c"], depends=_WIRE, optional=True),
                   Extension("audit.costmodel._recency", ["costmodel/_recency.c"], optional=True),
                   Extension("audit.parsers._hloscan", ["parsers/_hloscan.c"], depends=_WIRE, optional=True)])
