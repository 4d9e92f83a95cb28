"""The names of the rules a config chooses between.

Each alias is the set of values of one config setting whose rule lives higher up; the config
(``contextledger.config``) validates against them and the policy implements them.
"""

from __future__ import annotations

from typing import Literal

#: ``compaction.overflow_variant``: which usable-window rule decides overflow
#: (``contextledger.policy._overflow``).
OverflowVariant = Literal["opencode", "kilo", "mimo"]
#: ``compaction.count``: how a reported turn is counted.
TokenCountRule = Literal["full", "upstream"]
#: ``output.budget_rule``: which rule trims the requested output.
OutputBudgetRule = Literal["kilo", "mimo"]
#: ``compaction.template``: the summary's structure (``contextledger.policy._templates``).
TemplateName = Literal["opencode", "continuation"]
