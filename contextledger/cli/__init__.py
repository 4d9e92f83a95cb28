"""The ``contextledger`` command."""
