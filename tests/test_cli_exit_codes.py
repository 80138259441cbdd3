"""Exit codes mean what they say: 2 is bad input or usage, 4 is a bug in audit."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from audit.cli import main
from audit.base.errors import ExitCode


def _crash(*args, **kwargs):
    raise KeyError("op_name")


def test_a_fault_inside_a_handler_exits_4_with_one_line_and_a_traceback_file(monkeypatch, capsys):
    monkeypatch.setattr("audit.commands.calc.resolve_hardware", _crash)
    code = main(["calc", "matmul", "--m", "64", "--k", "64", "--n", "64", "--hardware", "h100"])
    err = capsys.readouterr().err.strip()
    assert code == ExitCode.INTERNAL == 4
    assert len(err.splitlines()) == 1 and "Traceback" not in err
    match = re.fullmatch(r"audit: internal error: KeyError: 'op_name' \(please report; details in (.+)\)", err)
    assert match, err
    saved = Path(match.group(1))
    try:
        text = saved.read_text()
        assert "Traceback (most recent call last)" in text and "KeyError: 'op_name'" in text and "_crash" in text
    finally:
        saved.unlink()


def test_the_same_fault_with_debug_shows_the_traceback(monkeypatch):
    monkeypatch.setattr("audit.commands.calc.resolve_hardware", _crash)
    with pytest.raises(KeyError, match="op_name"):
        main(["--debug", "calc", "matmul", "--m", "64", "--k", "64", "--n", "64", "--hardware", "h100"])


def test_bad_input_still_exits_2_and_says_what_is_wrong(tmp_path, capsys):
    missing = tmp_path / "absent.xplane.pb"
    assert main(["inspect", str(missing)]) == ExitCode.INPUT == 2
    err = capsys.readouterr().err.strip()
    assert err == f"audit: error: {missing}: no such file or directory"


def test_a_click_usage_error_exits_2(capsys):
    assert main(["diff"]) == 2
    assert "Missing argument" in capsys.readouterr().err
