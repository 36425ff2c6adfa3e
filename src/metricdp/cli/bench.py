"""``metricdp bench lp``: the LP benchmark (:mod:`metricdp.experiments.bench_lp`); ``metricdp bench sample``: the
exact sampler (:mod:`metricdp.experiments.bench_sample`); ``metricdp bench text``: the matrix-free text
mechanisms (:mod:`metricdp.experiments.bench_text`)."""

from __future__ import annotations

import csv
import os
import shlex
import sys
from pathlib import Path
from typing import Annotated

import typer

from .._optional import require
from ..errors import ValidationError
from ._common import check_output, err_console, handle_errors, progress

__all__ = ["parse_sizes", "register"]

#: ``--quick``: the CI smoke size.
QUICK_SIZES, QUICK_MECHANISMS, QUICK_TIME_LIMIT = "20", "optimal,constopt,spanner", 60.0
DEFAULT_SIZES, DEFAULT_MECHANISMS, DEFAULT_TIME_LIMIT = "50,100,200", "optimal,constopt,spanner", 600.0


def _split(text: str, what: str) -> list[str]:
    items = [t.strip() for t in text.split(",") if t.strip()]
    if not items:
        raise ValidationError(f"{what} must be a comma-separated list, got {text!r}")
    return items


def parse_sizes(values: list[str]) -> list[int] | dict[str, list[int]]:
    """``["50,100"]`` -> [50, 100]; ``["optimal=50,100", "constopt=400"]`` -> per mechanism.

    Entries without ``NAME=`` apply to every mechanism not named elsewhere.
    """
    per: dict[str, list[int]] = {}
    for value in values:
        name, sep, rest = value.partition("=")
        key, text = (name.strip(), rest) if sep else ("*", value)
        try:
            per[key] = [int(t) for t in _split(text, "--sizes")]
        except ValueError:
            raise ValidationError(f"--sizes takes integers (optionally NAME=50,100), got {value!r}") from None
    return per["*"] if list(per) == ["*"] else per


SizesOpt = Annotated[
    list[str] | None,
    typer.Option("--sizes", help="Sizes n (default 50,100,200); repeat as NAME=50,100 per mechanism."),
]
MechOpt = Annotated[
    str | None,
    typer.Option("--mechanisms", help="optimal, constopt, constopt-normalised, spanner; NAME@R sets r."),
]
FormOpt = Annotated[str, typer.Option("--formulations", help="fast, full or both (SpannerMech has one).")]
DataOpt = Annotated[
    str,
    typer.Option(
        "--data",
        help="glove (GloVe 50-d), gaussian, clustered (50-d, n/25 centres), geo (Paris cells), grid (k*k, prior).",
    ),
]
LimitOpt = Annotated[float | None, typer.Option("--time-limit", help="Seconds per build (600; quick 60).")]
QuickOpt = Annotated[bool, typer.Option("--quick", help="Smoke run: n=20, optimal/constopt/spanner.")]
OutOpt = Annotated[Path | None, typer.Option("--out", "-o", help="Write the markdown report here.")]


def register(app: typer.Typer) -> None:
    """Add the ``bench`` sub-app with its ``lp`` command to ``app``."""
    bench_app = typer.Typer(
        name="bench", help="Benchmarks (not tests): LP formulations side by side.", no_args_is_help=True
    )

    @bench_app.command("lp")
    @handle_errors
    def lp(
        sizes: SizesOpt = None,
        mechanisms: MechOpt = None,
        formulations: FormOpt = "fast,full",
        neighbours: Annotated[int, typer.Option("--neighbours", "-r", min=1, help="ConstOPTMech's r.")] = 10,
        epsilon: Annotated[float, typer.Option("--epsilon", help="Nominal eps of every build.")] = 1.0,
        epsilons: Annotated[
            str | None, typer.Option("--epsilons", help="Sweep eps: comma-separated (overrides --epsilon).")
        ] = None,
        data: DataOpt = "glove",
        seed: Annotated[int, typer.Option("--seed", min=0, help="Seed of the vocabulary sample.")] = 0,
        time_limit: LimitOpt = None,
        full_max_n: Annotated[
            int | None, typer.Option("--full-max-n", min=2, help="Run the full formulation only up to n.")
        ] = None,
        full_time_limit: Annotated[
            float | None,
            typer.Option("--full-time-limit", help="Seconds per build of the full formulation (--time-limit)."),
        ] = None,
        quick: QuickOpt = False,
        out: OutOpt = None,
        csv_out: Annotated[Path | None, typer.Option("--csv", help="Also write the rows as CSV.")] = None,
        checkpoint: Annotated[
            Path | None,
            typer.Option("--checkpoint", help="Append each finished row here (JSON lines; default OUT.jsonl)."),
        ] = None,
        plot: Annotated[Path | None, typer.Option("--plot", help="Write seconds against eps (PNG) here.")] = None,
        certify: Annotated[
            float | None,
            typer.Option("--certify", help="Seconds for a certified lower bound on each OPTMech optimum (gap column)."),
        ] = None,
    ) -> None:
        """Build each LP mechanism with the fast and the reference formulation: one table.

        Every build runs in a fresh process (peak memory per build) under a time limit;
        a series stops at its first time-out. The table goes to stdout (markdown).
        """
        from ..experiments import bench_lp as bench
        from ..io import atomic_write

        if checkpoint is None and out is not None:
            checkpoint = out.with_suffix(".jsonl")
        for path, opt in ((out, "--out"), (csv_out, "--csv"), (checkpoint, "--checkpoint"), (plot, "--plot")):
            if path is not None:
                check_output(path, opt, inputs=(out, csv_out, checkpoint, plot))  # the outputs differ
        if plot is not None:
            require("plot", what="--plot")
        if data in ("glove", "geo"):
            require(data, what=f"--data {data}")
        try:
            eps_list = [float(t) for t in _split(epsilons, "--epsilons")] if epsilons is not None else [epsilon]
        except ValueError:
            raise ValidationError(f"--epsilons takes numbers, got {epsilons!r}") from None
        size_arg = parse_sizes(sizes or [QUICK_SIZES if quick else DEFAULT_SIZES])
        mech_list = _split(mechanisms or (QUICK_MECHANISMS if quick else DEFAULT_MECHANISMS), "--mechanisms")
        form_list = _split(formulations, "--formulations")
        limit = time_limit if time_limit is not None else (QUICK_TIME_LIMIT if quick else DEFAULT_TIME_LIMIT)
        if limit <= 0:
            raise ValidationError(f"--time-limit must be > 0, got {limit}")
        if full_time_limit is not None and not full_time_limit > 0:
            raise ValidationError(f"--full-time-limit must be > 0, got {full_time_limit}")
        total = len(eps_list) * bench.planned_builds(size_arg, mech_list, form_list, neighbours)  # validates
        with progress("benchmark", total) as report:
            finished = [0]

            def on_start(n: int, mech: str, form: str, eps: float) -> None:
                report(finished[0], total, f"n={n} eps={eps:g} {mech} {form}")

            def on_row(row: bench.BenchRow) -> None:
                finished[0] += 1
                if checkpoint is not None:  # a crash later loses nothing finished
                    bench.append_checkpoint(checkpoint, row)
                report(finished[0], total, f"n={row.n} eps={row.epsilon:g} {row.mechanism} {row.formulation}: "
                       f"{row.status}")

            rows = bench.run_bench(
                size_arg, mech_list, form_list, neighbours=neighbours, epsilons=eps_list, data=data, seed=seed,
                time_limit=limit, full_max_n=full_max_n, full_time_limit=full_time_limit,
                on_start=on_start, on_row=on_row, certify=certify,
            )
        typer.echo(bench.markdown_table(rows))
        if out is not None:
            settings = {
                "data": data, "seed": seed, "epsilons": ", ".join(f"{e:g}" for e in eps_list),
                "r": neighbours, "time limit (s)": limit,
                "full formulation time limit (s)": full_time_limit or limit,
                "full formulation up to n": full_max_n or "all",
                "certificate time limit (s)": certify or "off",
                "command": "`metricdp " + " ".join(shlex.quote(a) for a in sys.argv[1:]) + "`",
            }
            with atomic_write(out, "w") as fh:
                fh.write(bench.markdown_report(rows, settings, bench.machine_info()))
            err_console.print(f"wrote {out}", markup=False, highlight=False)
        if plot is not None:
            bench.plot_seconds(rows, plot)
            err_console.print(f"wrote {plot}", markup=False, highlight=False)
        if csv_out is not None:
            fields = [f for f in bench.BenchRow.__dataclass_fields__ if f != "extra"]
            with atomic_write(csv_out, "w") as fh:
                writer = csv.DictWriter(fh, fieldnames=fields, extrasaction="ignore")
                writer.writeheader()
                for r in rows:
                    writer.writerow(r.as_dict())

    @bench_app.command("privatize")
    @handle_errors
    def privatize(
        rows: Annotated[str, typer.Option("--rows", help="Row counts, comma-separated.")] = "2000000,20000000",
        formats: Annotated[str, typer.Option("--formats", help="csv, parquet, or csv,parquet.")] = "csv,parquet",
        engines: Annotated[str, typer.Option("--engines", help="local, dask, spark.")] = "local,dask,spark",
        workdir: Annotated[
            Path, typer.Option("--workdir", help="Where the inputs are generated (kept) and outputs written.")
        ] = Path("bench-privatize"),
        timeout: Annotated[float, typer.Option("--timeout", help="Seconds per command.")] = 1800.0,
        points: Annotated[int, typer.Option("--points", min=2, help="Points of the mechanism.")] = 1000,
        out: OutOpt = None,
        persons: Annotated[int | None, typer.Option(
            "--persons", min=1, help="Ledger variant: N rows of P persons, released without and with "
            "--user-column/--budget/--ledger (local engine): seconds, peak RSS and their ratios.")] = None,
        quick: Annotated[bool, typer.Option("--quick", help="Ledger variant smoke run: 20,000 rows, 1,000 persons, "
                                            "50 points, CSV.")] = False,
    ) -> None:
        """Throughput (rows/s) and peak memory of ``metricdp privatize``.

        A 1,000-point mechanism and files of N rows (id, word); every command in a fresh
        process, peak RSS from /usr/bin/time -v. The table goes to stdout (markdown).
        With --persons (or --quick): the ledger's overhead.
        """
        from ..experiments import bench_privatize as bp
        from ..io import atomic_write

        if persons is not None or quick:
            from ._bench_ledger import cli

            cli(rows, persons, formats, workdir, timeout, points, out, quick)
            return

        if out is not None:
            check_output(out)
        try:
            row_list = [int(x) for x in _split(rows, "--rows")]
        except ValueError:
            raise ValidationError(f"--rows takes integers, got {rows!r}") from None
        fmt_list, engine_list = _split(formats, "--formats"), _split(engines, "--engines")
        for item, allowed, opt in ((fmt_list, ("csv", "parquet"), "--formats"),
                                   (engine_list, ("local", "dask", "spark"), "--engines")):
            bad = [x for x in item if x not in allowed]
            if bad:
                raise ValidationError(f"{opt}: unknown {', '.join(bad)}; choose from {', '.join(allowed)}")
        require(*(e for e in engine_list if e != "local"), what="--engines")

        def on_row(row: bp.PrivatizeRow) -> None:
            err_console.print(
                f"{row.format} {row.rows:,} rows {row.engine}: {row.seconds:.1f} s, {row.rows_per_s:,.0f} rows/s, "
                f"peak RSS {row.peak_rss_mib:,.0f} MiB ({row.status})", markup=False, highlight=False,
            )

        result = bp.run_privatize_bench(
            row_list, fmt_list, engine_list, workdir, timeout=timeout, points=points, on_row=on_row
        )
        table = bp.markdown_table(result)
        typer.echo(table)
        if out is not None:
            load = " ".join(f"{x:.2f}" for x in os.getloadavg())
            with atomic_write(out, "w") as fh:
                fh.write(f"{table}\n\nload average at the end: {load}\n")

    _add_sample(bench_app)
    from .bench_numbers import add_command  # bench privatize-numbers

    add_command(bench_app)
    from .bench_points import add_points

    add_points(bench_app)

    @bench_app.command("text")
    @handle_errors
    def text(
        mechanisms: Annotated[
            str, typer.Option("--mechanisms", help="Comma-separated: exponential, tem, madlib, madlib-ivf, ...")
        ] = "exponential,tem,madlib,madlib-ivf,subsampled-exponential",
        tokens: Annotated[
            list[str] | None, typer.Option("--tokens", help="Corpus size (1,000,000); repeat as NAME=N per mechanism.")
        ] = None,
        epsilon: Annotated[
            str, typer.Option("--epsilon", help="Per-token eps of every mechanism; a comma-separated list runs each.")
        ] = "10",
        seed: Annotated[int, typer.Option("--seed", min=0, help="Seed of the Zipf corpus (public data).")] = 0,
        corpus: Annotated[
            str, typer.Option("--corpus", help="zipf (synthetic) or stdlib-docs (real English text).")
        ] = "zipf",
        plot: Annotated[
            Path | None, typer.Option("--plot", help="PNG: tokens changed and mean distance against eps.")
        ] = None,
        out: OutOpt = None,
    ) -> None:
        """Text mechanisms over all 400,000 GloVe words on a Zipf or a real corpus: one table."""
        from ..experiments import bench_text
        from ..io import atomic_write

        if out is not None:
            check_output(out)
        if plot is not None:
            check_output(plot, "--plot")
        epsilons = [float(e) for e in _split(epsilon, "--epsilon")]
        per = parse_sizes(tokens or ["1000000"])
        names = _split(mechanisms, "--mechanisms")
        require("glove", what="bench text")
        if any(n.endswith(("-ivf", "-hnsw")) for n in names):
            require("faiss-cpu", what="--mechanisms " + ",".join(n for n in names if n.endswith(("-ivf", "-hnsw"))))
        if isinstance(per, list):
            size: int | dict[str, int] = per[0]
        else:
            size = {n: (per.get(n) or per.get("*") or [1_000_000])[0] for n in names}

        def on_row(row: bench_text.TextBenchRow) -> None:
            err_console.print(
                f"{row.mechanism} eps={row.epsilon:g}: {row.status} {row.tokens_per_s or 0:,.0f} tokens/s", markup=False
            )

        load_before = " ".join(f"{x:.2f}" for x in os.getloadavg())
        rows = bench_text.run_text_bench(names, size, epsilon=epsilons, seed=seed, on_row=on_row, corpus=corpus)
        typer.echo(bench_text.markdown_table(rows))
        if plot is not None:
            bench_text.plot_utility(rows, plot)
            err_console.print(f"wrote {plot}", markup=False, highlight=False)
        if out is not None:
            from ..experiments import bench_lp as bench

            settings = {
                "corpus": (
                    "Zipf (1/k) over the 20,000 most frequent GloVe words, streamed in 1,000,000-token chunks"
                    if corpus == "zipf" else
                    "the Python standard library's documentation (pydoc topics, then module docstrings), "
                    "through text privatize's file path"
                ),
                "vocabulary": "all 400,000 GloVe 6B 50-d words", "epsilon": ", ".join(map(str, epsilons)),
                "seed": seed,
                "load average (1, 5, 15 min) before": load_before,
                "load average after": " ".join(f"{x:.2f}" for x in os.getloadavg()),
                "command": "`metricdp " + " ".join(shlex.quote(a) for a in sys.argv[1:]) + "`",
            }
            with atomic_write(out, "w") as fh:
                fh.write(bench_text.markdown_report(rows, settings, bench.machine_info()))
            err_console.print(f"wrote {out}", markup=False, highlight=False)

    app.add_typer(bench_app, name="bench")


def _add_sample(bench_app: typer.Typer) -> None:
    """``metricdp bench sample``: the exact sampler's throughput (:mod:`metricdp.experiments.bench_sample`)."""

    @bench_app.command("sample")
    @handle_errors
    def sample(
        n_small: Annotated[int, typer.Option("--n-small", min=2, help="Exponential mechanism size.")] = 1_000,
        n_large: Annotated[int, typer.Option("--n-large", min=2, help="Size of the table-build matrix.")] = 10_000,
        draws: Annotated[int, typer.Option("--draws", min=1, help="Releases per timing.")] = 1_000_000,
        repeats: Annotated[int, typer.Option("--repeats", min=1, help="Timings per measurement (best).")] = 3,
        quick: Annotated[bool, typer.Option("--quick", help="Smoke run: n = 100 and 300, 20,000 draws.")] = False,
    ) -> None:
        """Exact releases/s (n = 1,000), table build (n = 10,000), privatize exact vs float."""
        from ..experiments import bench_sample

        if quick:
            n_small, n_large, draws, repeats = 100, 300, 20_000, 1
        rows = bench_sample.run(n_small=n_small, n_large=n_large, draws=draws, repeats=repeats)
        typer.echo(bench_sample.markdown(rows))
