"""Writers of one preflight cache entry, run in separate processes by the race test (importable by
``spawn``): each process starts several threads that store and read the same key at once."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from multiprocessing.synchronize import Barrier
from pathlib import Path

from perflab.engines.helptext import FlagSpec
from perflab.engines.preflight import HelpCache

KEY = ("gpu-a", "vllm", "0.33.0")


def flags_of(writer: str) -> dict[str, FlagSpec]:
    """A help large enough that a torn write would show: 400 flags, each naming its writer."""
    return {
        f"--flag-{index}-{writer}": FlagSpec(index % 2 == 0, (writer,) if index % 3 else None)
        for index in range(400)
    }


def _write_and_read(directory: str, writer: str, rounds: int, every: set[str]) -> list[str]:
    cache = HelpCache(Path(directory))
    mine = flags_of(writer)
    wholes = {name: flags_of(name) for name in every}
    problems = []
    for _ in range(rounds):
        cache.store(KEY, mine)
        seen = cache.load(KEY)
        if seen is None or not any(seen == whole for whole in wholes.values()):
            problems.append(f"{writer} read an entry no writer stored whole")
    return problems


def store_at_once(
    directory: str, process: int, threads: int, rounds: int, writers: list[str], barrier: Barrier
) -> list[str]:
    """Wait for every process, then store and read ``KEY`` from ``threads`` threads ``rounds`` times
    each; returns what went wrong (an exception's text, or a read of a partial entry)."""
    barrier.wait()
    names = [f"p{process}t{thread}" for thread in range(threads)]
    with ThreadPoolExecutor(max_workers=threads) as pool:
        futures = [pool.submit(_write_and_read, directory, name, rounds, set(writers)) for name in names]
        problems = []
        for future in futures:
            try:
                problems += future.result()
            except Exception as error:  # the race's symptom: reported, not raised, so every writer is heard
                problems.append(f"{type(error).__name__}: {error}")
    return problems
