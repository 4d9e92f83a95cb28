"""Pure decisions: tokens, overflow and budgets, tool-output truncation."""
