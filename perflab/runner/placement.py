"""Which accelerators of the host a run gets, and locking them so no other run shares one.

:func:`choose_gpus` is pure: from the host's accelerators (probe), the GPUs other runs have locked and
the config, it picks the config's ``gpu_ids`` or the first free ones. A GPU another perflab run holds
makes the run wait (:class:`GpusBusy`), and so does one a run of this database released moments ago
whose memory is still in use (``draining``: its engine's memory is being freed, it is not someone
else's). A GPU that is missing, or whose memory is taken by a process perflab did not start, fails the
run with ``gpus_unavailable`` naming the devices.

On a CPU host (no nvidia-smi or npu-smi) the devices are its NUMA nodes (:mod:`perflab.probe.cpu`) and
are locked the same way: a second run waits for a free node. :func:`check_cpu_engine` fails a run whose
engine has no CPU backend, or whose installed build is not the CPU one.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from perflab.engines import EngineAdapter, EngineConfig
from perflab.probe import Accelerator, ProbeResult
from perflab.probe.cpu import is_cpu_host
from perflab.runner.errors import GpusBusy, RunFailed

# A device counts as used by someone else above this share of its memory (idle NPUs hold ~3 GiB).
FOREIGN_MEMORY_SHARE = 0.10
FOREIGN_MEMORY_FALLBACK_MIB = 2048


def _ids(values: Sequence[int]) -> str:
    return ", ".join(str(value) for value in values)


def memory_in_use(accelerators: Sequence[Accelerator], locked: Mapping[int, int]) -> dict[int, int]:
    """``{index: MiB used}`` of devices no perflab run holds whose memory is in use."""
    busy = {}
    for acc in accelerators:
        if acc.index in locked or acc.memory_used_mib is None:
            continue
        limit = (
            acc.memory_total_mib * FOREIGN_MEMORY_SHARE
            if acc.memory_total_mib
            else FOREIGN_MEMORY_FALLBACK_MIB
        )
        if acc.memory_used_mib > limit:
            busy[acc.index] = acc.memory_used_mib
    return busy


def foreign_busy(
    accelerators: Sequence[Accelerator], locked: Mapping[int, int], draining: Mapping[int, int] | None = None
) -> dict[int, int]:
    """``{index: MiB used}`` of devices whose memory is in use though no perflab run holds them nor
    released them moments ago (``draining``: GPU index → the run of this database that released it)."""
    ours = draining or {}
    return {index: used for index, used in memory_in_use(accelerators, locked).items() if index not in ours}


def _busy_message(host_name: str, busy: Mapping[int, int]) -> str:
    details = ", ".join(f"GPU {index}: {used} MiB" for index, used in sorted(busy.items()))
    return (
        f"accelerators of host '{host_name}' are in use by processes perflab did not start ({details}); "
        "stop them or pick other gpu_ids"
    )


def check_cpu_engine(adapter: EngineAdapter, probe: ProbeResult, *, host_name: str) -> bool:
    """True when the host is a CPU host whose engine can run there; False for an accelerator host.

    Raises :class:`RunFailed` (``gpus_unavailable``) for a CPU host the engine cannot use."""
    if not is_cpu_host(probe.accelerators):
        return False
    problem = adapter.cpu_problem(probe.engines.get(adapter.name))
    if problem is not None:
        raise RunFailed(
            "gpus_unavailable",
            f"host '{host_name}' has no GPU or NPU (neither nvidia-smi nor npu-smi is installed), only its "
            f"CPU, and {problem}",
        )
    return True


def why_no_accelerators(probe: ProbeResult) -> str | None:
    """The probe's own sentences about nvidia-smi / npu-smi (a driver it cannot reach, a hung tool),
    None when the tools answered."""
    reasons = [problem.message for problem in probe.problems if problem.tool in ("nvidia-smi", "npu-smi")]
    return " ".join(reasons) or None


def _draining_message(draining: Mapping[int, int], still_used: Sequence[int]) -> str:
    runs = sorted({draining[index] for index in still_used})
    return (
        f"GPUs {_ids(still_used)} still free the memory of run(s) {_ids(runs)}, which released them "
        "moments ago"
    )


def choose_gpus(
    config: EngineConfig,
    accelerators: Sequence[Accelerator],
    locked: Mapping[int, int],
    *,
    host_name: str,
    draining: Mapping[int, int] | None = None,
    why_none: str | None = None,
) -> tuple[int, ...]:
    """The GPU ids the run should lock. ``locked`` maps GPU index → the run holding it, ``draining``
    GPU index → the run of this database that released it moments ago; ``why_none`` is the probe's
    reason when it found no accelerator (:func:`why_no_accelerators`).

    Raises :class:`GpusBusy` when other runs hold what is needed (or still free its memory),
    :class:`RunFailed` when the host cannot give it at all.
    """
    draining = {index: run for index, run in (draining or {}).items() if index not in locked}
    indices = [acc.index for acc in accelerators]
    if not indices:
        reason = f": {why_none}" if why_none else " (nvidia-smi / npu-smi found none)"
        raise RunFailed("gpus_unavailable", f"host '{host_name}' lists no accelerators{reason}")
    needed = config.gpus_needed
    in_use = memory_in_use(accelerators, locked)
    busy = foreign_busy(accelerators, locked, draining)
    still_draining = sorted(index for index in in_use if index in draining)
    if config.gpu_ids is not None:
        missing = [gpu for gpu in config.gpu_ids if gpu not in indices]
        if missing:
            raise RunFailed(
                "gpus_unavailable",
                f"gpu_ids {_ids(missing)} do not exist on host '{host_name}' (it has {_ids(indices)})",
            )
        held = sorted({locked[gpu] for gpu in config.gpu_ids if gpu in locked})
        if held:
            raise GpusBusy(f"gpu_ids {_ids(config.gpu_ids)} are held by run(s) {_ids(held)}")
        wanted_busy = {gpu: busy[gpu] for gpu in config.gpu_ids if gpu in busy}
        if wanted_busy:
            raise RunFailed("gpus_unavailable", _busy_message(host_name, wanted_busy))
        wanted_draining = [gpu for gpu in config.gpu_ids if gpu in still_draining]
        if wanted_draining:
            raise GpusBusy(_draining_message(draining, wanted_draining))
        return tuple(config.gpu_ids)
    if needed > len(indices):
        raise RunFailed(
            "gpus_unavailable",
            f"TP{config.tp}×DP{config.dp} × {config.replicas} replica(s) needs {needed} GPUs; "
            f"host '{host_name}' has {len(indices)}",
        )
    free = [index for index in indices if index not in locked and index not in in_use]
    if len(free) >= needed:
        return tuple(free[:needed])
    if len(indices) - len(busy) >= needed:
        held = sorted(set(locked.values()))
        reasons = [f"run(s) {_ids(held)} hold {len(locked)} of {len(indices)}"] if locked else []
        if still_draining:
            reasons.append(_draining_message(draining, still_draining))
        raise GpusBusy(f"{needed} free GPUs needed; {'; '.join(reasons)}")
    raise RunFailed("gpus_unavailable", _busy_message(host_name, busy))
