"""Layer 1, the core: the pure patch rule, JSON values, session info, AG-UI, errors.

No I/O and no runtime: nothing here imports trio, asyncio, pydantic or tenacity (an
import-linter contract checks it). The public names are re-exported by :mod:`agent_meta`.
"""

__all__: list[str] = []
