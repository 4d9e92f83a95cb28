"""Pure decisions: tokens, overflow and budgets, cache breakpoints, pruning, compaction."""
