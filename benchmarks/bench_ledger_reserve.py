"""Time ``Ledger.reserve`` of N persons: a fresh ledger (first run), then the same persons again (second run).

``python benchmarks/bench_ledger_reserve.py --persons 1000000 [--numpy] [--quick]``: N random ids of
8-16 bytes (printable, seeded: the timing, not the privacy, is measured), reserved at eps 1e-3
with budget 1e6; prints wall and CPU seconds of each step (hashing alone, first reserve, second
reserve) as JSON. By default the ids are one Arrow string array with their codes, reserved as
``plan_release`` reserves them (``Ledger._reserve``); ``--numpy`` reserves a numpy array of
strings through the public ``Ledger.reserve``. ``--quick`` runs 20,000 persons (what the test runs).
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
import tempfile
import time
from pathlib import Path

import numpy as np


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def _ids(n: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    lengths = rng.integers(8, 17, size=n)
    chars = rng.integers(97, 123, size=(n, 16), dtype=np.uint8)
    chars[np.arange(16) >= lengths[:, None]] = 0
    ids = chars.view("S16").ravel()
    return np.unique(ids).astype(str)  # distinct


def main(argv: list[str] | None = None) -> dict[str, float]:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--persons", type=int, default=1_000_000)
    p.add_argument("--quick", action="store_true")
    p.add_argument("--numpy", action="store_true", help="ids as a numpy array through Ledger.reserve")
    p.add_argument("--workdir", type=Path, default=None)
    a = p.parse_args(argv)
    from metricdp.accounting.composition import to_units
    from metricdp.accounting.ledger import Ledger

    n = 20_000 if a.quick else a.persons
    ids = _ids(n, 0)
    persons: object = ids
    counts = np.ones(len(ids), dtype=np.int64)
    if not a.numpy:
        import pyarrow as pa

        persons = pa.array(ids.tolist(), type=pa.string())
    out: dict[str, float] = {"persons": float(len(ids))}
    with tempfile.TemporaryDirectory(dir=a.workdir) as d:
        led = Ledger(Path(d) / "bench.db", budget=1e6)
        for step in ("hash", "first", "second"):
            w, c = time.perf_counter(), _cpu()
            if step == "hash":
                led._hash_blob(persons)
            else:
                if a.numpy:
                    granted = led.reserve(persons, 1e-3, counts).grant.granted
                else:  # as plan_release reserves: Arrow ids, their counts, the grant over codes
                    codes = np.arange(len(ids))
                    res = led._reserve(persons, counts, to_units(1e-3), "refuse", None, "bench", None, codes)
                    granted = res[1].granted
                assert int(granted.sum()) == len(ids)
            out[f"{step}_wall_s"] = round(time.perf_counter() - w, 3)
            out[f"{step}_cpu_s"] = round(_cpu() - c, 3)
        led.check_integrity()
        led.close()
    print(json.dumps(out))
    return out


if __name__ == "__main__":
    main(sys.argv[1:])
