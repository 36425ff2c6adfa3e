"""Read ahead and write behind: the reading and the writing of chunks in worker threads while the caller releases.

A chunked release does two kinds of work per chunk: *reading* (the file's bytes, the
record split and validation of :mod:`metricdp.tabular.csv`, parsing the released column)
and *releasing* (the sampler, formatting, splicing, writing). The two touch different
chunks, and most of either runs in numpy, pyarrow or compiled kernels that release the
GIL, so on two cores they overlap: :func:`prefetch` runs an iterator in a worker thread
at most ``depth`` items ahead of the consumer.

Why it is safe:

* the order is the iterator's: the consumer sees exactly the items, and the exception,
  that iterating it directly would give, at the same position (an error in chunk k is
  raised after chunks 0..k-1 were consumed, as before), so error messages and the
  "nothing published on error" rule of :func:`metricdp.io.atomic_write` are unchanged;
* nothing random happens in the worker (the release's random source is used by the
  consumer only, in chunk order): outputs for a seed are byte-identical;
* memory is bounded: at most ``depth`` items wait in the queue, plus the one the worker
  builds and the one the consumer holds;
* when the consumer stops early (an error, a ``break``, garbage collection), the worker
  is told to stop, its pending item is discarded and the thread joined: no thread
  outlives the call that started it (the worker's iterator is closed in its own thread).

:func:`write_behind` is the other end: the caller hands each chunk's output work
(formatting, splicing, writing to the output file) to one writer thread, which runs it
in the order handed; an error there is raised in the caller at its next hand-over or at
the end of the block, and leaving the block (normally or by an error) waits for the
writer, so the output file is never written after the block -- :func:`metricdp.io.atomic_write`
then publishes or discards it as before.
"""

from __future__ import annotations

import contextlib
import queue
import threading
from collections.abc import Callable, Iterator
from typing import Any, TypeVar, cast

__all__ = ["prefetch", "write_behind"]

T = TypeVar("T")

_DONE = object()
_POLL_S = 0.05  # how often a blocked worker looks for a stop request


class _Raised:
    def __init__(self, error: BaseException) -> None:
        self.error = error


def prefetch(items: Iterator[T], depth: int = 2) -> Iterator[T]:
    """Yield ``items`` in order, produced by a worker thread up to ``depth`` items ahead (module docstring).

    ``depth < 1`` iterates ``items`` in the caller's thread (no worker).

    >>> list(prefetch(iter(range(5))))
    [0, 1, 2, 3, 4]
    """
    if depth < 1:
        yield from items
        return
    box: queue.Queue[object] = queue.Queue(maxsize=depth)
    stop = threading.Event()

    def put(item: object) -> bool:
        while not stop.is_set():
            try:
                box.put(item, timeout=_POLL_S)
                return True
            except queue.Full:
                continue
        return False

    def work() -> None:
        try:
            for item in items:
                if not put(item):
                    return
            put(_DONE)
        except BaseException as ex:  # handed to the consumer, raised there
            put(_Raised(ex))
        finally:
            close = getattr(items, "close", None)
            if close is not None:
                close()

    worker = threading.Thread(target=work, name="metricdp-prefetch", daemon=True)
    worker.start()
    try:
        while True:
            got = box.get()
            if got is _DONE:
                return
            if isinstance(got, _Raised):
                raise got.error
            yield got  # type: ignore[misc]
    finally:
        stop.set()
        while worker.is_alive():
            try:
                box.get(timeout=_POLL_S)
            except queue.Empty:
                pass
        worker.join()


@contextlib.contextmanager
def write_behind(depth: int = 2) -> Iterator[Callable[..., None]]:
    """``with write_behind() as submit: submit(fn, *args)`` runs ``fn(*args)`` in one writer thread, in order.

    At most ``depth`` calls wait; the first error of a call is raised in the caller (at
    its next ``submit`` or when the block ends) and no later call runs. ``depth < 1``
    runs each call at once in the caller's thread.
    """
    if depth < 1:
        def run_now(fn: Callable[..., None], *args: Any) -> None:
            fn(*args)

        yield run_now
        return
    box: queue.Queue[object] = queue.Queue(maxsize=depth)
    failed: list[BaseException] = []

    def work() -> None:
        while True:
            job = box.get()
            if job is _DONE:
                return
            if failed:
                continue  # after an error: drain, run nothing
            call = cast("tuple[Callable[..., None], tuple[Any, ...]]", job)
            try:
                call[0](*call[1])
            except BaseException as ex:  # handed to the caller, raised there
                failed.append(ex)

    worker = threading.Thread(target=work, name="metricdp-write-behind", daemon=True)
    worker.start()

    def submit(fn: Callable[..., None], *args: Any) -> None:
        if failed:
            raise failed[0]
        box.put((fn, args))

    try:
        yield submit
    finally:
        box.put(_DONE)
        worker.join()
    if failed:
        raise failed[0]
