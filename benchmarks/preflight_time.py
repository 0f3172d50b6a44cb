"""How long does the preflight take before a launch: asking the engine, then from the cache?

Times :func:`perflab.engines.preflight.preflight` for one vLLM config with an unknown flag on a
simulated local host (its ``vllm`` cannot be imported, so the simulator's ``vllm serve --help=all`` is
read) and, when its venv is installed, on the real vLLM CPU build (``tests/fixtures/real_vllm.py``), whose
own parser reads the argv (``perflab/engines/programs/vllm_check.py``): the first check asks the host,
the following ones read the answer (or the parsed help) from the cache. Prints the seconds of each,
``--rounds`` cached checks summarised as min/median/max. For comparison, the real vLLM needs 40–90 s to
load the tests' tiny model before it would report the same unknown flag.

Run from the repository root: ``python benchmarks/preflight_time.py [--rounds 5] [--smoke]``. Prints figures
only.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))

from perflab.engines import EngineConfig, get_adapter  # noqa: E402
from perflab.engines.preflight import HelpCache, preflight  # noqa: E402
from perflab.inventory import HostConfig, SimulateSpec  # noqa: E402
from perflab.transport import open_transport  # noqa: E402
from perflab.transport.base import Transport  # noqa: E402
from perflab.transport.local import LocalTransport  # noqa: E402
from tests.fixtures.real_vllm import missing_reason, vllm_bin  # noqa: E402

CONFIG = EngineConfig(engine="vllm", model="/models/tiny", extra_args=("--no-such-flag",))


def _time(transport: Transport, version: str, cache: HelpCache, rounds: int) -> tuple[float, list[float]]:
    adapter = get_adapter("vllm")
    started = time.perf_counter()
    verdict = preflight(transport, adapter, CONFIG, engine_version=version, cache=cache)
    first = time.perf_counter() - started
    assert verdict.problems, verdict.summary()
    cached = []
    for _ in range(rounds):
        started = time.perf_counter()
        preflight(transport, adapter, CONFIG, engine_version=version, cache=cache)
        cached.append(time.perf_counter() - started)
    return first, cached


def _print(label: str, first: float, cached: list[float]) -> None:
    print(
        f"{label:<28} first (engine asked) {first:7.2f} s   cached min/median/max "
        f"{min(cached):.3f}/{statistics.median(cached):.3f}/{max(cached):.3f} s"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--smoke", action="store_true", help="a small run that tests run: 1 cached round")
    args = parser.parse_args()
    if args.smoke:
        args.rounds = 1
    with tempfile.TemporaryDirectory(prefix="perflab-preflight-") as work:
        host = HostConfig(
            name="bench-sim",
            transport="local",
            workdir=str(Path(work) / "sim"),
            simulate=SimulateSpec(accelerator="H100", count=1),
        )
        _print(
            "simulated vLLM 0.11.0",
            *_time(open_transport(host), "0.11.0", HelpCache(Path(work) / "a"), args.rounds),
        )
        reason = missing_reason()
        if reason is not None:
            print(f"real vLLM: skipped ({reason})")
            return 0
        real = LocalTransport(
            HostConfig(name="bench-cpu", transport="local", workdir=str(Path(work) / "cpu"))
        )
        real.extra_env = {"PATH": f"{vllm_bin().parent}{os.pathsep}{os.environ.get('PATH', '')}"}
        _print("real vLLM 0.32.0+cpu", *_time(real, "0.32.0+cpu", HelpCache(Path(work) / "b"), args.rounds))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
