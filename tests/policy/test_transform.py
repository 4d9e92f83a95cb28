"""``apply_transform`` refuses what a transform does wrong with a ``StrategyError``."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from contextledger.policy import StrategyError, TransformContext, apply_transform
from contextledger.vocabulary._messages import ModelMessage, ModelText

VIEW = [ModelMessage(role="user", content=(ModelText(text="hi"),), source_id="m1")]


def _raises(view: Sequence[ModelMessage], context: TransformContext) -> list[ModelMessage]:
    raise KeyError("usable")


def test_a_transform_that_raises_is_a_strategy_error_naming_it() -> None:
    with pytest.raises(StrategyError, match=r"strategy 'mine' raised KeyError: 'usable'"):
        apply_transform(_raises, VIEW, name="mine")


def test_a_transform_called_with_the_wrong_arguments_is_a_strategy_error() -> None:
    with pytest.raises(StrategyError, match=r"strategy 'getcwd' raised TypeError"):
        apply_transform(__import__("os").getcwd, VIEW)


@pytest.mark.parametrize(
    ("returned", "message"),
    [
        (None, "returned NoneType, expected a list of ModelMessage"),
        (tuple(VIEW), "returned tuple, expected a list of ModelMessage"),
        ([*VIEW, None], "returned a list holding NoneType, expected a list of ModelMessage"),
        (["hi"], "returned a list holding str, expected"),
    ],
)
def test_a_transform_returning_anything_but_a_list_of_messages_is_refused(
    returned: object, message: str
) -> None:
    with pytest.raises(StrategyError, match=f"strategy 'mine' {message}"):
        apply_transform(lambda view, context: returned, VIEW, name="mine")  # type: ignore[arg-type,return-value]


def test_a_list_of_messages_passes() -> None:
    assert apply_transform(lambda view, context: list(view), VIEW) == VIEW
