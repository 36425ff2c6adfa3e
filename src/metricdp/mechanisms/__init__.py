"""Mechanism families, one module each; the LP family lives in :mod:`metricdp.mechanisms.lp`."""

from __future__ import annotations

from .base import Mechanism, certify, register_sampler

__all__ = ["Mechanism", "certify", "register_sampler"]
