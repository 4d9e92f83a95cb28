"""Public testing helpers: hypothesis strategies for valid session event sequences and the
invariants every log and projection must keep, for property-testing your own strategies."""

from contextledger.testing.invariants import (
    InvariantViolation,
    check_history,
    check_ids_increase,
    check_rebuild_matches,
    check_round_trip,
    check_snapshot_matches,
)
from contextledger.testing.strategies import session_events, split_batches

__all__ = [
    "InvariantViolation",
    "check_history",
    "check_ids_increase",
    "check_rebuild_matches",
    "check_round_trip",
    "check_snapshot_matches",
    "session_events",
    "split_batches",
]
