"""The NVIDIA path against real outputs of one H200 host (tests/data/nvidia-h200/, read its README).

The probe, the refusal of a GPU another process holds, and the sampler run over the local and SSH
transports against an ``nvidia-smi`` that answers from those recordings
(:mod:`tests.fixtures.recorded_smi`); everything else is the real code path.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from perflab.engines import EngineConfig, ReplicaPlan, get_adapter
from perflab.probe import ProbeResult, nvidia, probe_host
from perflab.remote.process import RemoteProcess
from perflab.runner import energy, sampling
from perflab.runner.endpoints import Endpoints
from perflab.runner.errors import RunFailed
from perflab.runner.launch import Replica
from perflab.runner.placement import choose_gpus, why_no_accelerators
from perflab.runner.sampling import Sampler
from perflab.transport import open_transport
from tests.fixtures.recorded_smi import RECORDINGS, install_recorded_nvidia_smi
from tests.fixtures.sim_server import SimServerFactory
from tests.hosts.conftest import HostFactory

SYSTEM_PATH = "/usr/local/bin:/usr/bin:/bin"
PROBE_DATA = Path(__file__).resolve().parents[1] / "data" / "probe"
CONFIG = EngineConfig(engine="vllm", model="m")
VLLM = get_adapter("vllm")
# Rows of power-under-load.jsonl's periodic query: idle at 77.78 W; full matmul load at the power cap.
IDLE_ROW, LOAD_ROW = 2, 9
# A stand-in for the NVML library, which needs a GPU: the module the nvidia-ml-py package installs,
# with the calls perflab's energy program makes.
PYNVML_STANDIN = """
class NVMLError(Exception):
    pass
def nvmlInit():
    pass
def nvmlShutdown():
    pass
def nvmlDeviceGetCount():
    return 2
def nvmlDeviceGetHandleByIndex(index):
    return index
def nvmlDeviceGetTotalEnergyConsumption(handle):
    if handle == 1:
        raise NVMLError("Not Supported")
    return 987654321
"""


def recorded_host(make_host: HostFactory, tmp_path: Path, phase: str, row: int = 0, **env: str):
    bin_dir = tmp_path / f"bin-{phase.replace(',', '-').replace('=', '-')}-{row}"
    install_recorded_nvidia_smi(bin_dir, phase=phase, power_row=row)
    return make_host(env={"PATH": f"{bin_dir}:{SYSTEM_PATH}", **env}, python=sys.executable)


def probe(make_host: HostFactory, tmp_path: Path, phase: str) -> ProbeResult:
    with open_transport(recorded_host(make_host, tmp_path, phase)) as transport:
        return probe_host(transport)


def sampler(transport, store_run_id: int = 1, endpoints: Endpoints | None = None, replicas=()) -> Sampler:
    # Only what a round reads is exercised (no store is needed): the accelerators, and the engines of
    # ``replicas`` where ``endpoints`` reach them.
    return Sampler(
        transport=transport,
        adapter=VLLM,
        endpoints=endpoints,  # type: ignore[arg-type]
        replicas=replicas,
        gpu_ids=[0],
        vendor="nvidia",
        store=SimpleNamespace(run_id=store_run_id),  # type: ignore[arg-type]
        interval_s=1.0,
    )


def test_probe_reads_the_real_h200(make_host: HostFactory, tmp_path: Path) -> None:
    result = probe(make_host, tmp_path, "idle")
    [gpu] = result.accelerators
    assert (gpu.index, gpu.name, gpu.memory_total_mib, gpu.memory_used_mib) == (0, "NVIDIA H200", 143771, 0)
    assert (gpu.driver, gpu.compute_cap, gpu.temperature_c) == ("580.159.04", "9.0", 35.0)
    assert gpu.uuid == "GPU-00000000-1111-2222-3333-444444444444"
    assert [problem for problem in result.problems if problem.tool == "nvidia-smi"] == []


def test_a_gpu_another_process_holds_is_refused_and_free_after_the_run(
    make_host: HostFactory, tmp_path: Path
) -> None:
    held = probe(make_host, tmp_path, "holder")
    assert held.accelerators[0].memory_used_mib == 31339
    with pytest.raises(RunFailed, match=r"processes perflab did not start \(GPU 0: 31339 MiB\)") as refused:
        choose_gpus(CONFIG, held.accelerators, {}, host_name="h200")
    assert refused.value.failure_class == "gpus_unavailable"
    released = probe(make_host, tmp_path, "after_run")
    assert choose_gpus(CONFIG, released.accelerators, {}, host_name="h200") == (0,)


def test_unreachable_driver_reason_reaches_the_run(make_host: HostFactory, tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    tool = bin_dir / "nvidia-smi"
    tool.write_text(f"#!/bin/sh\ncat {PROBE_DATA / 'nvidia-smi/driver-failed.txt'}\nexit 9\n")
    tool.chmod(0o755)
    with open_transport(make_host(env={"PATH": f"{bin_dir}:{SYSTEM_PATH}"})) as transport:
        result = probe_host(transport)
    assert result.accelerators == []
    with pytest.raises(RunFailed) as failed:
        choose_gpus(CONFIG, result.accelerators, {}, host_name="h", why_none=why_no_accelerators(result))
    assert failed.value.failure_class == "gpus_unavailable"
    assert "host 'h' lists no accelerators: nvidia-smi cannot talk to the NVIDIA driver" in str(failed.value)
    assert "found none" not in str(failed.value)


def test_recorded_sampling_during_a_run_parses_to_its_load_and_memory() -> None:
    calls = [json.loads(line) for line in (RECORDINGS / "sampling-during-run.jsonl").read_text().splitlines()]
    gpus = [nvidia.parse_query_csv(call["stdout"])[0] for call in calls]
    assert [gpu.utilization_pct for gpu in gpus[7:10]] == [0.0, 51.0, 60.0]
    assert {gpu.memory_used_mib for gpu in gpus[8:]} == {114819}
    assert min(gpu.utilization_pct for gpu in gpus[8:34]) == 41.0
    assert max(gpu.utilization_pct for gpu in gpus[8:34]) == 65.0
    assert all(gpu.power_w is None and gpu.sm_clock_mhz is None for gpu in gpus)  # not in that query


def test_power_recording_gives_average_power_sm_clock_and_temperature() -> None:
    calls = [json.loads(line) for line in (RECORDINGS / "power-under-load.jsonl").read_text().splitlines()]
    [help_call] = [call for call in calls if call["argv"][1] == "--help-query-gpu"]
    assert '"power.draw.average"' in help_call["stdout"] and "energy" not in help_call["stdout"].lower()
    load = [
        nvidia.parse_query_csv(call["stdout"])[0]
        for call in calls
        if call["phase"] == "load_100" and call["argv"][1].startswith("--query-gpu=")
    ]
    assert load[3].power_w == 691.25 and load[3].sm_clock_mhz == 1515 and load[3].temperature_c == 58


def test_sampler_stores_power_clock_and_temperature(make_host: HostFactory, tmp_path: Path) -> None:
    host = recorded_host(make_host, tmp_path, "load_100", LOAD_ROW)
    with open_transport(host) as transport:
        taking = sampler(transport)
        [sample] = taking.take()
        assert taking.take()[0]["values"] == sample["values"]
    assert sample["source"] == "accelerator"
    assert sample["values"] == {
        "gpu": 0,
        "utilization_pct": 100.0,
        "memory_used_mib": 1011,
        "memory_total_mib": 143771,
        "power_w": 691.25,
        "sm_clock_mhz": 1515.0,
        "temperature_c": 58.0,
    }
    assert taking.accelerators.fields == nvidia.SAMPLE_FIELDS
    assert taking.counters.nvml is False  # this Python has no NVML bindings: asked once, then no more


def test_driver_without_power_draw_average_is_asked_for_power_draw(
    make_host: HostFactory, tmp_path: Path
) -> None:
    host = recorded_host(make_host, tmp_path, "idle,without=power.draw.average", IDLE_ROW)
    with open_transport(host) as transport:
        taking = sampler(transport)
        [sample] = taking.take()
    assert taking.accelerators.fields == nvidia.SAMPLE_FIELDS_FALLBACK
    assert "power.draw" in taking.accelerators.fields
    assert "power.draw.average" not in taking.accelerators.fields
    assert (sample["values"]["power_w"], sample["values"]["sm_clock_mhz"]) == (77.78, 345.0)


def test_nvml_energy_counter_where_the_hosts_python_has_bindings(
    make_host: HostFactory, tmp_path: Path
) -> None:
    site = tmp_path / "site"
    site.mkdir()
    (site / "pynvml.py").write_text(PYNVML_STANDIN)
    host = recorded_host(make_host, tmp_path, "idle", IDLE_ROW, PYTHONPATH=str(site))
    with open_transport(host) as transport:
        taking = sampler(transport)
        [sample] = taking.take()
    assert sample["values"]["energy_mj"] == 987654321 and sample["values"]["power_w"] == 77.78
    assert taking.counters.nvml is True


def test_nvml_program_answers() -> None:
    assert energy.parse_nvml('{"energy_mj": {"0": 5, "1": 7}}\n') == {0: 5, 1: 7}
    assert energy.parse_nvml('{"energy_mj": {"0": -1, "x": 3, "2": true}}') == {}
    assert energy.parse_nvml('{"unavailable": "no NVML bindings"}') is None
    assert energy.parse_nvml("Traceback (most recent call last):") is None
    assert energy.parse_nvml("") is None
    finished = subprocess.run([sys.executable, "-c", energy.NVML_PROGRAM], capture_output=True, text=True)
    assert finished.returncode == 0 and energy.parse_nvml(finished.stdout) is None  # no pynvml here


def test_rapl_packages_from_a_powercap_tree(tmp_path: Path) -> None:
    def zone(name: str, energy_uj: str | None, wrap: str) -> None:
        directory = tmp_path / name
        directory.mkdir()
        if energy_uj is not None:
            (directory / "energy_uj").write_text(energy_uj + "\n")
        (directory / "max_energy_range_uj").write_text(wrap + "\n")

    zone("intel-rapl:0", "123456789", "262143328850")
    zone("intel-rapl:0:0", "5555", "262143328850")  # a subzone (core): inside package 0, left out
    zone("intel-rapl:1", "42", "65532610987")
    zone("intel-rapl:2", None, "65532610987")  # counter unreadable: left out
    script = energy.RAPL_SCRIPT.replace("/sys/class/powercap", str(tmp_path))
    finished = subprocess.run(["sh", "-c", script], capture_output=True, text=True, check=True)
    assert energy.parse_rapl(finished.stdout) == [
        {"package": 0, "energy_uj": 123456789, "max_energy_range_uj": 262143328850},
        {"package": 1, "energy_uj": 42, "max_energy_range_uj": 65532610987},
    ]
    assert energy.parse_rapl("intel-rapl:3 17\nnoise\n") == [
        {"package": 3, "energy_uj": 17, "max_energy_range_uj": None}
    ]


def test_each_sample_is_stamped_when_its_query_read_it(make_host: HostFactory, tmp_path: Path) -> None:
    """An nvidia-smi that takes 0.6 s to answer (a loaded host over SSH): its reading is stamped in the
    middle of the query, not when the round began."""
    host = recorded_host(make_host, tmp_path, "load_100", LOAD_ROW)
    bin_dir = Path(host.env["PATH"].split(":")[0])
    (bin_dir / "nvidia-smi").rename(bin_dir / "recorded-nvidia-smi")
    (bin_dir / "nvidia-smi").write_text(f'#!/bin/sh\nsleep 0.6\nexec {bin_dir}/recorded-nvidia-smi "$@"\n')
    (bin_dir / "nvidia-smi").chmod(0o755)
    with open_transport(host) as transport:
        taking = sampler(transport)
        began = taking.elapsed()
        [sample] = taking.take()
        ended = taking.elapsed()
    assert sample["values"]["power_w"] == 691.25
    assert began + 0.3 <= sample["t_s"] <= ended - 0.3 + 0.001


def test_an_nvidia_smi_that_hangs_loses_its_own_reading_not_the_engines(
    make_host: HostFactory, tmp_path: Path, sim_server: SimServerFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A wedged driver's nvidia-smi outlives its timeout every round: the engine's gauges, scraped in the
    same round, are still stored."""
    monkeypatch.setattr(sampling, "SMI_TIMEOUT_S", 1.0)
    host = recorded_host(make_host, tmp_path, "load_100", LOAD_ROW)
    bin_dir = Path(host.env["PATH"].split(":")[0])
    (bin_dir / "nvidia-smi").write_text("#!/bin/sh\nexec sleep 30\n")
    url = sim_server(model="Qwen/Qwen3-8B")
    engine = RemoteProcess("h200", "r1", "engine-0", str(tmp_path), sim_server.pid(url), "")
    replica = Replica(ReplicaPlan(0, (0,), int(url.rsplit(":", 1)[1])), engine)
    with open_transport(host) as transport, Endpoints(transport, VLLM) as endpoints:
        taking = sampler(transport, endpoints=endpoints, replicas=[replica])
        samples = taking.take()
    assert [sample["source"] for sample in samples] == ["engine"]
    assert samples[0]["values"] == {"replica": 0, "running": 0.0, "waiting": 0.0, "kv_cache_usage": 0.0}
