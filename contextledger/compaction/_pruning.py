"""Running a prune: the thin shell around ``policy._decisions.prune_plans``.

``prune`` reads the clock once, asks the decision layer which plans to carry out for an agent's
slice and appends their events in one batch. The runtime's ``Pruner`` actor and the
simulation's local sessions prune through it; the CLI's ``prune`` asks ``prune_plans`` itself,
so that a dry run can show the plans without writing them.
"""

from __future__ import annotations

from collections.abc import Callable

from contextledger.config import Config
from contextledger.ledger import EventLog
from contextledger.policy._decisions import prune_plans
from contextledger.policy._prune import Plan, plan_events
from contextledger.vocabulary._models import Model

Clock = Callable[[], int]


async def prune(
    log: EventLog,
    model: Model,
    config: Config,
    *,
    clock: Clock,
    agent_id: str,
    force: bool = False,
) -> list[Plan]:
    """Prune ``agent_id``'s slice of ``log`` by ``config.prune`` (``force``: even when the
    after-turn prune is off); return the plans carried out. Nothing is read from the clock
    when the prune is off."""
    if not (force or config.prune.enabled):
        return []
    now = clock()
    plans = prune_plans(log.history, model, config, agent_id=agent_id, now_ms=now, force=force)
    if plans:
        events = plan_events(plans, session_id=log.session_id, time_ms=now, agent_id=agent_id)
        await log.append(events)
    return plans
