"""``python -m agent_meta``: the same as the ``agent-meta`` command."""

import sys

from .cli._main import main

sys.exit(main())
