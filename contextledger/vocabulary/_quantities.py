"""Token quantities and ratios as a config writes them: ``300000``, ``"300K"``, ``"1.5M"``,
``"50%"``, ``0.9``, ``"75%"``.

Pure parsers, shared by the config (which checks a value's syntax once, when a config is made)
and the window rules (which resolve a percentage against a model's window).
"""

from __future__ import annotations

import math
import re
from decimal import Decimal, InvalidOperation
from typing import Final

#: A token quantity as configured: a count, or a string such as ``"300K"``, ``"1.5M"``, ``"50%"``.
Quantity = int | str

_QUANTITY = re.compile(r"(\d+(?:\.\d+)?|\.\d+)([km%]?)", re.IGNORECASE)
_SCALE: Final = {"": 1, "k": 1_000, "m": 1_000_000}


def parse_quantity(value: int | float | str, base: int | None = None) -> int | None:
    """A token count from a number or a string: ``300000``, ``"300K"``, ``" 200k "``,
    ``"1.5m"``; ``"50%"`` is that share of ``base``. Returns None for negatives, unknown
    suffixes (``"100G"``), text, ``""``, a percentage without ``base`` and percentages outside
    (0 %, 100 %]. Decimal arithmetic, rounded down: ``"4.35k"`` is exactly 4,350."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value if value >= 0 else None
    if isinstance(value, float):
        return math.floor(value) if math.isfinite(value) and value >= 0 else None
    match = _QUANTITY.fullmatch(value.strip())
    if match is None:
        return None
    number = Decimal(match[1])
    unit = match[2].lower()
    if unit == "%":
        if base is None or not 0 < number <= 100:
            return None
        return math.floor(Decimal(base) * number / 100)
    return math.floor(number * _SCALE[unit])


def parse_trigger_ratio(value: float | str | None) -> float | None:
    """A trigger ratio from a decimal in (0, 1] or a percentage string (``"75%"``); None for
    anything else (``0``, ``-0.5``, ``1.5``, ``"150%"``, ``"abc"``, ``""``)."""
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        ratio = Decimal(repr(float(value)))
    else:
        text = value.strip()
        try:
            ratio = Decimal(text[:-1]) / 100 if text.endswith("%") else Decimal(text)
        except InvalidOperation:
            return None
    if not ratio.is_finite() or not 0 < ratio <= 1:
        return None
    return float(ratio)


def is_reset_budget(value: Quantity) -> bool:
    """True for the reset sentinels ``0``, ``"0"`` and ``""``: "use the model's window"."""
    if isinstance(value, str):
        return value.strip() in ("", "0")
    return value == 0 and not isinstance(value, bool)
