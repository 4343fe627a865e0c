"""``python -m agent_meta``: the same as the ``agent-meta`` command."""

import sys

from .apps._cli import main

sys.exit(main())
