"""Query parameters of shared links, validated once: ``?run=42``, ``?compare=3,7,12&baseline=3``.

Each parser returns the ids or raises :class:`BadParam` with a sentence a user can act on; pages show
it instead of a traceback. Unknown (well-formed) ids are the pages' business: they look them up.
"""

from __future__ import annotations

MAX_COMPARE_RUNS = 24
# Ids are 32-bit integer keys in every database perflab supports: nothing larger can exist.
MAX_ID = 2**31 - 1


class BadParam(ValueError):
    """A query parameter that cannot be read; ``str(error)`` is the friendly message."""


def parse_id(text: str, param: str, noun: str, example: int) -> int:
    """The id of ``?param=`` (``#42`` and spaces allowed); BadParam unless a whole number from 1 up."""
    cleaned = text.strip().lstrip("#")
    shown = text.strip().encode("unicode_escape").decode("ascii")
    if not (cleaned.isascii() and cleaned.isdigit()) or int(cleaned) == 0:
        raise BadParam(
            f"'{shown}' in ?{param}= is not a {noun} id: {noun} ids are whole numbers like {example}."
        )
    if int(cleaned) > MAX_ID:
        raise BadParam(f"There is no {noun} {cleaned}: {noun} ids go up to {MAX_ID}.")
    return int(cleaned)


def _run_id(text: str, param: str) -> int:
    return parse_id(text, param, "run", 42)


def parse_run_id(raw: str | None) -> int:
    """The run id of ``?run=ID``."""
    if raw is None or not raw.strip():
        raise BadParam("No run given: open a run from the Runs page, or add ?run=ID to the address.")
    return _run_id(raw, "run")


def parse_run_ids(raw: str | None) -> list[int]:
    """The distinct run ids of ``?compare=3,7,12`` in their order (commas or spaces separate them)."""
    if raw is None or not raw.replace(",", " ").split():
        raise BadParam(
            "No runs to compare: select runs on the Runs page and press 'Compare selected', "
            "or add ?compare=3,7,12 to the address."
        )
    ids = list(dict.fromkeys(_run_id(item, "compare") for item in raw.replace(",", " ").split()))
    if len(ids) > MAX_COMPARE_RUNS:
        raise BadParam(f"{len(ids)} runs given; compare at most {MAX_COMPARE_RUNS} runs at once.")
    return ids


def parse_baseline(raw: str | None, run_ids: list[int]) -> tuple[int, str | None]:
    """The baseline of ``&baseline=ID`` among ``run_ids`` (default: the first) and a note if ignored."""
    if raw is None or not raw.strip():
        return run_ids[0], None
    try:
        baseline = _run_id(raw, "baseline")
    except BadParam as error:
        return run_ids[0], f"{error} Using run {run_ids[0]} as the baseline."
    if baseline not in run_ids:
        return run_ids[
            0
        ], f"Run {baseline} is not among the compared runs; using run {run_ids[0]} as the baseline."
    return baseline, None


def compare_query(run_ids: list[int], baseline: int | None = None) -> dict[str, str]:
    """The query parameters of the compare page for these runs."""
    params = {"compare": ",".join(str(run_id) for run_id in run_ids)}
    if baseline is not None:
        params["baseline"] = str(baseline)
    return params
