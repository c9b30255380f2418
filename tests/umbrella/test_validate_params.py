"""The one helper for declarative parameter constraints (normlab._validate.validate_params)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest

from normlab._validate import Boolean, Check, Int, NoneOr, Options, Real, Relation, validate_params, validated


@validated
@dataclass(frozen=True)
class _Spec:
    n: int
    p: float = 0.5
    mode: str = "exact"
    k: object = None
    flag: bool = False
    _parameter_constraints = {"n": Int(2), "p": Real(0, 1), "mode": Options("exact", "sample"),
                              "k": NoneOr(Int(1)), "flag": Boolean()}


def test_values_are_checked_in_order_and_normalised():
    s = _Spec(np.int64(3), 1, "sample", 4, np.bool_(True))
    assert s == _Spec(3, 1.0, "sample", 4, True)
    assert type(s.n) is int and type(s.p) is float and type(s.flag) is bool


@pytest.mark.parametrize("kw, err, msg", [
    (dict(n=1), ValueError, "n must be >= 2; got 1"),
    (dict(n=True), TypeError, "n must be an int; got bool True"),
    (dict(n=2.0), TypeError, "n must be an int; got float 2.0"),
    (dict(n=3, p=float("nan")), TypeError, "p must be a finite number; got nan"),
    (dict(n=3, p=2), ValueError, "p must be <= 1; got 2.0"),
    (dict(n=3, mode="x"), ValueError, "mode must be one of ('exact', 'sample'); got 'x'"),
    (dict(n=3, k=0), ValueError, "k must be >= 1; got 0"),
    (dict(n=3, flag=1), TypeError, "flag must be a bool; got int"),
    (dict(n=1, p=5), ValueError, "n must be >= 2"),  # the first parameter declared is reported first
])
def test_one_line_errors(kw, err, msg):
    with pytest.raises(err) as info:
        _Spec(**kw)
    assert str(info.value).startswith(msg) and "\n" not in str(info.value)


def test_plain_mappings_custom_rules_and_open_bounds():
    def even(v, name):
        if v % 2:
            raise ValueError(f"{name} must be even; got {v}")
        return v

    out = validate_params({"a": 4, "b": 0.1, "c": "free"}, {"a": Check(even), "b": Real(0, open_low=True)},
                          prefix="--")
    assert out == {"a": 4, "b": 0.1, "c": "free"}
    with pytest.raises(ValueError, match="--a must be even"):
        validate_params({"a": 3}, {"a": Check(even)}, prefix="--")
    with pytest.raises(ValueError, match="b must be > 0"):
        validate_params({"b": 0}, {"b": Real(0, open_low=True)})


def test_constraints_must_name_fields():
    with pytest.raises(TypeError, match="names no field"):
        @validated
        @dataclass(frozen=True)
        class _Bad:
            a: int
            _parameter_constraints = {"b": Int()}


@validated
@dataclass(frozen=True)
class _Cap:
    stop: str = "max"
    unit: str = "rounds"
    cap: object = None
    note: object = None
    _parameter_constraints = {
        "unit": Options("rounds", "interactions"),
        "cap": Relation(lambda v, name, vals: v if v is None else Int(1).check(v, f"max_{vals['unit']}")),
        "stop": Relation(lambda v, name, vals: v if v != "cap" or vals["cap"] is not None
                         else (_ for _ in ()).throw(ValueError("stop='cap' needs a cap"))),
    }


def test_relations_read_the_other_parameters_in_declaration_order():
    assert _Cap(unit="interactions", cap=np.int64(5)).cap == 5
    with pytest.raises(ValueError, match="^max_interactions must be >= 1; got 0$"):
        _Cap(unit="interactions", cap=0)
    with pytest.raises(ValueError, match="^max_rounds must be >= 1"):
        _Cap(cap=0, stop="cap")  # cap is declared before stop: its error comes first
    with pytest.raises(ValueError, match="needs a cap"):
        _Cap(stop="cap")
    assert validate_params({"a": 2, "b": 3}, {"b": Relation(lambda v, n, vals: v + vals["a"])}) == {"a": 2, "b": 5}
