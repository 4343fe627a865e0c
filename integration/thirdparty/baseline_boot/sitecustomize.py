"""First on the baseline agent's ``PYTHONPATH``: Python imports it at start-up. When the test
asked for a control channel, it loads the plain-SDK extension
(:mod:`integration.thirdparty.plain_control`); agent_meta is never imported."""

import os

if os.environ.get("AGENT_META_CONTROL"):
    from integration.thirdparty import plain_control

    plain_control.install()
