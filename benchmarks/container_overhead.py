"""What running an engine from an image costs: time to ready and to done, native vs Podman container.

Runs the same simulated vLLM configuration on a simulated local host N times natively and N times
from an image (Debian's python3 in a locally built image, the simulator's shims mounted, as the tests
do), each with the same small benchmark, and prints the median and range of: claim → ready (engine
start, plus for the container the image check, the in-image version query and the preflight) and
claim → done (including stop and removal).

    python benchmarks/container_overhead.py [--runs 3] [--smoke]

Needs podman and runc; writes its own containers.conf (runc, no default ulimits).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from sqlalchemy.engine import Engine  # noqa: E402

from db import crud  # noqa: E402
from db import session as db_session  # noqa: E402
from db.session import new_session  # noqa: E402
from perflab.engines import EngineConfig  # noqa: E402
from perflab.inventory import HostConfig, Inventory, SimulateSpec  # noqa: E402
from perflab.profiles import PRESETS, scaled  # noqa: E402
from perflab.runner import RunnerOptions, execute_run, submit_run  # noqa: E402
from tests.fixtures.podman import PYTHON_LINKS, build_rootfs_image, python_files  # noqa: E402

OPTIONS = RunnerOptions(ready_poll_s=0.2, sample_interval_s=1.0, stop_grace_s=5.0, ready_timeout_s=120.0)


def _timings(engine: Engine, host: HostConfig, config: EngineConfig) -> tuple[float, float]:
    run = submit_run(
        engine,
        host_name=host.name,
        config=config,
        profiles=[scaled(PRESETS["short"], 0.02)],
        worker_id="bench",
    )
    status = execute_run(
        run.id,
        engine=engine,
        inventory=Inventory(Path("hosts.yaml"), (host,)),
        worker_id="bench",
        options=OPTIONS,
    )
    with new_session(engine) as session:
        stored = crud.require_run(session, run_id=run.id)
    if status != "done":
        raise SystemExit(f"run {run.id} {status}: {stored.failure_message}")
    return (
        (stored.ready_at - stored.launching_at).total_seconds(),
        (stored.finished_at - stored.launching_at).total_seconds(),
    )


def _line(label: str, values: list[float]) -> str:
    median = statistics.median(values)
    return f"{label:<22} median {median:6.2f} s   min {min(values):6.2f}   max {max(values):6.2f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--smoke", action="store_true", help="a small run that tests run: 1 run each")
    args = parser.parse_args()
    if args.smoke:
        args.runs = 1
    with tempfile.TemporaryDirectory(prefix="perflab-container-bench-") as directory:
        root = Path(directory)
        conf = root / "containers.conf"
        conf.write_text('[containers]\ndefault_ulimits = []\n\n[engine]\nruntime = "runc"\n')
        os.environ["CONTAINERS_CONF"] = str(conf)
        image = build_rootfs_image("perflab-test/python3", python_files(), PYTHON_LINKS)
        engine = db_session.get_engine(f"sqlite:///{root / 'bench.db'}")
        db_session.upgrade(str(engine.url))
        host = HostConfig(
            name="bench-host",
            transport="local",
            workdir=str(root / "host"),
            env={"CONTAINERS_CONF": str(conf)},
            simulate=SimulateSpec(accelerator="H100", count=8, time_scale=200),
        )
        results: dict[str, list[tuple[float, float]]] = {"native": [], "podman": []}
        for _ in range(args.runs):
            for kind, chosen in (("native", None), ("podman", image)):
                config = EngineConfig(engine="vllm", model="Qwen/Qwen3-8B", tp=1, image=chosen)
                results[kind].append(_timings(engine, host, config))
    print(f"{args.runs} runs each, simulated vLLM on a local simulated host, image {image}")
    for kind, rows in results.items():
        print(_line(f"{kind} claim→ready", [ready for ready, _ in rows]))
        print(_line(f"{kind} claim→done", [done for _, done in rows]))


if __name__ == "__main__":
    main()
