"""1-Diffractor and CusText side by side with their peers, on one vocabulary and one real text;
the exponential mechanism (SanText) and TEM on a short job.

    python benchmarks/bench_text_peers.py [--words 20000] [--tokens 20000] [--epsilon 1] [--short 100]
        [--no-full-vocabulary] [--short-only] [--peer-python /tmp/textpeer-venv/bin/python] [--out FILE.json]

The vocabulary is the N most frequent GloVe 6B 50-d words; the text is the standard library's
documentation (``metricdp bench text --corpus stdlib-docs``), its word tokens mapped to the
vocabulary (words outside it dropped). Each side builds its structure (1-Diffractor's list,
CusText's output sets) and releases every token once; the table gives seconds and tokens/s.

Peers run in their own interpreter (``--peer-python``, a virtual environment holding the
PyPI packages; never metricdp's). dp-diffractor 0.2.1 (sjmeis/Diffractor): its own
``EmbeddingManager.create_sorted_list`` builds the list; the release of each token is its
``apply_privacy_mechanism`` ("geometric": two numpy geometric draws, clip) as written in
src/diffractor/core.py, run in the same process (the package itself calls it through a
process pool per token, which only adds inter-process calls). pypantera 1.0.2 (CusText): its
class on the same vectors (written as a GloVe text file), its per-word mapping (a full
distance row and argsort per distinct input word) timed as the build, ``processText`` as
the release. When a package cannot be imported, its algorithm as written in its repository
runs instead, and the row says so. metricdp's build column is cold (no ``cache_dir``, its
structures not built before in the process) and includes constructing the mechanism and a first one-token
release (any one-off cost of a first draw); its CusText builds the paper's output sets over
the whole vocabulary (its build column), a different structure from pypantera's per-word
K-nearest lists. Below the table, metricdp's build again with the structures read from a
``cache_dir`` filled by a previous build (a new process's case; not a peer comparison).

Short job: the first ``--short`` word tokens of the same text, released once by a mechanism
built for them, first thing in each process once the vocabulary is loaded (nothing warmed by
another row), ``--repeat`` times, each on a newly loaded vocabulary (for pypantera a new
mechanism object, its per-text cache empty); the table gives the first run and the median.
The seconds count constructing the mechanism and releasing the job, every structure it builds
included (metricdp: the float32 copy of the vectors, the ball radius, each distinct word's ball
and exact table); loading the vocabulary is not counted (metricdp: the GloVe file and the
:class:`PointSpace`; pypantera: its ``Vocab`` reading the same vectors written as a GloVe text
file). metricdp's ``exponential`` is SanText's law (Yue et al., ACL Findings 2021: P(y|x)
proportional to exp(-eps d(x,y)/2)), drawn exactly; its peer is pypantera's
``SanText.processText`` on the job as one text (a distance matrix of the job's words against
the vocabulary, ``np.random.choice`` per word). metricdp's ``tem`` beside pypantera's ``TEM``
(a distance row per word, a Gumbel draw per candidate). With ``--full-vocabulary`` (the
default), metricdp's short job again over all of GloVe 6B's 400,000 words (no peer);
``--short-only`` runs the short job and nothing else.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

PEER = r'''
import json, sys, time
import numpy as np
tmp = sys.argv[1]
eps = float(sys.argv[2])
k = int(sys.argv[3])  # argv[4]: "short-only" or "all"; argv[5]: repetitions of the short job
repeat = int(sys.argv[5])
vectors = np.load(tmp + "/vectors.npy").astype("float32")
words = json.load(open(tmp + "/words.json"))
tokens = np.load(tmp + "/tokens.npy")
short = [words[t] for t in np.load(tmp + "/short.npy").tolist()]
out = {}
with open(tmp + "/emb.txt", "w", encoding="utf-8") as fh:  # the GloVe text format pypantera reads
    for w, v in zip(words, vectors):
        fh.write(w + " " + " ".join(f"{x:.6f}" for x in v) + "\n")

# short job, first in the process: pypantera's SanText and TEM once their vocabulary is loaded
try:
    from src.SamplingPerturbationMechanism.santext import SanText
    from src.SamplingPerturbationMechanism.tem import TEM
    for name, make in (("santext", lambda: SanText({"embPath": tmp + "/emb.txt", "epsilon": eps})),
                       ("tem", lambda: TEM({"embPath": tmp + "/emb.txt", "epsilon": eps, "beta": 0.001}))):
        times, kept = [], 0
        for _ in range(repeat):
            mech = make()  # reads the vocabulary (not timed); a new object: its per-text cache empty
            t = time.perf_counter()
            released = mech.processText(short).split(" ")
            times.append(time.perf_counter() - t)
            kept += sum(a == b for a, b in zip(short, released))
        out[f"{name}_short_s"] = times
        out[f"{name}_short_kept"] = kept
    out["santext_short_source"] = "pypantera SanText (package)"
    out["tem_short_source"] = "pypantera TEM (package)"
except ImportError as ex:  # sanxing-chen/SanText: softmax(-eps d / 2) rows, np.random.choice per word
    out["santext_short_s"] = []
    for _ in range(repeat):
        t = time.perf_counter()
        x = vectors[[words.index(w) for w in short]].astype(np.float64)
        d = np.sqrt(np.maximum((x * x).sum(1)[:, None] - 2 * x @ vectors.T.astype(np.float64)
                               + (vectors.astype(np.float64) ** 2).sum(1)[None, :], 0))
        logits = -eps * d / 2
        p = np.exp(logits - logits.max(1, keepdims=True))
        p /= p.sum(1, keepdims=True)
        [np.random.choice(len(words), 1, p=row) for row in p]
        out["santext_short_s"].append(time.perf_counter() - t)
    out["santext_short_source"] = (f"SanText's sampler as written in sanxing-chen/SanText, rows of the job's words "
                                   f"only ({type(ex).__name__} importing pypantera)")
if sys.argv[4] == "short-only":
    print(json.dumps(out))
    sys.exit(0)

def repo_sorted_list(vectors, words):  # sjmeis/Diffractor src/diffractor/utils.py, create_sorted_list
    import faiss
    index = faiss.IndexFlatL2(vectors.shape[1])
    index.add(vectors)
    sorted_list, current, remaining = [], 0, set(range(len(words)))
    for _ in range(len(words)):
        sorted_list.append(words[current])
        remaining.remove(current)
        if not remaining:
            break
        _, idx = index.search(vectors[current].reshape(1, -1), min(50, len(remaining) + 1))
        for j in idx[0]:
            if j in remaining:
                current = j
                break
        else:
            current = next(iter(remaining))
    return sorted_list

source = "dp-diffractor (package)"
try:
    from diffractor.utils import EmbeddingManager
    build = EmbeddingManager.create_sorted_list
except Exception as ex:  # noqa: BLE001
    source = f"dp-diffractor algorithm as written in sjmeis/Diffractor ({type(ex).__name__} importing the package)"
    build = repo_sorted_list
t = time.perf_counter()
s_list = build(vectors, words)
out["diffractor_build_s"] = time.perf_counter() - t
mapping = {w: i for i, w in enumerate(s_list)}
rng = np.random.default_rng(0)
t = time.perf_counter()
for tok in tokens.tolist():  # core.py apply_privacy_mechanism, "geometric" (stopwords replaced too)
    idx = mapping[words[tok]]
    p = 1 - np.exp(-eps / 1.0)
    noise = rng.geometric(p) - rng.geometric(p)
    s_list[int(np.clip(idx + noise, 0, len(s_list) - 1))]
out["diffractor_sample_s"] = time.perf_counter() - t
out["diffractor_source"] = source

# CusText: pyPANTERA's own class when it imports (it reads a GloVe-format text file), else its algorithm
token_words = [words[t] for t in tokens.tolist()]
try:
    from src.SamplingPerturbationMechanism.custext import CusText  # pypantera installs its package as "src"
    mech = CusText({"embPath": tmp + "/emb.txt", "epsilon": eps, "k": k, "distance": "euclidean"})
    t = time.perf_counter()
    for w in dict.fromkeys(token_words):  # its mapping: built per distinct input word, on first use
        mech._getCustomizedMapping(w)
    out["custext_build_s"] = time.perf_counter() - t
    failed = 0
    t = time.perf_counter()
    for w in token_words:  # processText one token at a time: it raises on some words (counted)
        try:
            mech.processText([w])
        except ValueError:
            failed += 1
    out["custext_sample_s"] = time.perf_counter() - t
    out["custext_source"] = f"pypantera (package; raised on {failed:,} of {len(token_words):,} tokens)"
except ImportError as ex:
    sim = {}
    t = time.perf_counter()
    for w in dict.fromkeys(tokens.tolist()):  # a full distance row and argsort per distinct word
        d = np.linalg.norm(vectors - vectors[w], axis=1)
        near = d.argsort()[:k]
        dd = d[near]
        u = -(dd - dd.min()) / max(dd.max() - dd.min(), 1e-12)
        p = np.exp(eps * u / 2)
        sim[w] = (near, p / p.sum())
    out["custext_build_s"] = time.perf_counter() - t
    t = time.perf_counter()
    for tok in tokens.tolist():
        near, p = sim[tok]
        near[np.random.choice(len(near), 1, p=p)[0]]
    out["custext_sample_s"] = time.perf_counter() - t
    out["custext_source"] = f"pypantera's CusText as written in Kekkodf/pypantera ({type(ex).__name__} importing it)"
print(json.dumps(out))
'''


def _short(embeddings, words: int, tokens: np.ndarray, eps: float, repeat: int) -> dict[str, object]:
    """metricdp's short job, ``repeat`` times: each on a newly loaded vocabulary (loading not timed)."""
    from metricdp.pointspace import PointSpace
    from metricdp.text.exponential import ExponentialText
    from metricdp.text.tem import TEMText

    out: dict[str, object] = {}
    for name, make in (("exponential", ExponentialText), ("tem", TEMText)):
        times, kept = [], 0
        for _ in range(repeat):
            space = PointSpace.from_embeddings(embeddings, words)  # the vocabulary, loaded: nothing built on it
            t = time.perf_counter()
            released = make(space, eps).sample(tokens)
            times.append(time.perf_counter() - t)
            kept += int(np.sum(released == tokens))
        out[f"{name}_short_s"] = times
        out[f"{name}_short_kept"] = kept
    return out


def _ours(space, tokens: np.ndarray, eps: float, k: int) -> dict[str, float]:
    from metricdp.text.custext import CusTextText, output_sets
    from metricdp.text.diffractor import DiffractorText, word_lists

    out = {}
    # build: the structure, the mechanism and a first one-token release (which loads the compiled
    # kernels of the exact geometric tables, once per process)
    t = time.perf_counter()
    word_lists(space, 1)
    mech = DiffractorText(space, eps)
    mech.sample(tokens[:1])
    out["diffractor_build_s"] = time.perf_counter() - t
    t = time.perf_counter()
    mech.sample(tokens)
    out["diffractor_sample_s"] = time.perf_counter() - t
    t = time.perf_counter()
    output_sets(space, k)
    cus = CusTextText(space, eps, size=k)
    cus.sample(tokens[:1])
    out["custext_build_s"] = time.perf_counter() - t
    t = time.perf_counter()
    cus.sample(tokens)
    out["custext_sample_s"] = time.perf_counter() - t
    return out


def _warm(embeddings, words: int, tokens: np.ndarray, eps: float, k: int) -> dict[str, float]:
    """Builds with the structures read from a cache directory that a first build filled."""
    from metricdp.pointspace import PointSpace
    from metricdp.text.custext import CusTextText
    from metricdp.text.diffractor import DiffractorText

    out = {}
    with tempfile.TemporaryDirectory(prefix="bench-text-cache-") as cache:
        for name, make in (("diffractor", lambda s: DiffractorText(s, eps, cache_dir=cache)),
                           ("custext", lambda s: CusTextText(s, eps, size=k, cache_dir=cache))):
            make(PointSpace.from_embeddings(embeddings, words))  # fills the cache
            space = PointSpace.from_embeddings(embeddings, words)  # a new space: nothing kept in memory
            t = time.perf_counter()
            make(space).sample(tokens[:1])
            out[f"{name}_warm_build_s"] = time.perf_counter() - t
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--words", type=int, default=20_000)
    ap.add_argument("--tokens", type=int, default=20_000)
    ap.add_argument("--epsilon", type=float, default=1.0)
    ap.add_argument("--set-size", type=int, default=20)
    ap.add_argument("--short", type=int, default=100, help="word tokens of the short job")
    ap.add_argument("--repeat", type=int, default=5, help="runs of the short job (each on a new vocabulary)")
    ap.add_argument("--full-vocabulary", action=argparse.BooleanOptionalAction, default=True,
                    help="metricdp's short job over all 400,000 GloVe words too")
    ap.add_argument("--short-only", action="store_true", help="the short job alone (no full-text rows)")
    ap.add_argument("--peer-python", default="/tmp/textpeer-venv/bin/python")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()

    from metricdp.data.glove import load_glove
    from metricdp.experiments.corpus import stdlib_text
    from metricdp.pointspace import PointSpace
    from metricdp.text.rewrite import Vocabulary
    from metricdp.text.tokens import WORD, normal

    glove = load_glove()
    space = PointSpace.from_embeddings(glove, args.words)
    lookup = Vocabulary(space.labels).lookup
    found = (lookup.get(normal(m.group())) for doc in stdlib_text(args.tokens) for m in WORD.finditer(doc))
    tokens = np.array([i for i in found if i is not None], dtype=np.intp)
    short = tokens[: args.short]
    load = os.getloadavg()
    short_ours = _short(glove, args.words, short, args.epsilon, args.repeat)  # first: nothing warmed by another row
    ours = {} if args.short_only else _ours(space, tokens, args.epsilon, args.set_size)
    with tempfile.TemporaryDirectory(prefix="bench-text-peers-") as tmp:
        np.save(f"{tmp}/vectors.npy", np.asarray(glove.vectors[: args.words]))
        Path(f"{tmp}/words.json").write_text(json.dumps(list(space.labels)), encoding="utf-8")
        np.save(f"{tmp}/tokens.npy", tokens)
        np.save(f"{tmp}/short.npy", short)
        part = "short-only" if args.short_only else "all"
        proc = subprocess.run([args.peer_python, "-c", PEER, tmp, str(args.epsilon), str(args.set_size), part,
                               str(args.repeat)],
                              capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        sys.exit(f"peer run failed: {proc.stderr.strip().splitlines()[-1:]}")
    peer = json.loads(proc.stdout.strip().splitlines()[-1])
    warm = {} if args.short_only else _warm(glove, args.words, tokens, args.epsilon, args.set_size)
    rows = []
    for mech in () if args.short_only else ("diffractor", "custext"):
        for side, res in (("metricdp", ours), (peer[f"{mech}_source"], peer)):
            build, sample = res[f"{mech}_build_s"], res[f"{mech}_sample_s"]
            rows.append({"mechanism": mech, "implementation": side, "build_s": round(build, 3),
                         "sample_s": round(sample, 3), "tokens_per_s": round(len(tokens) / sample, 1)})
    def short_row(mech: str, side: str, vocabulary: int, times: list[float], kept: object) -> dict[str, object]:
        return {"mechanism": mech, "implementation": side, "vocabulary": vocabulary,
                "seconds": [round(x, 4) for x in times], "first_s": round(times[0], 4),
                "median_s": round(float(np.median(times)), 4), "kept": kept}

    short_rows = []
    for mech, peer_name in (("exponential", "santext"), ("tem", "tem")):
        short_rows.append(short_row(mech, "metricdp", args.words, short_ours[f"{mech}_short_s"],
                                    short_ours[f"{mech}_short_kept"]))
        if f"{peer_name}_short_s" in peer:
            short_rows.append(short_row(mech, peer[f"{peer_name}_short_source"], args.words,
                                        peer[f"{peer_name}_short_s"], peer.get(f"{peer_name}_short_kept")))
    if args.full_vocabulary:
        full = _short(glove, len(glove.words), short, args.epsilon, args.repeat)
        for mech in ("exponential", "tem"):
            short_rows.append(short_row(mech, "metricdp", len(glove.words), full[f"{mech}_short_s"],
                                        full[f"{mech}_short_kept"]))
    report = {"vocabulary": args.words, "tokens": len(tokens), "epsilon": args.epsilon,
              "set_size": args.set_size, "load_average_before": [round(x, 2) for x in load],
              "load_average_after": [round(x, 2) for x in os.getloadavg()], "rows": rows,
              "warm_cache_build_s": {k: round(v, 3) for k, v in warm.items()},
              "short_job": {"tokens": len(short), "distinct": len(np.unique(short)), "rows": short_rows}}
    if rows:
        print("| mechanism | implementation | build (s) | sampling (s) | tokens/s |")
        print("|---|---|---:|---:|---:|")
    for r in rows:
        cells = (r["mechanism"], r["implementation"], r["build_s"], r["sample_s"], f"{r['tokens_per_s']:,}")
        print("| " + " | ".join(map(str, cells)) + " |")
    print(f"{len(tokens):,} tokens, {args.words:,} words, eps {args.epsilon}, load {report['load_average_before']} "
          f"-> {report['load_average_after']} (under load)")
    if warm:
        print(f"metricdp build from a filled cache_dir: 1-Diffractor {warm['diffractor_warm_build_s']:.3f} s, "
              f"CusText {warm['custext_warm_build_s']:.3f} s")
    print(f"\nshort job: the first {len(short)} word tokens ({len(np.unique(short))} distinct), mechanism built "
          f"and the job released, vocabulary loading not counted; {args.repeat} runs")
    print("| mechanism | implementation | vocabulary | first run (s) | median (s) | released as themselves |")
    print("|---|---|---:|---:|---:|---:|")
    for r in short_rows:
        cells = (r["mechanism"], r["implementation"], f"{r['vocabulary']:,}", f"{r['first_s']:.3f}",
                 f"{r['median_s']:.3f}", f"{r['kept']} of {args.repeat * len(short)}")
        print("| " + " | ".join(map(str, cells)) + " |")
    if args.out is not None:
        args.out.write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
