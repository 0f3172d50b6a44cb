"""perflab's built-in load generator for OpenAI-compatible servers (``python -m perflab bench``).

It runs next to the engine, on hosts where only a python3 ≥ 3.9 is assumed, so every module here
uses the standard library plus httpx (shipped inside the agent zipapp) and imports nothing else
from perflab. The pieces: ``http1``/``transport``/``clock`` (an httpx transport for many streams,
timed at the socket), ``sse`` and ``client`` (one streaming request), ``datasets`` and ``tokenizer``
(prompts of exact lengths), ``traffic`` and ``dispatch`` (the request schedule and sending it),
``tally``/``records``/``metrics`` (per-request records and statistics as pure functions), ``report``
(JSON result and text block), ``progress``, ``rounds`` (the workload sent again until it has
measured long enough), ``runner`` (a whole run) and ``cli``.

The app calls ``run_benchmark(BenchOptions(...))`` (or ``await run_benchmark_async(...)``) and
``perflab.bench.report.format_text_block(result)``.
"""

from __future__ import annotations

from perflab.bench.options import BenchOptions
from perflab.bench.runner import run_benchmark, run_benchmark_async

__all__ = ["BenchOptions", "run_benchmark", "run_benchmark_async"]
