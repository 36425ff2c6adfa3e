"""``metricdp bench text``: the matrix-free text mechanisms over the full GloVe vocabulary.

The synthetic corpus (``zipf``): tokens drawn i.i.d. from the 20,000 most frequent GloVe words
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

import itertools
import json
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from .corpus import CORPORA, zipf_tokens

__all__ = [
    "CORPORA", "MECHANISMS", "TextBenchRow", "markdown_report", "markdown_table", "plot_utility", "replacement_summary",
    "run_text_bench", "zipf_tokens",
]

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
    corpus: str = "zipf"
    distinct_words: int | None = None
    distinct_per_s: float | None = None
    mean_distance: float | None = None
    examples: list[str] = field(default_factory=list)
    #: real text only (:func:`token_forms`): numbers, numbers released as words, words released as numbers
    #: or punctuation, kept words, kept words in their input's case, lines whose tokens did not align
    forms: dict[str, int] | None = None


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
    if job.get("corpus", "zipf") == "stdlib-docs":
        out.update(_real_text_run(mech, space, job["tokens"]))
        out["peak_mib"] = _rss_mib()
        print(json.dumps(out))
        return
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


def token_forms(original: str, released: str) -> dict[str, int]:
    """What a rewrite did to each token's kind and case, line by line (the pieces of
    :func:`metricdp.text.tokens.split` align one to one where every word was replaced by one word).

    Returns counts: ``numbers`` (number tokens in), ``numbers_as_words`` (released as anything but a
    number), ``words_as_numbers`` (word tokens released as a number or as punctuation), ``kept_words``
    (word tokens in lower, Title or UPPER case released as themselves, compared in
    :func:`~metricdp.text.tokens.normal` form), ``kept_in_case`` (those written in the input's case
    pattern), ``kept_mixed`` (kept words in mixed case, ``iPhone``, which take the vocabulary's form
    by design), ``misaligned_lines``.

    Examples
    --------
    >>> token_forms("Paris had 2004 cats", "Paris had 2004 dogs")["kept_in_case"]
    2
    """
    from ..text.tokens import case_pattern, is_numeric, normal, split

    counts = dict.fromkeys(("numbers", "numbers_as_words", "words_as_numbers", "kept_words", "kept_in_case",
                            "kept_mixed", "misaligned_lines"), 0)
    for line_in, line_out in zip(original.splitlines(), released.splitlines(), strict=False):
        a, b = split(line_in), split(line_out)
        if len(a) != len(b):
            counts["misaligned_lines"] += 1
            continue
        for (p, word), (q, word_out) in zip(a, b, strict=True):
            if not word:
                continue
            if is_numeric(p):
                counts["numbers"] += 1
                counts["numbers_as_words"] += int(not (word_out and is_numeric(q)))
            elif not word_out or is_numeric(q):
                counts["words_as_numbers"] += 1
            elif normal(q) == normal(p) and case_pattern(p) == "mixed":
                counts["kept_mixed"] += 1
            elif normal(q) == normal(p):
                counts["kept_words"] += 1
                counts["kept_in_case"] += int(case_pattern(q) == case_pattern(p))
    return counts


def _real_text_run(mech: Any, space: Any, tokens: int) -> dict[str, Any]:
    """``text privatize``'s path (file in, tokenise, release under the default output policy, file
    out) over real English text."""
    from ..text.policy import OutputFilter, alphabetic_mask
    from ..text.rewrite import Vocabulary, rewrite_file
    from .corpus import corpus_summary, stdlib_text

    docs = stdlib_text(tokens)
    summary = corpus_summary(docs)
    seen: list[tuple[NDArray[np.intp], NDArray[np.intp]]] = []
    restrict = OutputFilter(space, alphabetic_mask(space.labels))  # text privatize's default output policy

    def sample(idx: NDArray[np.intp]) -> NDArray[np.intp]:
        out = restrict(mech.sample(idx))
        seen.append((idx, out))
        return out

    with tempfile.TemporaryDirectory(prefix="metricdp-bench-text-") as tmp:
        src = Path(tmp) / "corpus.txt"
        src.write_text("\n".join(docs) + "\n", encoding="utf-8")
        t0 = time.perf_counter()
        st = rewrite_file(src, Path(tmp) / "out.txt", Vocabulary(space.labels), sample)
        seconds = time.perf_counter() - t0
        forms = token_forms(src.read_text(encoding="utf-8"), (Path(tmp) / "out.txt").read_text(encoding="utf-8"))
    return {
        "forms": forms,
        "sample_s": seconds, "tokens": st.tokens, "distinct_words": summary["distinct_words"],
        "distinct_per_s": summary["distinct_words"] / seconds if seconds else None,
        "unchanged": 1.0 - st.changed / st.replaced if st.replaced else None,
        **replacement_summary(space, seen),
    }


def replacement_summary(
    space: Any, pairs: Sequence[tuple[NDArray[np.intp], NDArray[np.intp]]], examples: int = 8
) -> dict[str, Any]:
    """Mean embedding distance between each released token and its input, and the first changed pairs
    (:func:`metricdp.text.utility.replacement_summary` without its fraction changed)."""
    from ..text.utility import replacement_summary as summary

    out = summary(space, pairs, examples)
    del out["changed"]
    return out


def run_text_bench(
    mechanisms: Sequence[str], tokens: int | Mapping[str, int], *, epsilon: float | Sequence[float] = 10.0,
    seed: int = 0, recall_queries: int = 5000, on_row: Any = None, corpus: str = "zipf",
) -> list[TextBenchRow]:
    """Run each mechanism in a fresh interpreter; one row each (errors reported, not raised).

    ``corpus``: ``"zipf"`` (the synthetic Zipf stream) or ``"stdlib-docs"`` (real English:
    :func:`metricdp.experiments.corpus.stdlib_text`, through ``text privatize``'s file path).
    """
    from .._validation import check_epsilon, check_int
    from ..errors import ValidationError

    if corpus not in CORPORA:
        raise ValidationError(f"unknown corpus {corpus!r}; choose from {', '.join(CORPORA)}")
    sizes = {}
    for name in mechanisms:  # every argument checked before the first (long) run
        if name not in MECHANISMS:
            raise ValidationError(f"unknown text benchmark {name!r}; choose from {', '.join(MECHANISMS)}")
        sizes[name] = check_int(tokens[name] if isinstance(tokens, Mapping) else tokens, "tokens", minimum=1)
    epsilons = [float(epsilon)] if isinstance(epsilon, int | float) else [float(e) for e in epsilon]
    for eps in epsilons:
        check_epsilon(eps)
    rows = []
    for name, eps in itertools.product(mechanisms, epsilons):
        n = sizes[name]
        row = TextBenchRow(name, n, eps, corpus=corpus)
        job = {"mechanism": name, "tokens": n, "epsilon": eps, "seed": seed, "recall_queries": recall_queries,
               "corpus": corpus}
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
            row.tokens_per_s = row.tokens / row.sample_s if row.sample_s else None
        rows.append(row)
        if on_row is not None:
            on_row(row)
    return rows


def _f(v: float | None, fmt: str) -> str:
    return "n/a" if v is None else format(v, fmt)


def markdown_table(rows: Sequence[TextBenchRow]) -> str:
    """The rows as a markdown table."""
    head = (
        "| mechanism | corpus | tokens | distinct words | eps | setup (s) | sampling (s) | tokens/s "
        "| distinct words/s | peak MiB | unchanged | mean distance | recall@1 | numbers as words / words as "
        "numbers / kept words in case | status |"
    )
    lines = [head, "|" + "---|" * 15]
    for r in rows:
        distinct = "n/a" if r.distinct_words is None else f"{r.distinct_words:,}"
        fm = r.forms
        forms = "n/a" if not fm else (f"{fm['numbers_as_words']} of {fm['numbers']:,} / {fm['words_as_numbers']} / "
                                      f"{fm['kept_in_case']:,} of {fm['kept_words']:,}")
        lines.append(
            f"| {r.mechanism} | {r.corpus} | {r.tokens:,} | {distinct} | {r.epsilon:g} | {_f(r.setup_s, '.1f')} | "
            f"{_f(r.sample_s, '.1f')} | {_f(r.tokens_per_s, ',.0f')} | {_f(r.distinct_per_s, ',.0f')} | "
            f"{_f(r.peak_mib, ',.0f')} | {_f(r.unchanged, '.3f')} | {_f(r.mean_distance, '.3f')} | "
            f"{_f(r.recall_at_1, '.3f')} | {forms} | {r.status}{': ' + r.message if r.message else ''} |"
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


def plot_utility(rows: Sequence[TextBenchRow], path: Any) -> None:
    """Fraction of tokens changed and mean embedding distance of the releases against eps, per mechanism."""
    from ._plot import plot_grid

    panels: list[tuple[str, list[Any]]] = [("tokens changed", []), ("mean embedding distance of the release", [])]
    for name in dict.fromkeys(r.mechanism for r in rows):
        ok = sorted((r for r in rows if r.mechanism == name and r.status == "ok"), key=lambda r: r.epsilon)
        eps = [r.epsilon for r in ok]
        panels[0][1].append((name, eps, [1.0 - (r.unchanged or 0.0) for r in ok], "-o"))
        panels[1][1].append((name, eps, [r.mean_distance or 0.0 for r in ok], "-o"))
    plot_grid(path, panels, xlabel="epsilon per token (Euclidean GloVe distance)",
              ylabel=["fraction of word tokens changed", "mean distance (GloVe units)"], logx=True)
