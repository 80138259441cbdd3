"""The C trace decoder, built by pip at install; `optional`: without a C compiler the install
still succeeds and the decoder falls back to numba or Python (parsers/xline_decode.py)."""

from setuptools import Extension, setup

setup(ext_modules=[Extension("audit.parsers._xline", ["parsers/_xline.c"], optional=True)])
