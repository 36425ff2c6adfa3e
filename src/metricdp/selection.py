"""Alias of :mod:`metricdp.mechanisms.selection`, kept so that ``import metricdp.selection`` works.

Selection (the exponential mechanism and the subsampled exponential mechanism over large
output spaces) is a mechanism concept and lives under :mod:`metricdp.mechanisms`; here it
sat between ``mechanisms`` and ``mechanisms.lattice_laplace`` (a package-level import
cycle). This module re-exports the public names only; new code imports
``metricdp.mechanisms.selection``.
"""

from __future__ import annotations

from .mechanisms.selection import (
    Accuracy,
    Selection,
    candidates_for_accuracy,
    compositions,
    draw_base,
    exponent_for,
    exponential_choice,
    exponential_mechanism,
    exponential_probabilities,
    multiset_probabilities,
    privacy_of,
    subsampled_distribution,
    subsampled_exponential_mechanism,
)

__all__ = [
    "Accuracy",
    "Selection",
    "candidates_for_accuracy",
    "compositions",
    "draw_base",
    "exponent_for",
    "exponential_choice",
    "exponential_mechanism",
    "exponential_probabilities",
    "multiset_probabilities",
    "privacy_of",
    "subsampled_distribution",
    "subsampled_exponential_mechanism",
]
