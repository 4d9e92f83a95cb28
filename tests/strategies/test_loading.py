"""``load_transform`` and the registry of names."""

from __future__ import annotations

import pytest

from contextledger.policy import view_transform
from contextledger.strategies import (
    STRATEGIES,
    CompactAt,
    CompactOnce,
    DefaultStrategy,
    MimoTiers,
    OpencodeDefault,
    StrategyError,
    TransformContext,
    TransformStrategy,
    apply_transform,
    baseline,
    load_transform,
    strategy,
)
from tests.strategies import _custom
from tests.strategies._sessions import session, view_of


def test_load_transform_resolves_functions_and_dotted_attributes() -> None:
    assert load_transform("tests.strategies._custom:last_two") is _custom.last_two
    assert load_transform("tests.strategies._custom:Holder.identity") is _custom.Holder.identity
    assert load_transform("contextledger.strategies:baseline") is baseline


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("tests.strategies._custom", "not of the form 'module.path:function'"),
        (":last_two", "not of the form"),
        ("tests.strategies._custom:", "not of the form"),
        ("tests.strategies.no_such_module:f", "cannot import 'tests.strategies.no_such_module'"),
        ("tests.strategies._custom:missing", "has no 'missing'"),
        ("tests.strategies._custom:Holder.missing", "has no 'Holder.missing'"),
        ("tests.strategies._custom:NOT_CALLABLE", "is a int, not callable"),
    ],
)
def test_load_transform_errors_are_clear(spec: str, message: str) -> None:
    with pytest.raises(StrategyError, match=message):
        load_transform(spec)


def test_a_loaded_transform_that_splits_a_pair_is_refused() -> None:
    name = "tests.strategies._custom:last_two"
    view = view_of(session(2))  # ends: user, assistant (call), tool
    assert [m.role for m in apply_transform(load_transform(name), view)] == ["assistant", "tool"]
    with pytest.raises(StrategyError, match=f"strategy '{name}' separated"):
        apply_transform(load_transform(name), view[:-1], TransformContext(), name=name)


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("os:getcwd", r"strategy 'os:getcwd' raised TypeError: "),
        (
            "tests.strategies._custom:forgets_to_return",
            r"strategy 'tests\.strategies\._custom:forgets_to_return' returned NoneType",
        ),
        (
            "tests.strategies._custom:last_two",
            r"strategy 'tests\.strategies\._custom:last_two' sep",
        ),
    ],
)
def test_a_loaded_strategy_names_its_spec_wherever_its_transform_runs(
    name: str, message: str
) -> None:
    # A request builder or a compactor runs the transform without the strategy's name.
    transform = strategy(name).transform
    assert transform is not None
    with pytest.raises(StrategyError, match=f"^{message}"):
        apply_transform(transform, view_of(session(2))[:-1])


def test_a_transform_named_in_the_configuration_names_its_spec() -> None:
    # config.view.transform reaches the request builder and the compactor this way.
    transform = view_transform(None, "os:getcwd")
    assert transform is not None
    with pytest.raises(StrategyError, match=r"^strategy 'os:getcwd' raised TypeError: "):
        apply_transform(transform, view_of(session(2)))


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("baseline", TransformStrategy),
        ("last-40", TransformStrategy),
        ("truncate-500", TransformStrategy),
        ("age-truncate-500-keep-3", TransformStrategy),
        ("per-tool-keep-last-2", TransformStrategy),
        ("compact-at-12000", CompactAt),
        ("compact-at-12000-structured", CompactOnce),
        ("opencode", OpencodeDefault),
        ("kilo", OpencodeDefault),
        ("mimo-tiers", MimoTiers),
        ("default", DefaultStrategy),
        ("tests.strategies._custom:last_two", TransformStrategy),
    ],
)
def test_the_registry_parses_names(name: str, expected: type) -> None:
    built = strategy(name)
    assert isinstance(built, expected)
    if expected is TransformStrategy:
        assert built.name == name and built.transform is not None


def test_parsed_parameters_reach_the_strategy() -> None:
    at = strategy("compact-at-12000")
    assert isinstance(at, CompactAt) and at.tokens == 12_000
    view = view_of(session(5, output=lambda turn, tool: "y" * 40))
    aged = strategy("age-truncate-4-keep-1")
    assert aged.transform is not None
    outputs = [
        c.output  # type: ignore[union-attr]
        for m in aged.transform(view, TransformContext())
        if m.role == "tool"
        for c in m.content
    ]
    assert [len(o) > 40 for o in outputs] == [False] * 5
    assert outputs[-1] == "y" * 40 and outputs[0].startswith("yyyy\n[... 36 more")


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("truncate", "unknown strategy 'truncate'"),
        ("truncate-x", "unknown strategy"),
        ("sliding-window-3", "unknown strategy"),
        ("last-0", "strategy 'last-0': the number of messages to keep must be >= 1, got 0"),
    ],
)
def test_bad_names_raise(name: str, message: str) -> None:
    with pytest.raises(StrategyError, match=message):
        strategy(name)


def test_every_registry_pattern_is_listed_in_the_error() -> None:
    with pytest.raises(StrategyError) as info:
        strategy("nope")
    assert all(name in str(info.value) for name in STRATEGIES)
