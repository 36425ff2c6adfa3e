"""``metricdp text privatize`` / ``text stats`` on a small embeddings file."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from metricdp.cli import text
from metricdp.mechanisms.exponential import exponential
from metricdp.spaces import MetricSpace
from tests.cli_helpers import assert_one_line_error, make_app, runner
from tests.helpers import needs

APP = make_app(text.register)
WORDS = ["the", "cat", "dog", "paris", "london", "sat", "on", "mat", "a", "big"]


@pytest.fixture
def emb(tmp_path: Path) -> Path:
    g = np.random.default_rng(0)
    p = tmp_path / "emb.txt"
    p.write_text(
        "".join(f"{w} " + " ".join(f"{v:.5f}" for v in g.normal(size=4)) + "\n" for w in WORDS), encoding="utf-8"
    )
    return p


def invoke(*args: object):
    return runner.invoke(APP, ["text", *[str(a) for a in args]])


@pytest.mark.parametrize("mech", ["exponential", "tem", "madlib", "mahalanobis", "subsampled-exponential"])
def test_privatize_every_mechanism(tmp_path: Path, emb: Path, mech: str) -> None:
    src = tmp_path / "in.txt"
    src.write_text("The cat sat on the MAT, 42 times.\nParis!\n", encoding="utf-8")
    out = tmp_path / "out.txt"
    r = invoke(
        "privatize",
        src,
        "--out",
        out,
        "--mechanism",
        mech,
        "--epsilon",
        500,
        "--embeddings",
        emb,
        "--seed",
        3,
        "--candidates",
        500,
    )
    assert r.exit_code == 0, r.output
    assert "--seed makes the releases reproducible" in r.stderr
    # huge eps: every word is released unchanged, layout and case intact
    assert out.read_text(encoding="utf-8") == src.read_text(encoding="utf-8")
    assert "9 word tokens: 7 released" in r.stdout and "1 out of vocabulary" in r.stdout  # 42: a number, kept


def test_privatize_csv_keep_and_json_summary(tmp_path: Path, emb: Path) -> None:
    src = tmp_path / "in.csv"
    src.write_text("id,body\n1,the big cat\n2,a dog\n", encoding="utf-8")
    keep = tmp_path / "keep.txt"
    keep.write_text("the\na\n", encoding="utf-8")
    out = tmp_path / "out.csv"
    r = invoke(
        "privatize",
        src,
        "--out",
        out,
        "-m",
        "exponential",
        "-e",
        0.01,
        "--embeddings",
        emb,
        "--column",
        "body",
        "--keep-words",
        keep,
        "--keep",
        "id",
        "--json",
    )
    assert r.exit_code == 0, r.output
    s = json.loads(r.stdout)
    assert (s["word_tokens"], s["replaced"], s["kept"], s["out_of_vocabulary"], s["seeded"]) == (5, 3, 2, 0, False)
    assert s["columns"] == {"released": ["body"], "unreleased": ["id"], "unacknowledged": [], "dropped": []}
    assert s["kept_by"] == {"words": 2} and s["outputs"] == "alphabetic"
    lines = out.read_text(encoding="utf-8").splitlines()
    assert lines[0] == "id,body" and lines[1].startswith("1,the ") and lines[2].startswith("2,a ")
    assert all(w in WORDS for line in lines[1:] for w in line.split(",")[1].split())


def test_privatize_with_a_mechanism_file(tmp_path: Path) -> None:
    space = MetricSpace.from_points(np.arange(4.0)[:, None] * 100, ["Cat", "dog", "mat", "sat"])
    mech_file = tmp_path / "m.npz"
    exponential(space, 1.0).save(mech_file)
    src = tmp_path / "in.txt"
    src.write_text("the CAT sat\n", encoding="utf-8")
    out = tmp_path / "out.txt"
    r = invoke("privatize", src, "--out", out, "--mechanism", mech_file)
    assert r.exit_code == 0, r.output
    assert out.read_text(encoding="utf-8") == "the CAT sat\n"  # d = 100, eps = 1: unchanged w.p. ~1


@needs("plot")
def test_stats_table_json_and_plot(tmp_path: Path, emb: Path) -> None:
    png = tmp_path / "h.png"
    r = invoke(
        "stats",
        "-m",
        "tem",
        "-e",
        2,
        "--embeddings",
        emb,
        "--words",
        5,
        "--draws",
        50,
        "--plot",
        png,
        "--json",
        "--seed",
        1,
    )
    assert r.exit_code == 0, r.output
    s = json.loads(r.stdout)
    assert len(s["N_w"]) == len(s["quantiles"]) == 7 and png.read_bytes()[:4] == b"\x89PNG"
    r = invoke("stats", "-m", "madlib", "-e", 2, "--embeddings", emb, "--words", 5, "--draws", 20)
    assert r.exit_code == 0 and "N_w" in r.stdout


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["-m", "nope", "-e", 1], "choose one of"),
        (["-m", "tem"], "--epsilon is required"),
        (["-m", "tem", "-e", -1], "epsilon must be finite and > 0"),
        (["-m", "tem", "-e", 1, "--column", "x"], "--column applies to .csv/.jsonl"),
        (["-m", "tem", "-e", 1, "--embeddings", "missing.vec"], "no such file"),
    ],
)
def test_errors_are_one_line(tmp_path: Path, emb: Path, args: list, fragment: str) -> None:
    src = tmp_path / "in.txt"
    src.write_text("the cat\n", encoding="utf-8")
    extra = [] if "--embeddings" in args else ["--embeddings", emb]
    r = invoke("privatize", src, "--out", tmp_path / "o.txt", *args, *extra)
    assert_one_line_error(r, fragment)
    assert not (tmp_path / "o.txt").exists()


def test_output_equal_to_input_is_refused(tmp_path: Path, emb: Path) -> None:
    src = tmp_path / "in.txt"
    src.write_text("the cat\n", encoding="utf-8")
    r = invoke("privatize", src, "--out", src, "-m", "tem", "-e", 1, "--embeddings", emb)
    assert_one_line_error(r, "also an input")
    assert src.read_text(encoding="utf-8") == "the cat\n"


def test_cli_defaults_are_the_library_defaults(tmp_path: Path, emb: Path) -> None:
    """No option given: the library's defaults (subsampled base uniform, not zipf); given: passed on."""
    from metricdp.mechanisms import registry
    from metricdp.text.build import build as build_text

    src = tmp_path / "in.txt"
    src.write_text("the cat\n", encoding="utf-8")
    common = ["privatize", src, "--out", tmp_path / "o.txt", "-m", "subsampled-exponential", "-e", 1,
              "--embeddings", emb, "--json"]
    r = invoke(*common)
    assert r.exit_code == 0, r.output
    space = text.load_vocabulary(str(emb), None)
    assert json.loads(r.stdout)["mechanism"] == repr(build_text("subsampled-exponential", space, 1.0))
    assert "base=None" in json.loads(r.stdout)["mechanism"]
    r = invoke(*common, "--base", "zipf", "--candidates", 7)
    assert r.exit_code == 0, r.output
    assert "candidates=7, base='zipf'" in json.loads(r.stdout)["mechanism"]
    for p in registry.get_sampler("subsampled-exponential").params:
        if p.flag:
            assert p.flag in invoke("privatize", "--help").output


def test_an_out_of_range_text_option_is_one_line_naming_its_flag(tmp_path: Path, emb: Path) -> None:
    src = tmp_path / "in.txt"
    src.write_text("the cat\n", encoding="utf-8")
    r = invoke("privatize", src, "--out", tmp_path / "o.txt", "-m", "mahalanobis", "-e", 1, "--embeddings", emb,
               "--lam", 1.0)
    assert_one_line_error(r, "--lam must be finite and >= 0 and < 1, got 1.0")
    assert not (tmp_path / "o.txt").exists()


def test_token_policies_what_leaves_and_alphabetic_outputs(tmp_path: Path) -> None:
    # a vocabulary with punctuation and number tokens, as GloVe has: at a tiny eps every word is
    # released almost uniformly, and under the default policy no release is punctuation or a number
    g = np.random.default_rng(1)
    vocab = ["the", "cat", ",", ".", "1990", "--", "dog", "paris"]
    emb = tmp_path / "emb.txt"
    emb.write_text("".join(f"{w} " + " ".join(f"{v:.5f}" for v in g.normal(size=3)) + "\n" for w in vocab))
    src = tmp_path / "in.csv"
    src.write_text("who,body,date\nann,the cat saw Paris in 1990,x\nbob,dog dog dog,y\n")
    out = tmp_path / "out.csv"
    r = invoke("privatize", src, "--out", out, "-m", "exponential", "-e", 0.001, "--embeddings", emb,
               "--column", "body", "--drop", "who", "--keep-tokens", "numbers,names", "--json")
    assert r.exit_code == 0, r.output
    s = json.loads(r.stdout)
    assert s["columns"]["dropped"] == ["who"] and s["columns"]["unacknowledged"] == ["date"]
    assert s["kept_by"] == {"names": 1, "numbers": 1}
    assert "'date' are written UNRELEASED" in r.stderr
    rows = [line.split(",") for line in out.read_text().splitlines()]
    assert rows[0] == ["body", "date"]
    words = [w for row in rows[1:] for w in row[0].split()]
    assert "Paris" in words and "1990" in words  # kept on request
    released = [w for w in words if w not in ("Paris", "1990", "saw", "in")]  # kept, or out of vocabulary
    assert len(released) == 5 and all(w.lower() in ("the", "cat", "dog", "paris") for w in released)
    with_any = invoke("privatize", src, "--out", tmp_path / "o2.csv", "-m", "exponential", "-e", 0.001,
                      "--embeddings", emb, "--column", "body", "--drop", "who", "--keep", "date",
                      "--outputs", "any", "--seed", 1, "--json")
    assert with_any.exit_code == 0, with_any.output
    assert json.loads(with_any.stdout)["outputs"] == "any"
    bad = invoke("privatize", src, "--out", tmp_path / "o3.csv", "-m", "exponential", "-e", 1, "--embeddings", emb,
                 "--column", "body", "--keep-tokens", "verbs")
    assert_one_line_error(bad, "unknown category 'verbs'")
    assert not (tmp_path / "o3.csv").exists()


def test_privatize_numbers_kept_by_default_or_released_as_numbers(tmp_path: Path, emb: Path) -> None:
    src = tmp_path / "in.txt"
    src.write_text("Version 2.0, the cat sat on 1,250.50 mats in 2004 and p\u200baris\n", encoding="utf-8")
    out = tmp_path / "out.txt"
    r = invoke("privatize", src, "--out", out, "-m", "exponential", "-e", 0.01, "--embeddings", emb, "--json")
    assert r.exit_code == 0, r.output
    summary = json.loads(r.stdout)
    written = out.read_text(encoding="utf-8")
    assert "2.0" in written and "1,250.50" in written and "2004" in written and "\u200b" not in written
    assert summary["numbers"] == {"released": 0, "kept": 3, "epsilon_per_unit": None, "max_per_document": 0}
    assert summary["normalised"] == 1 and summary["kept_by"] == {"numbers": 3}
    r = invoke("privatize", src, "--out", out, "-m", "exponential", "-e", 0.01, "--embeddings", emb,
               "--numbers-epsilon", 1e-3, "--json")
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["numbers"] == {"released": 3, "kept": 0, "epsilon_per_unit": 1e-3,
                                               "max_per_document": 3}
    r = invoke("privatize", src, "--out", out, "-m", "exponential", "-e", 0.01, "--embeddings", emb,
               "--numbers-epsilon", 1e-3)
    assert "numbers: 3 released as numbers, at most 3 in a document; eps=0.001 per unit" in r.stdout
    words = out.read_text(encoding="utf-8").split()
    assert words[1].endswith(",") and words[1][:-1].replace(".", "").lstrip("-").isdigit()  # a number, 1 decimal
    assert len(words[1].split(".")[1]) == 2  # "2.0," -> "d.d,"


def test_privatize_number_and_gamma_extremes_are_one_line(tmp_path: Path, emb: Path) -> None:
    src = tmp_path / "in.txt"
    src.write_text("the cat 42\n", encoding="utf-8")
    out = tmp_path / "out.txt"
    for flags, culprit in ((["--numbers-epsilon", "0"], "--numbers-epsilon"),
                           (["--numbers-epsilon", "1e-300"], "--numbers-epsilon"),
                           (["--numbers-epsilon", "1", "--budget", "5"], "--numbers-epsilon"),
                           (["-e", "1e-300", "--gamma", "1e308"], "gamma")):
        r = invoke("privatize", src, "--out", out, "-m", "tem", *(["-e", "1"] if "-e" not in flags else []), *flags,
                   "--embeddings", emb)
        assert_one_line_error(r, culprit)
        assert not out.exists()
    r = invoke("privatize", src, "--out", out, "-m", "tem", "-e", 1, "--gamma", 1e308, "--embeddings", emb)
    assert r.exit_code == 0, r.output  # beyond the weights' clamp every gamma is the same mechanism


def test_stats_of_a_corpus_alone_counts_its_tokens(tmp_path: Path, emb: Path) -> None:
    src = tmp_path / "in.txt"
    src.write_text("The cat sat on the MAT, 42 times.\nParis!\n", encoding="utf-8")
    r = invoke("stats", "--corpus", src, "--embeddings", emb, "--json")
    assert r.exit_code == 0, r.output
    got = json.loads(r.stdout)
    assert (got["words"], got["numbers"], got["punctuation"], got["documents"]) == (8, 1, 3, 2)
    assert got["shares"]["case_kept"] == 1.0 and got["in_vocabulary"] <= got["words"]
    r = invoke("stats", "--corpus", tmp_path / "missing.txt", "--embeddings", emb)
    assert r.exit_code != 0 and "no such file (nor a bundled corpus: zipf, stdlib-docs)" in r.output
    r = invoke("stats", "--embeddings", emb)
    assert r.exit_code != 0 and "--mechanism is required" in r.output


def test_stats_of_a_bundled_corpus(emb: Path) -> None:
    r = invoke("stats", "--corpus", "zipf", "--embeddings", emb, "--json")
    assert r.exit_code == 0, r.output
    got = json.loads(r.stdout)
    assert got["corpus"] == "zipf" and got["numbers"] == 0 and got["shares"]["in_vocabulary"] == 1.0
