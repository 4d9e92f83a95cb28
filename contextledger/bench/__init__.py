"""Benchmarks, run with ``python -m contextledger.bench NAME [--json]`` or
``contextledger bench NAME``: ``BENCHMARKS`` names them, ``run_named`` runs one (or ``all``)."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any, cast

from contextledger.bench._common import Benchmark, Options

#: Every benchmark: its name and the module that has its ``run`` and ``render``.
BENCHMARKS: dict[str, str] = {
    "ledger": "contextledger.bench._ledger",
    "view": "contextledger.bench._view",
    "estimation": "contextledger.bench._estimation",
    "request": "contextledger.bench._request",
    "retention": "contextledger.bench._retention",
    "cachesim": "contextledger.bench._cachesim",
    "actors": "contextledger.bench._actors",
    "strategies": "contextledger.bench._strategies",
    "simulate_scaling": "contextledger.bench._simulate_scaling",
    "agentloop": "contextledger.bench._agentloop",
    "import": "contextledger.bench._import",
}


def load(name: str) -> Benchmark:
    """The benchmark module registered as ``name``."""
    return cast(Benchmark, importlib.import_module(BENCHMARKS[name]))


def run_named(
    name: str, options: Options, show: Callable[[str], None] | None = None
) -> dict[str, Any]:
    """Run benchmark ``name`` (or every one for ``all``) and return the JSON-ready figures:
    the benchmark's own, or for ``all`` an object of them keyed by name. ``show``, when
    given, receives each benchmark's table as soon as it has run."""
    names = list(BENCHMARKS) if name == "all" else [name]
    results: dict[str, dict[str, Any]] = {}
    for each in names:
        bench = load(each)
        results[each] = bench.run(options)
        if show is not None:
            show(bench.render(results[each]))
    return results if name == "all" else results[name]


__all__ = ["BENCHMARKS", "Benchmark", "Options", "load", "run_named"]
