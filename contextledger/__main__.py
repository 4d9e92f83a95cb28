"""``python -m contextledger``: the ``contextledger`` command."""

import sys

from contextledger.cli import main

sys.exit(main())
