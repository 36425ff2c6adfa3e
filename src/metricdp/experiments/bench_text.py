"""``metricdp bench text``: the matrix-free text mechanisms over the full GloVe vocabulary.

The corpus of issue 23: tokens drawn i.i.d. from the 20,000 most frequent GloVe words
with a Zipf law (probability of rank k proportional to 1/k), streamed in chunks of
1,000,000 tokens (memory bounded whatever the corpus size); the vocabulary is all 400,000
words. Each mechanism runs in a fresh interpreter (its own peak memory, VmHWM), draws
its randomness from the OS secure source (as ``text privatize`` does by default), and
reports setup time (loading the vectors, building an index), sampling throughput
(tokens per second over the whole corpus, after setup), the fraction of tokens released
unchanged and, for approximate indexes, recall@1 against the exact search on the same
noise.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

__all__ = ["MECHANISMS", "TextBenchRow", "markdown_report", "markdown_table", "run_text_bench", "zipf_tokens"]

#: Benchmarked configurations: name -> (family, params).
MECHANISMS: dict[str, tuple[str, dict[str, Any]]] = {
    "exponential": ("exponential", {}),
    "tem": ("tem", {}),
    "madlib": ("madlib", {"index": "exact"}),
    "madlib-ivf": ("madlib", {"index": "ivf"}),
    "madlib-hnsw": ("madlib", {"index": "hnsw"}),
    "mahalanobis-ivf": ("mahalanobis", {"index": "ivf"}),
    "subsampled-exponential": ("subsampled-exponential", {"candidates": 50, "base": "zipf"}),
}
CHUNK = 1_000_000


def zipf_tokens(tokens: int, *, top: int = 20_000, seed: int = 0, chunk: int = CHUNK) -> Iterator[NDArray[np.intp]]:
    """Chunks of word indices, rank k (0-based) with probability proportional to 1/(k+1)."""
    p = 1.0 / np.arange(1, top + 1)
    cdf = np.cumsum(p / p.sum())
    g = np.random.default_rng(seed)
    left = int(tokens)
    while left > 0:
        k = min(chunk, left)
        yield np.minimum(np.searchsorted(cdf, g.random(k) * cdf[-1], side="right"), top - 1).astype(np.intp)
        left -= k


@dataclass
class TextBenchRow:
    """One mechanism's measurements."""

    mechanism: str
    tokens: int
    epsilon: float
    status: str = "ok"
    setup_s: float | None = None
    sample_s: float | None = None
    tokens_per_s: float | None = None
    peak_mib: float | None = None
    unchanged: float | None = None
    recall_at_1: float | None = None
    message: str = ""


def _child_main(job_json: str) -> None:
    from ..data.glove import load_glove
    from ..pointspace import PointSpace
    from ..text.build import build
    from .bench_lp import _rss_mib

    job = json.loads(job_json)
    family, params = MECHANISMS[job["mechanism"]]
    out: dict[str, Any] = {}
    t0 = time.perf_counter()
    space = PointSpace.from_embeddings(load_glove())
    mech = build(family, space, job["epsilon"], **params)
    out["setup_s"] = time.perf_counter() - t0
    same = 0
    t0 = time.perf_counter()
    for chunk in zipf_tokens(job["tokens"], seed=job["seed"]):
        same += int(np.count_nonzero(mech.sample(chunk) == chunk))
    out["sample_s"] = time.perf_counter() - t0
    out["unchanged"] = same / job["tokens"]
    if params.get("index") not in (None, "exact"):
        from ..text.ann import recall_at_1

        q = next(zipf_tokens(job["recall_queries"], seed=job["seed"] + 1))
        exact = build(family, space, job["epsilon"], index="exact").sample(q, rng=job["seed"])
        out["recall_at_1"] = recall_at_1(mech.sample(q, rng=job["seed"]), exact)
    out["peak_mib"] = _rss_mib()
    print(json.dumps(out))


def run_text_bench(
    mechanisms: Sequence[str], tokens: int | Mapping[str, int], *, epsilon: float = 10.0, seed: int = 0,
    recall_queries: int = 5000, on_row: Any = None,
) -> list[TextBenchRow]:
    """Run each mechanism in a fresh interpreter; one row each (errors reported, not raised)."""
    from .._validation import check_epsilon, check_int
    from ..errors import ValidationError

    sizes = {}
    for name in mechanisms:  # every argument checked before the first (long) run
        if name not in MECHANISMS:
            raise ValidationError(f"unknown text benchmark {name!r}; choose from {', '.join(MECHANISMS)}")
        sizes[name] = check_int(tokens[name] if isinstance(tokens, Mapping) else tokens, "tokens", minimum=1)
    check_epsilon(epsilon)
    rows = []
    for name in mechanisms:
        n = sizes[name]
        row = TextBenchRow(name, n, float(epsilon))
        job = {"mechanism": name, "tokens": n, "epsilon": epsilon, "seed": seed, "recall_queries": recall_queries}
        code = "import sys; from metricdp.experiments.bench_text import _child_main; _child_main(sys.argv[1])"
        with tempfile.TemporaryDirectory(prefix="metricdp-bench-text-") as tmp:
            proc = subprocess.run([sys.executable, "-c", code, json.dumps(job)], capture_output=True, text=True,
                                  check=False, cwd=tmp)
        if proc.returncode != 0:
            row.status = "error"
            row.message = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        else:
            res = json.loads(proc.stdout.strip().splitlines()[-1])
            for k, v in res.items():
                setattr(row, k, v)
            row.tokens_per_s = n / row.sample_s if row.sample_s else None
        rows.append(row)
        if on_row is not None:
            on_row(row)
    return rows


def _f(v: float | None, fmt: str) -> str:
    return "n/a" if v is None else format(v, fmt)


def markdown_table(rows: Sequence[TextBenchRow]) -> str:
    """The rows as a markdown table."""
    head = (
        "| mechanism | tokens | eps | setup (s) | sampling (s) | tokens/s | peak MiB | unchanged | recall@1 "
        "| status |"
    )
    lines = [head, "|" + "---|" * 10]
    for r in rows:
        lines.append(
            f"| {r.mechanism} | {r.tokens:,} | {r.epsilon:g} | {_f(r.setup_s, '.1f')} | {_f(r.sample_s, '.1f')} | "
            f"{_f(r.tokens_per_s, ',.0f')} | {_f(r.peak_mib, ',.0f')} | {_f(r.unchanged, '.3f')} | "
            f"{_f(r.recall_at_1, '.3f')} | {r.status}{': ' + r.message if r.message else ''} |"
        )
    return "\n".join(lines)


def markdown_report(rows: Sequence[TextBenchRow], settings: Mapping[str, Any], machine: Mapping[str, str]) -> str:
    """A RESULTS.md section: settings, machine, table, raw JSON rows."""
    parts = ["## metricdp bench text", ""]
    parts += [f"- {k}: {v}" for k, v in settings.items()]
    parts += [f"- machine {k}: {v}" for k, v in machine.items()]
    parts += ["", markdown_table(rows), "", "<details><summary>rows (JSON)</summary>", "", "```json"]
    parts += [json.dumps([asdict(r) for r in rows], indent=1), "```", "</details>", ""]
    return "\n".join(parts)


