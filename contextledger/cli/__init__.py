"""The ``contextledger`` command (``main``); its commands' library sides live beside it
(``demo_session``, ``report_check``). See ``docs/cli.md``."""

from contextledger.cli.main import main

__all__ = ["main"]
