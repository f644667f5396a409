"""Sharded streaming datasets in the MDS format.

Heavy pieces are imported lazily (`streaming.exports`) so `import streaming` stays cheap and
`from streaming import MDSWriter` works without pulling in torch until a dataset is built.
"""

from __future__ import annotations

from streaming.exports import EXPORTS, lazy_exports

__version__ = "0.1.0"

__all__ = sorted(EXPORTS)

__getattr__, __dir__ = lazy_exports(globals())
del EXPORTS, lazy_exports  # the table stays in streaming.exports, not among the exports
