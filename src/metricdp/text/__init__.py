"""Text privatization at vocabulary scale: every token of a text released by a word-level
mDP mechanism over a large embedding vocabulary (matrix-free: nothing n x n is stored).

Modules
-------
* :mod:`.tokens` -- tokenisation that keeps whitespace and punctuation, case patterns.
* :mod:`.base` -- :class:`~.base.TextMechanism`, the interface of the samplers below.
* :mod:`.exponential` -- the exact exponential mechanism: a ball per word and exact rejection (+ cache).
* :mod:`.ball` -- the text samplers' one distance, exact balls of the vocabulary, the exact coin a / b.
* :mod:`.tem` -- the Truncated Exponential Mechanism (Carvalho et al. 2021).
* :mod:`.madlib` -- Madlib (Feyisetan et al. 2020) with an exact or an approximate search.
* :mod:`.mahalanobis` -- the regularised Mahalanobis mechanism (Xu et al. 2020).
* :mod:`.subsampled` -- the subsampled exponential mechanism (Lantz et al. 2015).
* :mod:`.diffractor` -- 1-Diffractor (Meisenbacher et al. 2024): geometric noise on word-list positions.
* :mod:`.vickrey` -- the Vickrey mechanism (Xu et al. 2021): nearest or second-nearest word.
* :mod:`.custext` -- CusText (Chen et al. 2023): the exponential mechanism inside output sets.
* :mod:`.neighbours` -- the exact nearest free words that 1-Diffractor's lists and CusText's sets walk by.
* :mod:`.disk_cache` -- those lists, sets and weights kept on disk per vocabulary, checked before use.
* :mod:`.ann` -- the optional approximate nearest-word index (faiss HNSW).
* :mod:`.build` -- names -> builders, proven epsilons.
* :mod:`.stats` -- plausible deniability statistics N_w, S_w (Feyisetan et al. 2020).
* :mod:`.utility` -- tokens changed and mean embedding distance on a corpus, per mechanism and eps.
* :mod:`.rewrite` -- streaming rewriting of plain text, CSV and JSONL.
* :mod:`.numbers` -- numbers released as numbers (exact two-sided geometric noise on their grid).
* :mod:`.accounting`, :mod:`.accounted` -- eps per document and author; a rewrite under per-person
    budgets and ledgers (words, and numbers as their own line).

Accounting: see docs/text.md. Each token is released with eps-mDP for the Euclidean
distance of the embedding; two documents differing in tokens i_1..i_k are
``sum_j eps d(x_j, x'_j)``-indistinguishable (sequential composition).
"""

from .._lazy import submodule_getattr

__getattr__ = submodule_getattr(__name__, __path__)
