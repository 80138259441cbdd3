"""The HLO text lexer's fast paths give what its bracket-and-string tokenizer gives."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from audit.parsers.hlo.syntax import TOKEN, bracket_depth, split_attributes, split_top

_PLAIN = st.text(alphabet="abcXYZ019_.-%>:x ", min_size=1, max_size=8)
_QUOTED = st.text(alphabet='ab,{}()[]"\\ /*', max_size=8).map(lambda t: '"' + t.replace("\\", "\\\\").replace('"', '\\"') + '"')
_VALUE = st.recursive(st.one_of(_PLAIN, _QUOTED), lambda inner: st.one_of(
    st.lists(inner, max_size=3).map(lambda xs: "{" + ",".join(xs) + "}"),
    st.lists(inner, max_size=3).map(lambda xs: "[" + " ".join(xs) + "]"),
    st.lists(inner, max_size=3).map(lambda xs: "(" + ", ".join(xs) + ")")), max_leaves=6)
_KEY = st.from_regex(r"[a-z_]{1,6}", fullmatch=True)
_ATTRIBUTES = st.lists(st.tuples(_KEY, _VALUE), max_size=5).map(
    lambda kv: ", ".join(f"{k}={v}" for k, v in kv))


def _tokens_depth(line: str) -> int:
    depth = 0
    for m in TOKEN.finditer(line):
        t = m.group()
        if len(t) == 1 and t != ",":
            depth += 1 if t in "([{" else -1
    return depth


@given(st.one_of(_ATTRIBUTES, st.text(alphabet='a=,{}()[]" /*\\', max_size=30)))
def test_attributes_split_as_the_tokenizer_splits_them(text: str) -> None:
    assert split_attributes(text) == split_top(text)


@given(st.one_of(_ATTRIBUTES, st.text(alphabet='a=,{}()[]" /*\\', max_size=30)))
def test_bracket_depth_counts_what_the_tokenizer_counts(text: str) -> None:
    assert bracket_depth(text) == _tokens_depth(text)


def test_real_attribute_lists() -> None:
    for text in ['kind=kLoop, calls=%fused_computation.23, metadata={op_name="jit(f)/slice" stack_frame_id=4}',
                 'backend_config={"fusion_config":{"kind":"__ynn_fusion"},"outer_dimension_partitions":[]}',
                 'replica_groups=[2,4]<=[8], dimensions={0}', 'slice={[0:16], [0:128]}',
                 'custom_call_target="foo,bar", backend_config="x{y"', 'metadata={op_name="a,b" /* c */}']:
        assert split_attributes(text) == split_top(text)
