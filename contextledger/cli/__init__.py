"""The ``contextledger`` command (``main``); its commands' library sides live beside it
(``_demo_session``, ``_report_check``). See ``docs/cli.md``."""

from contextledger.cli._main import main

__all__ = ["main"]
