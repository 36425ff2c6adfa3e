"""The release pipeline: a kind of value, a file format and an engine, each written once.

* a **kind** (:mod:`.kind`) says how a column is parsed, released and rendered back:
  :mod:`.labels` (a mechanism's labels), :mod:`.numbers` (numbers on a grid), :mod:`.points`
  (latitude/longitude pairs), :mod:`.text` (documents rewritten word by word);
* a **format** is one reader/writer pair (:mod:`metricdp.tabular.formats`; the suffix table
  decides, nothing here looks at a suffix);
* :mod:`.run` is the one chunk loop: read ahead, parse, refuse (every refused row counted
  before anything is published), release, write behind, publish atomically.

The DP logic never knows the format: a kind sees :class:`~metricdp.tabular.formats.Chunk`
columns as Arrow arrays and answers with :class:`~metricdp.tabular.formats.Released` values.
"""

from __future__ import annotations

from .._lazy import submodule_getattr

__getattr__ = submodule_getattr(__name__, __path__)
