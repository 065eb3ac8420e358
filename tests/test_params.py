"""Typed strategy parameters: declarations read from constructors, values checked before building."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from workbench.errors import ConfigError
from workbench.params import REQUIRED, check_params, check_value, parameters_of, type_name
from workbench.registry import PARTITIONERS, SAMPLERS


class Example:
    HELP = {"fanouts": "neighbors per layer", "alpha": "a weight"}

    def __init__(self, fanouts: Sequence[int], alpha: float | None = None, mode: str = "auto") -> None:
        self.args = (fanouts, alpha, mode)


def test_parameters_come_from_the_constructor_with_help():
    params = parameters_of(Example)
    assert [(p.name, p.default, p.help) for p in params] == [
        ("fanouts", REQUIRED, "neighbors per layer"),
        ("alpha", None, "a weight"),
        ("mode", "auto", ""),
    ]
    assert [p.type_name() for p in params] == ["list of integers", "number or none", "string"]


@pytest.mark.parametrize(
    "value, hint, expected",
    [
        (3, float, 3.0),
        ([1, 2], Sequence[int], [1, 2]),
        ((1, 2), tuple[int, ...], (1, 2)),
        (None, int | None, None),
    ],
)
def test_good_values_are_converted_as_toml_needs(value, hint, expected):
    assert check_value(value, hint, "x") == expected


@pytest.mark.parametrize(
    "value, hint, message",
    [
        ("15", Sequence[int], "x must be a list of integers, got '15'"),
        ([1.5], Sequence[int], "x must be a list of integers, got [1.5]"),
        (True, int, "x must be an integer, got True"),
        (True, float, "x must be a number, got True"),
        (1, bool, "x must be true or false, got 1"),
        ("a", float | None, "x must be a number or none, got 'a'"),
    ],
)
def test_wrong_types_are_named(value, hint, message):
    with pytest.raises(ConfigError) as err:
        check_value(value, hint, "x")
    assert str(err.value) == message


def test_a_table_is_checked_key_by_key():
    declared = parameters_of(Example)
    assert check_params({"fanouts": [2], "alpha": 1}, declared, "[sampling]") == {
        "fanouts": [2],
        "alpha": 1.0,
    }
    with pytest.raises(
        ConfigError, match=r"\[sampling\]: unknown parameter\(s\) fanout; allowed: fanouts, alpha, mode"
    ):
        check_params({"fanout": [2]}, declared, "[sampling]")
    with pytest.raises(ConfigError, match=r"\[sampling\]: missing parameter\(s\) fanouts"):
        check_params({}, declared, "[sampling]")
    with pytest.raises(ConfigError, match=r"\[sampling\]: alpha must be a number or none, got 'high'"):
        check_params({"fanouts": [2], "alpha": "high"}, declared, "[sampling]")


def test_every_registered_strategy_declares_typed_parameters():
    # Each parameter of every strategy has a type hint the checker understands (no bare Any).
    for registry in (PARTITIONERS, SAMPLERS):
        for name in registry.names():
            for p in registry.parameters(name):
                assert type_name(p.hint) != "any value", f"{registry.kind} {name}: {p.name} has no type"
