"""The baselines through ``metricdp text privatize``: their flags, their guarantee named in the summary."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.cli.test_text import emb, invoke  # noqa: F401  (the fixture)
from tests.cli_helpers import assert_one_line_error


@pytest.mark.parametrize(
    ("mech", "flags", "guarantee"),
    [
        ("diffractor", ["--lists", 2], "list position"),
        ("custext", ["--set-size", 3], "one output set"),
        ("vickrey", ["--threshold", 0.0], None),
    ],
)
def test_privatize_with_each_baseline(tmp_path: Path, emb: Path, mech: str, flags: list, guarantee) -> None:  # noqa: F811
    src = tmp_path / "in.txt"
    src.write_text("The cat sat on the MAT, 42 times.\nParis!\n", encoding="utf-8")
    out = tmp_path / "out.txt"
    r = invoke("privatize", src, "--out", out, "-m", mech, "-e", 2000, "--embeddings", emb, "--seed", 3, *flags,
               "--json")
    assert r.exit_code == 0, r.output
    assert out.read_text(encoding="utf-8") == src.read_text(encoding="utf-8")  # huge eps: every word kept
    summary = json.loads(r.stdout)["mechanism"]
    assert (guarantee in summary) if guarantee else ("eps-mDP for the" not in summary)


def test_baseline_flags_are_checked(tmp_path: Path, emb: Path) -> None:  # noqa: F811
    src = tmp_path / "in.txt"
    src.write_text("the cat\n", encoding="utf-8")
    r = invoke("privatize", src, "--out", tmp_path / "o.txt", "-m", "vickrey", "-e", 1, "--threshold", 2,
               "--embeddings", emb)
    assert_one_line_error(r, "--threshold")
    assert not (tmp_path / "o.txt").exists()


def test_mechanism_file_never_releases_punctuation_by_default(tmp_path: Path) -> None:
    # a mechanism file over labels with punctuation: at a tiny eps every label is nearly equally likely,
    # and the default policy for files (words: a letter or a digit, not a number) maps ",", "." and "1990" to
    # the nearest word: no word is released as punctuation or as a number
    import numpy as np

    from metricdp.mechanisms.exponential import exponential
    from metricdp.spaces import MetricSpace

    space = MetricSpace.from_points(np.arange(5.0)[:, None], ["cat", ",", "dog", ".", "1990"])
    mech_file = tmp_path / "m.npz"
    exponential(space, 0.001).save(mech_file)
    src = tmp_path / "in.txt"
    src.write_text(" ".join(["cat"] * 300) + "\n", encoding="utf-8")
    out = tmp_path / "out.txt"
    r = invoke("privatize", src, "--out", out, "--mechanism", mech_file, "--seed", 2, "--json")
    assert r.exit_code == 0, r.output
    released = out.read_text(encoding="utf-8").split()
    assert json.loads(r.stdout)["outputs"] == "words"
    assert set(released) == {"cat", "dog"}
    anything = invoke("privatize", src, "--out", tmp_path / "o2.txt", "--mechanism", mech_file, "--seed", 2,
                      "--outputs", "any")
    assert anything.exit_code == 0, anything.output
    assert {",", "."} & set((tmp_path / "o2.txt").read_text(encoding="utf-8").split())
