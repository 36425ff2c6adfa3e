"""``metricdp text privatize`` and ``metricdp text stats``: word-level mDP over a vocabulary.

``privatize`` rewrites plain text (one document per line), CSV, Parquet or JSONL (``--column``),
replacing every vocabulary word by a release of a matrix-free mechanism over the
embedding (default: all 400,000 packaged GloVe 6B 50-d words) or of a mechanism file
built on a vocabulary. ``stats`` prints the plausible-deniability statistics N_w and S_w
(Feyisetan et al. 2020) as quantiles and can plot their histograms.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from enum import Enum
from pathlib import Path
from typing import Annotated, Any

import numpy as np
import typer
from rich.table import Table

from .._progress import ProgressReporter
from ..errors import ValidationError
from ..mechanisms import registry
from ._accounting import (
    AccountingOptions,
    BudgetOption,
    ConsistentOption,
    LedgerKeyOption,
    LedgerOption,
    MaxRowsOption,
    OverBudgetOption,
    UserColumnOption,
    print_documents,
    report_json,
)
from ._common import (
    JsonOption,
    OutOption,
    SeedOption,
    check_output,
    console,
    echo_json,
    err_console,
    handle_errors,
    warn,
)
from ._options import naming_flags, with_options
from ._text_budget import (
    TEXT_FLAGS,
    WITHHELD,
    Identity,
    NumbersBudgetOption,
    NumbersLedgerOption,
    NumbersOptions,
    print_numbers,
    print_persons,
    privatize_budgeted,
)
from .privatize import DropOption, KeepOption, leaves_report, with_flags

__all__ = ["load_vocabulary", "register"]

_SEED_WARNING = "--seed makes the releases reproducible by anyone who knows the seed: not private for real data"

MechOpt = Annotated[
    str,
    typer.Option(
        "--mechanism", "-m", help=f"{', '.join(registry.sampler_names())}, or a mechanism .npz."
    ),
]
EpsOpt = Annotated[
    float | None, typer.Option("--epsilon", "-e", help="Per-token mDP level (Euclidean distance of the embedding).")
]
EmbOpt = Annotated[
    str,
    typer.Option("--embeddings", help="glove (packaged GloVe 6B 50-d) or a GloVe text / .vec / word2vec .bin file."),
]
EpsListOpt = Annotated[
    str | None,
    typer.Option("--epsilon", "-e", help="Per-token mDP level; a comma-separated list (1,2,3) gives word token j of "
                 "each document the (j mod m)-th value, as dp-diffractor's per-token lists."),
]
SizeOpt = Annotated[
    int | None,
    typer.Option("--vocabulary-size", "-n", min=2, help="Keep the N most frequent words (default: all; 400,000 "
                 "for glove). Every release is one of these N: TEM's far draws, for one, are uniform over all N "
                 "words, rare ones included, so a smaller N gives more common replacements."),
]
#: The options of the matrix-free families (as at import; commands read them when registered), from their entries
#: (:data:`metricdp.mechanisms.registry.SAMPLER_FAMILIES`): ``--index``, ``--gamma``, ``--beta``,
#: ``--lam``, ``--candidates``, ``--base``.
OPTIONS: dict[str, registry.Option] = registry.options(registry.SAMPLER_FAMILIES.values())


def load_vocabulary(embeddings: str, size: int | None) -> Any:
    """A :class:`~metricdp.pointspace.PointSpace` of the packaged GloVe or an embeddings file."""
    from ..pointspace import PointSpace

    if embeddings == "glove":
        from ..data.glove import load_glove

        return PointSpace.from_embeddings(load_glove(), size)
    from ..data.embeddings import read_vec, read_word2vec_binary

    path = Path(embeddings)
    if not path.is_file():
        raise ValidationError(f"--embeddings {embeddings!r}: not 'glove' and no such file")
    reader = read_word2vec_binary if path.suffix.lower() == ".bin" else read_vec
    return PointSpace.from_embeddings(reader(path, limit=size))


def _params(mechanism: str, given: dict[str, Any]) -> dict[str, Any]:
    """The family parameters of the options given (by keyword), validated and named by flag.

    Only the options given are passed on, so the library's defaults apply otherwise (the
    subsampled mechanism's base is uniform unless ``--base zipf``). An option the chosen
    mechanism does not take is ignored with a warning.
    """
    family = registry.SAMPLER_FAMILIES.get(mechanism)
    params: dict[str, Any] = {}
    ignored = []
    for flag, option in registry.options(registry.SAMPLER_FAMILIES.values()).items():
        value = given.get(option.keyword)
        if value is None:
            continue
        param = None if family is None else family.find(option.param.name)
        if family is None or param is None or param.flag != flag:
            ignored.append(flag)
            continue
        value = value.value if isinstance(value, Enum) else value
        params[param.name] = param.check(value, f"text {family.name}", where=flag)
    if ignored:
        warn(f"{', '.join(ignored)} {'does' if len(ignored) == 1 else 'do'} not apply to --mechanism {mechanism}: "
             "ignored")
    return params


def _epsilons(value: str | None) -> list[float] | None:
    """``--epsilon``: one number or a comma-separated list, each finite and > 0."""
    from .._validation import check_epsilon

    if value is None:
        return None
    out = []
    for item in value.split(","):
        try:
            number = float(item)
        except ValueError:
            raise ValidationError(f"--epsilon {value!r}: {item.strip()!r} is not a number") from None
        try:
            out.append(check_epsilon(number))
        except ValidationError as ex:
            raise ValidationError(f"--epsilon {value!r}: {ex}") from None
    return out


def _index(options: dict[str, Any]) -> str:
    """The ``--index`` given (an enum member or a string), or the library's default."""
    value = options.get("index")
    return "exact" if value is None else str(getattr(value, "value", value))


def _require(mechanism: str, embeddings: str, index: str) -> None:
    """Fail before any work when an option needs an extra that is not installed."""
    from .._optional import require

    if mechanism.lower().endswith(".npz"):
        return
    if embeddings == "glove":
        require("glove", what="--embeddings glove (the default)")
    if index in ("ivf", "hnsw") and mechanism in ("madlib", "mahalanobis"):
        require("faiss-cpu", what=f"--index {index}")


def _build(mechanism: str, epsilon: float | None, embeddings: str, size: int | None, params: dict[str, Any]) -> Any:
    """(sample function, vocabulary labels, point space or None, description, epsilon)."""
    from ..text.build import build, names

    if mechanism.lower().endswith(".npz"):
        from ..mechanisms.file import load_mechanism

        loaded = load_mechanism(mechanism)
        if epsilon is not None and not np.isclose(epsilon, loaded.epsilon, rtol=1e-12):
            raise ValidationError(f"--epsilon {epsilon} differs from the mechanism file's epsilon {loaded.epsilon}")
        return loaded.sample, loaded.labels, None, f"{loaded.name} from {mechanism}", float(loaded.epsilon)
    if mechanism not in names():
        raise ValidationError(f"--mechanism {mechanism!r}: choose one of {', '.join(names())} or a mechanism .npz file")
    if epsilon is None:
        raise ValidationError("--epsilon is required with a named mechanism")
    space = load_vocabulary(embeddings, size)
    cache_dir = None
    if registry.get_sampler(mechanism).disk_cache:  # CusText's sets and weights, 1-Diffractor's lists
        from ..text.disk_cache import cache_dir_for

        cache_dir, why = cache_dir_for(embeddings)
        if why is not None:
            warn(f"{mechanism}'s structures are built again and not kept ({why})")
    mech = build(mechanism, space, epsilon, cache_dir=cache_dir, **params)
    desc = repr(mech) if mech.guarantee.startswith("Euclidean") else f"{mech!r} (eps-mDP for the {mech.guarantee})"
    return mech.sample, space.labels, space, desc, mech.epsilon


#: Word tokens read from a bundled corpus by ``text stats --corpus NAME`` (as the recorded real-text benchmark).
CORPUS_TOKENS = 250_000


def _corpus_texts(corpus: str, labels: Any) -> list[str]:
    """The documents of ``--corpus``: a bundled corpus by name, else a plain-text file's lines."""
    from ..experiments.corpus import CORPORA, named_corpus
    from ..tabular.formats.lines import documents

    if corpus in CORPORA and not Path(corpus).is_file():
        return named_corpus(corpus, CORPUS_TOKENS, labels)
    if not Path(corpus).is_file():
        raise ValidationError(f"--corpus {corpus}: no such file (nor a bundled corpus: {', '.join(CORPORA)})")
    return list(documents(corpus))


def _composition(corpus: str, embeddings: str, size: int | None, json_out: bool) -> None:
    """``text stats --corpus`` alone: :func:`metricdp.text.stats.corpus_composition`."""
    from ..text.stats import corpus_composition

    _require("exponential", embeddings, "exact")  # the vocabulary's extra, as any mechanism needs it
    space = load_vocabulary(embeddings, size)
    comp = corpus_composition(_corpus_texts(corpus, space.labels), space.labels)
    if json_out:
        echo_json({"corpus": corpus, "vocabulary": space.n, **comp.as_dict()})
        return
    shares = comp.shares()
    table = Table(title=f"{Path(corpus).name}: {comp.documents:,} documents, {comp.tokens:,} tokens, "
                        f"{space.n:,}-word vocabulary")
    for col in ("tokens", "count", "share"):
        table.add_column(col, justify="left" if col == "tokens" else "right")
    for label, count, key in (("words", comp.words, "words"), ("numbers (kept by default)", comp.numbers, "numbers"),
                              ("punctuation", comp.punctuation, "punctuation"),
                              ("words in the vocabulary (released)", comp.in_vocabulary, "in_vocabulary"),
                              ("released words in their own case", comp.case_kept, "case_kept")):
        share = shares[key]
        table.add_row(label, f"{count:,}", "n/a" if share is None else f"{share:.3f}")
    console.print(table)
    console.print(f"in-vocabulary rate: of the words; case kept: of the words released; word cases: "
                  f"{', '.join(f'{k} {v:,}' for k, v in comp.cases.items())} (mixed case takes the vocabulary's "
                  f"spelling); {comp.normalised:,} tokens normalised (format characters, fullwidth forms)",
                  markup=False, highlight=False)


def _corpus_stats(
    corpus: str, mechanisms: str, epsilons: list[float] | None, embeddings: str, size: int | None,
    plot: Path | None, seed: int | None, json_out: bool, options: dict[str, Any],
) -> None:
    """``text stats --corpus``: :func:`metricdp.text.utility.utility_rows` per mechanism and eps."""
    from ..text.build import build, names
    from ..text.policy import OutputFilter, TokenPolicy, alphabetic_mask
    from ..text.utility import plot_utility, utility_rows

    chosen = [m.strip() for m in mechanisms.split(",") if m.strip()]
    unknown = [m for m in chosen if m not in names()]
    if not chosen or unknown:
        raise ValidationError(f"--mechanism {mechanisms!r}: with --corpus, choose among {', '.join(names())}")
    if epsilons is None:
        raise ValidationError("--epsilon is required")
    for name in chosen:
        _require(name, embeddings, _index(options))
    space = load_vocabulary(embeddings, size)
    texts = _corpus_texts(corpus, space.labels)
    restrict = OutputFilter(space, alphabetic_mask(space.labels))  # the default output policy of privatize
    if seed is not None:
        warn(_SEED_WARNING)
    generator = None if seed is None else np.random.default_rng(seed)
    params = {name: _params(name, options) for name in chosen}

    def samplers() -> Iterator[tuple[str, float, Any]]:  # one mechanism at a time (its table cache freed after)
        for name in chosen:
            for eps in epsilons or ():
                mech = build(name, space, eps, **params[name])
                yield name, eps, lambda idx, m=mech: restrict(m.sample(idx, rng=generator))

    rows = utility_rows(space, texts, samplers(), policy=TokenPolicy())
    if plot is not None:
        plot_utility(rows, plot, Path(corpus).name)
    if json_out:
        echo_json({"corpus": str(corpus), "documents": len(texts), "vocabulary": space.n, "outputs": "alphabetic",
                   "rows": [r.as_dict() for r in rows], "plot": str(plot) if plot else None})
        return
    table = Table(title=f"{Path(corpus).name}: {len(texts):,} documents, {space.n:,}-word vocabulary, alphabetic "
                        "outputs")
    for col in ("mechanism", "eps", "word tokens", "changed", "mean distance", "examples"):
        table.add_column(col, justify="left" if col in ("mechanism", "examples") else "right")
    for r in rows:
        changed = "n/a" if r.changed is None else f"{r.changed:.3f}"
        moved = "n/a" if r.mean_distance is None else f"{r.mean_distance:.3f}"
        table.add_row(r.mechanism, f"{r.epsilon:g}", f"{r.tokens:,}", changed, moved, "; ".join(r.examples[:3]))
    console.print(table)
    if plot is not None:
        err_console.print(f"wrote {plot}", markup=False, highlight=False)


def register(app: typer.Typer) -> None:
    """Add the ``text`` sub-app (``privatize``, ``stats``) to ``app``."""
    text_app = typer.Typer(
        name="text", help="Word-level mDP for texts over a large embedding vocabulary.", no_args_is_help=True
    )

    def privatize(
        input_file: Annotated[
            Path, typer.Argument(metavar="INPUT", help="Plain text (one document per line), .csv, .parquet or .jsonl.")
        ],
        out: OutOption,
        mechanism: MechOpt,
        epsilon: EpsListOpt = None,
        embeddings: EmbOpt = "glove",
        vocabulary_size: SizeOpt = None,
        column: Annotated[
            str | None, typer.Option("--column", "-c", help="Field holding the text (CSV/Parquet/JSONL).")
        ] = None,
        keep_words: Annotated[
            Path | None, typer.Option("--keep-words", help="File of words never replaced, one per line.")
        ] = None,
        keep_tokens: Annotated[
            str | None,
            typer.Option("--keep-tokens", help="Never replace these (comma-separated): stopwords, numbers (the "
                         "default: tokens with a digit such as 3rd), names, punctuation. Kept tokens leave with their "
                         "true text. Numbers (2004, -1,250.50) are never words: kept, or see --numbers-epsilon."),
        ] = None,
        numbers_epsilon: Annotated[
            float | None,
            typer.Option("--numbers-epsilon", help="Release numbers as numbers: two-sided geometric noise on each "
                         "number's grid (its decimals), EPS per unit of the value, written in the number's shape. "
                         "Default: numbers are kept."),
        ] = None,
        numbers_budget: NumbersBudgetOption = None,
        numbers_ledger: NumbersLedgerOption = None,
        outputs: Annotated[
            str | None,
            typer.Option("--outputs", help="What may be released: alphabetic (default with --embeddings), words "
                         "(a letter or a digit: default with a mechanism file) or any; a release outside is "
                         "mapped to the nearest allowed word."),
        ] = None,
        keep: KeepOption = None,
        drop: DropOption = None,
        seed: SeedOption = None,
        json_out: JsonOption = False,
        user_column: UserColumnOption = None,
        budget: BudgetOption = None,
        ledger: LedgerOption = None,
        ledger_key: LedgerKeyOption = None,
        max_rows_per_user: MaxRowsOption = None,
        over_budget: OverBudgetOption = None,
        consistent: ConsistentOption = False,
        **family_options: Any,
    ) -> None:
        """Replace every vocabulary word of INPUT by a release of the mechanism (case pattern kept).

        The report gives each document's eps (its released tokens, summed distance) and the
        eps of its most repeated word; --consistent gives one replacement per word and
        document (per word and author with --user-column, a CSV/JSONL field).
        """
        from ..text.accounting import TextAccounting

        acct = AccountingOptions(user_column, budget, ledger, ledger_key, max_rows_per_user, over_budget, consistent)
        from ..text.policy import OutputFilter, TokenPolicy, output_mask
        from ..text.rewrite import Vocabulary, rewrite_file

        numbers_acct = NumbersOptions(numbers_budget, numbers_ledger, ledger_key)
        numbers_acct.check()  # before its files are named: an empty --numbers-ledger is named as such
        check_output(out, inputs=(input_file, keep_words, *(f for f in (mechanism, embeddings) if Path(f).is_file()),
                                  *acct.files(), *numbers_acct.files()))  # never a ledger or its key
        _require(mechanism, embeddings, _index(family_options))
        if not input_file.is_file():
            raise ValidationError(f"{input_file}: no such file")
        # --over-budget is the numbers budget's policy too: a numbers budget alone is a budget
        (replace(acct, over_budget=None) if numbers_acct.given else acct).check(person="document")
        from ..text.accounted import check_text_release

        with naming_flags(TEXT_FLAGS):  # the library's rules, in the command line's terms
            check_text_release(input_file, column, user_column=user_column, ledger=ledger, budget=budget,
                               numbers=numbers_epsilon, numbers_budget=numbers_budget, numbers_ledger=numbers_ledger)
        budgeted = (budget is not None or ledger is not None or max_rows_per_user is not None
                    or numbers_budget is not None)
        is_file = Path(mechanism).suffix.lower() == ".npz"
        with naming_flags({"keep": "--keep-tokens", "outputs": "--outputs"}):
            policy = TokenPolicy.parse(keep_tokens, outputs or ("words" if is_file else "alphabetic"))
        kept: frozenset[str] = frozenset()
        if keep_words is not None:
            if not keep_words.is_file():
                raise ValidationError(f"--keep-words {keep_words}: no such file")
            try:
                kept = frozenset(
                    w.strip().lower() for w in keep_words.read_text(encoding="utf-8").splitlines() if w.strip()
                )
            except UnicodeDecodeError as ex:
                raise ValidationError(f"--keep-words {keep_words}: invalid UTF-8 at byte offset {ex.start}") from None
        epsilons = _epsilons(epsilon)
        if is_file and epsilons is not None and len(epsilons) > 1:
            raise ValidationError("--epsilon: a mechanism file has one epsilon; give one value or none")
        params = _params(mechanism, family_options)
        sample, labels, space, desc, eps = _build(
            mechanism, None if epsilons is None else epsilons[0], embeddings, vocabulary_size, params
        )
        cycle = 1 if epsilons is None else len(epsilons)
        if cycle > 1 and acct.active:
            raise ValidationError(f"--epsilon with several values (per-token epsilons) is not accounted per document "
                                  f"yet: {', '.join(acct.given())} need one epsilon")
        if cycle > 1:  # one mechanism per epsilon over the same vocabulary; token j of a document: the (j mod m)-th
            from ..text.build import build as build_text

            mechs = [build_text(mechanism, space, e, **params) for e in epsilons]  # type: ignore[union-attr]

            def release(idx: np.ndarray, slots: np.ndarray | None, rng: Any) -> np.ndarray:
                res = np.empty(len(idx), dtype=np.intp)
                for k, mech in enumerate(mechs):
                    sel = np.flatnonzero(slots == k)
                    if sel.size:
                        res[sel] = mech.sample(idx[sel], rng=rng)
                return res
        else:

            def release(idx: np.ndarray, slots: np.ndarray | None, rng: Any) -> np.ndarray:
                return sample(idx, rng=rng)

        restrict = None
        allowed = output_mask(policy.outputs, labels)
        if allowed is not None:
            if space is None:  # a mechanism file: its own space
                from ..mechanisms.file import load_mechanism

                space = load_mechanism(mechanism).space
            restrict = OutputFilter(space, allowed)
        generator = None
        if seed is not None:
            warn(_SEED_WARNING)
            generator = np.random.default_rng(seed)
        numbers = None
        if numbers_epsilon is not None:
            from ..text.numbers import NumberRelease

            with naming_flags({"epsilon": "--numbers-epsilon"}):
                numbers = NumberRelease(numbers_epsilon, rng=generator)

        def draw(idx: np.ndarray, slots: np.ndarray | None = None) -> np.ndarray:
            res = release(idx, slots, generator)
            return res if restrict is None else restrict(res)

        persons, unit, numbers_persons = None, None, None
        if budgeted:
            rel, unit = privatize_budgeted(input_file, out, acct, Vocabulary(labels), draw, generator, eps, desc,
                                      Identity(mechanism, embeddings, params, policy.outputs, labels),
                                      {"column": column, "keep": kept, "policy": policy, "keep_columns": keep or (),
                                       "drop_columns": drop or (), "numbers": numbers}, [keep_words], numbers_acct)
            st, documents, persons, numbers_persons = rel.stats, rel.documents, rel.persons, rel.numbers
        else:
            with naming_flags(TEXT_FLAGS):
                # per-token epsilon lists: no per-document accounting yet (refused above with its options)
                book = None if cycle > 1 else TextAccounting(eps, len(labels), consistent=consistent,
                                                             user_column=user_column)
                try:
                    st = rewrite_file(input_file, out, Vocabulary(labels), draw, column=column, keep=kept,
                                      policy=policy, keep_columns=keep or (), drop_columns=drop or (),
                                      progress=ProgressReporter(f"text {input_file.name}", "tokens"), cycle=cycle,
                                      accounting=book, numbers=numbers)
                except ValidationError as ex:
                    raise ValidationError(with_flags(str(ex))) from None
            documents = None if book is None else book.report(st.documents)
        if st.columns is not None:
            leaves_report(st.columns)
        top = sorted(st.oov_examples.items(), key=lambda kv: -kv[1])[:5]
        shown_eps = f"{eps:.6g}" if cycle == 1 else ",".join(f"{e:g}" for e in epsilons or ())
        summary = {
            "output": str(out),
            "mechanism": desc,
            "epsilon_per_token": eps if cycle == 1 else epsilons,
            "vocabulary": len(labels),
            "documents": st.documents,
            "word_tokens": st.tokens,
            "replaced": st.replaced,
            "changed": st.changed,
            "kept": st.kept,
            "kept_by": st.kept_by,
            "outputs": policy.outputs,
            "numbers": {"released": st.numbers, "kept": st.kept_by.get("numbers", 0),
                        "epsilon_per_unit": numbers_epsilon, "max_per_document": st.max_numbers_per_document,
                        **({} if numbers_persons is None else {"withheld": st.numbers_withheld})},
            "normalised": st.normalised,
            "columns": st.columns.as_dict() if st.columns is not None else None,
            "out_of_vocabulary": st.oov,
            "top_out_of_vocabulary": dict(top),
            "seconds": round(st.seconds, 3),
            "tokens_per_second": round(st.tokens_per_second, 1) if st.seconds else None,
            "seeded": seed is not None,
            "accounting": None if documents is None else {
                **acct.describe(), **documents.as_dict(),
                **({} if persons is None else {**report_json(persons, acct, eps), "rows_are": "word tokens",
                                               "person": "author" if user_column else "document",
                                               "withheld_as": WITHHELD, "ledger_unit": unit}),
                **({} if numbers_persons is None else {"numbers": numbers_acct.report_json(numbers_persons,
                                                                                           numbers_epsilon)})},
        }
        if persons is not None:
            summary["withheld"] = st.withheld
        if json_out:
            echo_json(summary)
            return
        console.print(
            f"wrote {out}: {st.documents:,} documents, {st.tokens:,} word tokens: {st.replaced:,} released "
            f"({st.changed:,} changed), {'' if persons is None else f'{st.withheld:,} withheld as {WITHHELD}, '}"
            f"{st.kept:,} kept (--keep-words, --keep-tokens; numbers: {st.kept_by.get('numbers', 0):,}), "
            f"{st.oov:,} out of vocabulary"
            f"{' (most frequent: ' + ', '.join(w for w, _ in top) + ')' if top else ''}; "
            f"{desc}, epsilon={shown_eps} per token"
            f"{' (cycled over each document)' if cycle > 1 else ''}; {st.tokens_per_second:,.0f} tokens/s"
            f"{f'; {st.normalised:,} tokens normalised (format characters, fullwidth forms)' if st.normalised else ''}"
            f"{' [seeded]' if seed is not None else ''}",
            markup=False,
            highlight=False,
        )
        if numbers is not None:
            console.print(f"numbers: {st.numbers:,} released as numbers, at most {st.max_numbers_per_document:,} in "
                          f"a document; eps={numbers.epsilon:g} per unit of the value each (a document's numbers "
                          "together: eps times the sum of their |x - x'|)", markup=False, highlight=False)
        if documents is not None:
            print_documents(documents, acct)
        if persons is not None:
            print_persons(persons, acct, eps)
        if numbers_persons is not None:
            print_numbers(numbers_persons, acct, numbers_acct, numbers_epsilon)

    options_now = registry.options(registry.SAMPLER_FAMILIES.values())  # read when the app is built
    text_app.command("privatize")(with_options(handle_errors(privatize), privatize, options_now))

    def stats(
        mechanism: Annotated[
            str | None,
            typer.Option("--mechanism", "-m", help=f"{', '.join(registry.sampler_names())}, or a mechanism .npz; "
                         "with --corpus, a comma-separated list compared side by side (none: the corpus's "
                         "tokens by kind)."),
        ] = None,
        epsilon: Annotated[
            str | None,
            typer.Option("--epsilon", "-e", help="Per-token mDP level; with --corpus, a comma-separated list."),
        ] = None,
        embeddings: EmbOpt = "glove",
        vocabulary_size: SizeOpt = None,
        corpus: Annotated[
            str | None,
            typer.Option("--corpus", help="Plain text (one document per line) or a bundled corpus (stdlib-docs, "
                         "zipf): the shares of words, numbers and punctuation, the in-vocabulary rate and the case "
                         "kept; with --mechanism, the fraction of word tokens changed and the mean embedding "
                         "distance per mechanism and eps."),
        ] = None,
        words: Annotated[int, typer.Option("--words", min=1, help="Number of words measured.")] = 200,
        top: Annotated[int, typer.Option("--from-top", min=1, help="Words drawn among the T most frequent.")] = 20_000,
        draws: Annotated[int, typer.Option("--draws", "-k", min=1, help="Releases per word (k of S_w).")] = 100,
        plot: Annotated[Path | None, typer.Option("--plot", help="Write histograms of N_w and S_w (PNG).")] = None,
        seed: SeedOption = None,
        json_out: JsonOption = False,
        **family_options: Any,
    ) -> None:
        """Plausible deniability: N_w (fraction unchanged) and S_w (distinct releases in k draws); with
        --corpus, the utility of each mechanism and eps on a text (tokens changed, mean distance)."""
        from ..pointspace import PointSpace
        from ..text.stats import QUANTILES, plausible_deniability, plot_deniability

        if plot is not None:
            check_output(plot, "--plot", inputs=[f for f in (mechanism, embeddings, corpus) if f and Path(f).is_file()])
            from .._optional import require

            require("plot", what="--plot")
        epsilons = _epsilons(epsilon)
        if corpus is not None and mechanism is None:
            _composition(corpus, embeddings, vocabulary_size, json_out)
            return
        if corpus is not None:
            _corpus_stats(corpus, str(mechanism), epsilons, embeddings, vocabulary_size, plot, seed, json_out,
                          family_options)
            return
        if mechanism is None:
            raise ValidationError("--mechanism is required (or --corpus alone: the corpus's tokens by kind)")
        if epsilons is not None and len(epsilons) > 1:
            raise ValidationError("--epsilon: one value (several are compared with --corpus)")
        _require(mechanism, embeddings, _index(family_options))
        sample, _labels, space, desc, eps = _build(
            mechanism, None if epsilons is None else epsilons[0], embeddings, vocabulary_size,
            _params(mechanism, family_options)
        )
        if space is None:  # a mechanism file: distances from its points, when it has them
            from ..mechanisms.file import load_mechanism

            mech = load_mechanism(mechanism)
            if mech.space.points is None:
                raise ValidationError(f"{mechanism}: the mechanism file has no points; stats needs word vectors")
            space = PointSpace.from_points(mech.space.points, mech.labels)
        if seed is not None:
            warn(_SEED_WARNING)
        generator = None if seed is None else np.random.default_rng(seed)
        # the measured words: a public choice, so a fixed seed (0) is right here
        chosen = np.sort(
            np.random.default_rng(0).choice(min(top, space.n), size=min(words, space.n, top), replace=False)
        )
        st = plausible_deniability(lambda i: sample(i, rng=generator), space, chosen, draws)
        q = st.quantiles()
        if plot is not None:
            plot_deniability(st, plot, f"{desc}, eps={eps:.4g}, k={draws}")
        if json_out:
            echo_json(
                {
                    "mechanism": desc,
                    "epsilon": eps,
                    "words": len(chosen),
                    "draws": draws,
                    "quantiles": list(QUANTILES),
                    **q,
                    "plot": str(plot) if plot else None,
                }
            )
            return
        table = Table(title=f"{desc}, epsilon={eps:.6g}, {len(chosen)} words, k={draws} draws")
        table.add_column("quantile")
        for name in ("N_w", "S_w", "loss (mean distance)"):
            table.add_column(name, justify="right")
        for i, qq in enumerate(QUANTILES):
            table.add_row(f"{qq:g}", f"{q['N_w'][i]:.3f}", f"{q['S_w'][i]:.1f}", f"{q['loss'][i]:.3f}")
        console.print(table)
        if plot is not None:
            err_console.print(f"wrote {plot}", markup=False, highlight=False)

    text_app.command("stats")(with_options(handle_errors(stats), stats, options_now))
    app.add_typer(text_app, name="text")
