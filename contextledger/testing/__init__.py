"""Public testing helpers: hypothesis strategies for valid session event sequences and the
invariants every log, projection and model view must keep (ids increase, incremental ==
rebuild, snapshots restore, events round-trip, tool calls never split from their results,
replay determinism, live view == rebuilt view, prefix stability) and ``appends_only`` (the
events after a step that leave earlier messages alone), for property-testing your own
strategies. ``contextledger.testing.loopback`` is a provider on 127.0.0.1 to run an agent loop
against (scripted tool loops, the APIs' validation, cache usage, faults on demand), and
``run_scenario`` runs many agent loops through the runtime against it and checks them.
``StoreContract`` is the ``EventStore`` contract as a pytest suite: subclass it with a
factory of your backend's stores. ``SessionBuilder`` writes valid events by hand, on a
simulated clock, for example-based tests."""

from contextledger.testing._agentloop import run_scenario, run_scenario_in_asyncio
from contextledger.testing._body_replay import BodyReplay, replay_bodies
from contextledger.testing._builder import SessionBuilder
from contextledger.testing._invariants import (
    InvariantViolation,
    check_history,
    check_ids_increase,
    check_live_view_matches,
    check_prefix_stable,
    check_rebuild_matches,
    check_round_trip,
    check_snapshot_matches,
    check_tool_pairs,
    check_view_deterministic,
)
from contextledger.testing._scenario import (
    AgentOutcome,
    Overflow,
    Scenario,
    ScenarioRun,
    lower_bound_read_share,
)
from contextledger.testing._steps import appends_only
from contextledger.testing._store_contract import StoreContract
from contextledger.testing._strategies import session_events, split_batches

__all__ = [
    "AgentOutcome",
    "BodyReplay",
    "InvariantViolation",
    "Overflow",
    "Scenario",
    "ScenarioRun",
    "SessionBuilder",
    "StoreContract",
    "appends_only",
    "check_history",
    "check_ids_increase",
    "check_live_view_matches",
    "check_prefix_stable",
    "check_rebuild_matches",
    "check_round_trip",
    "check_snapshot_matches",
    "check_tool_pairs",
    "check_view_deterministic",
    "lower_bound_read_share",
    "replay_bodies",
    "run_scenario",
    "run_scenario_in_asyncio",
    "session_events",
    "split_batches",
]
