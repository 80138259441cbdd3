#!/usr/bin/env bash
# Print the path of a Python interpreter of version X.Y (e.g. 3.13): `pythonX.Y` on PATH, else one that
# pyenv or uv installed. Exit 1 with one line when there is none, so the caller fails rather than skips.
set -euo pipefail
v="${1:?usage: python-of.sh X.Y}"
if command -v "python$v" >/dev/null 2>&1 && "python$v" -c "import sys; assert sys.version_info[:2] == tuple(map(int, '$v'.split('.')))" 2>/dev/null; then
  command -v "python$v"; exit 0
fi
if command -v pyenv >/dev/null 2>&1; then
  for dir in $(ls -d "$(pyenv root)/versions/$v".* 2>/dev/null | sort -V -r); do
    [ -x "$dir/bin/python$v" ] && { echo "$dir/bin/python$v"; exit 0; }
  done
fi
if command -v uv >/dev/null 2>&1 && uv python find "$v" 2>/dev/null; then exit 0; fi
echo "no Python $v here: install it (pyenv install $v, or uv python install $v)" >&2
exit 1
