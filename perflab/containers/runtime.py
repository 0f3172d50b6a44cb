"""Container runtimes (Docker, Podman): the argv of every command perflab runs through them.

perflab starts an engine container detached (``run --detach``) with host networking (the engine's
port is the host's port, as for a native engine), the host's IPC namespace (the shared memory that
PyTorch's workers and NCCL use, as vLLM's and SGLang's docs advise), the accelerators passed the
way each vendor documents it, a name ``perflab-<run key>-<replica>`` (the run key is new at every launch,
so two perflabs sharing a host, or a relaunch, never reuse a name) and labels
``perflab.run=<run id>`` and ``perflab.run_key=<run key>`` by which it is found again. It overrides
the image's entrypoint with the adapter's program, so every image runs the same argv a native launch
would. Accelerators:

- NVIDIA with Docker: ``--gpus '"device=0,1"'`` (the NVIDIA Container Toolkit; the inner quotes keep
  the comma inside one CSV field, as Docker's docs show);
- NVIDIA with Podman: one CDI device per GPU, ``--device nvidia.com/gpu=0`` (``nvidia-ctk cdi generate``);
- Ascend (either runtime): ``/dev/davinci<N>`` per NPU plus ``/dev/davinci_manager``, ``/dev/devmm_svm``,
  ``/dev/hisi_hdc``, and the driver's files mounted read-only, as vLLM-Ascend's installation guide does.

Inside the container the passed devices are numbered from 0, so the visible-devices variable the
engine gets counts from 0 too (:func:`in_container_ids`).

Every command is an argv list; flags are the ones both runtimes accept (Docker CLI 28.2, Podman 4.3).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

RUNTIMES: tuple[str, ...] = ("podman", "docker")
LABEL_RUN = "perflab.run"
LABEL_RUN_KEY = "perflab.run_key"
NAME_PREFIX = "perflab-"

ASCEND_CONTROL_DEVICES: tuple[str, ...] = ("/dev/davinci_manager", "/dev/devmm_svm", "/dev/hisi_hdc")
# Host paths vLLM-Ascend's installation guide mounts into its containers (driver libraries and tools).
ASCEND_DRIVER_MOUNTS: tuple[str, ...] = (
    "/usr/local/dcmi",
    "/usr/local/bin/npu-smi",
    "/usr/local/Ascend/driver/lib64",
    "/usr/local/Ascend/driver/version.info",
    "/etc/ascend_install.info",
)


def container_name(run_key: str, replica: int) -> str:
    """``perflab-<run key>-<replica index>``, e.g. ``perflab-run-7-3fa9c1-0``."""
    return f"{NAME_PREFIX}{run_key}-{int(replica)}"


def check_runtime(runtime: str) -> str:
    if runtime not in RUNTIMES:
        raise ValueError(f"container runtime {runtime!r} is not one of {', '.join(RUNTIMES)}")
    return runtime


def choose_runtime(configured: str | None, usable: Mapping[str, str], broken: Mapping[str, str]) -> str:
    """The runtime a host uses: its configured one, else the first usable in :data:`RUNTIMES` order;
    ValueError saying what is missing."""
    if configured is not None:
        if configured in usable:
            return configured
        why = broken.get(configured, "it is not installed")
        raise ValueError(f"the host's container_runtime {configured} cannot be used: {why}")
    for runtime in RUNTIMES:
        if runtime in usable:
            return runtime
    found = "; ".join(f"{name}: {why}" for name, why in broken.items())
    raise ValueError("neither podman nor docker can be used on the host" + (f" ({found})" if found else ""))


def in_container_ids(gpu_ids: Sequence[int], *, passed: bool) -> tuple[int, ...]:
    """The ids the engine sees: 0..n-1 when the devices were passed through, else the host's own."""
    return tuple(range(len(gpu_ids))) if passed else tuple(gpu_ids)


@dataclass(frozen=True)
class Mount:
    """A host path bound into the container (same syntax for both runtimes: ``SRC:DST[:ro]``)."""

    source: str
    target: str
    read_only: bool = True

    def __post_init__(self) -> None:
        for path in (self.source, self.target):
            if not path.startswith("/") or any(ch in path for ch in ":,\n\0"):
                raise ValueError(f"mount path {path!r} must be absolute and hold no ':', ',' or newline")

    def arg(self) -> str:
        return f"{self.source}:{self.target}" + (":ro" if self.read_only else "")


def parse_mount(text: str) -> Mount:
    """``SRC[:DST][:ro|rw]`` (read-only unless ``:rw``; DST defaults to SRC) as a :class:`Mount`."""
    parts = text.split(":")
    mode = parts.pop() if len(parts) > 1 and parts[-1] in ("ro", "rw") else "ro"
    if not 1 <= len(parts) <= 2 or not all(parts):
        raise ValueError(f"mount {text!r} must be SOURCE[:TARGET][:ro|rw] with absolute paths")
    return Mount(parts[0], parts[-1], read_only=mode == "ro")


def accelerator_args(runtime: str, vendor: str | None, gpu_ids: Sequence[int]) -> list[str]:
    """The flags that pass ``gpu_ids`` of ``vendor`` (``nvidia`` or ``ascend``) into the container; none
    for ``cpu`` (a CPU host's NUMA nodes: the container shares the host's CPUs)."""
    check_runtime(runtime)
    ids = [int(gpu) for gpu in gpu_ids]
    if not ids or vendor is None or vendor == "cpu":
        return []
    if vendor == "nvidia":
        if runtime == "docker":
            return ["--gpus", '"device=' + ",".join(str(gpu) for gpu in ids) + '"']
        return [word for gpu in ids for word in ("--device", f"nvidia.com/gpu={gpu}")]
    if vendor == "ascend":
        devices = [f"/dev/davinci{gpu}" for gpu in ids] + list(ASCEND_CONTROL_DEVICES)
        mounts = [Mount(path, path).arg() for path in ASCEND_DRIVER_MOUNTS]
        return [*(w for d in devices for w in ("--device", d)), *(w for m in mounts for w in ("--volume", m))]
    raise ValueError(f"accelerator vendor {vendor!r} is not nvidia or ascend")


@dataclass(frozen=True)
class ContainerSpec:
    """Everything one engine container is started with."""

    runtime: str
    name: str
    image: str
    argv: tuple[str, ...]
    labels: Mapping[str, str] = field(default_factory=dict)
    env: Mapping[str, str] = field(default_factory=dict)
    env_file: str | None = None
    mounts: tuple[Mount, ...] = ()
    workdir: str | None = None
    vendor: str | None = None
    gpu_ids: tuple[int, ...] = ()
    host_pid: bool = False

    def __post_init__(self) -> None:
        check_runtime(self.runtime)
        if not self.argv:
            raise ValueError("a container needs the program to run")
        if self.image.startswith("-") or self.name.startswith("-"):
            raise ValueError("an image or container name must not start with '-'")


def run_argv(spec: ContainerSpec) -> list[str]:
    """``<runtime> run --detach …`` for ``spec``: the image is never pulled here (see pull)."""
    argv = [
        spec.runtime,
        "run",
        "--detach",
        "--name",
        spec.name,
        "--pull",
        "never",
        "--network",
        "host",
        "--ipc",
        "host",
    ]
    if spec.host_pid:
        argv += ["--pid", "host"]
    for key, value in spec.labels.items():
        argv += ["--label", f"{key}={value}"]
    for key, value in spec.env.items():
        argv += ["--env", f"{key}={value}"]
    if spec.env_file is not None:
        argv += ["--env-file", spec.env_file]
    for mount in spec.mounts:
        argv += ["--volume", mount.arg()]
    if spec.workdir is not None:
        argv += ["--workdir", spec.workdir]
    argv += accelerator_args(spec.runtime, spec.vendor, spec.gpu_ids)
    argv += ["--entrypoint", spec.argv[0], spec.image, *spec.argv[1:]]
    return argv


def stop_argv(runtime: str, name: str, grace_s: float) -> list[str]:
    """Stop signal, then KILL after ``grace_s`` seconds (whole seconds, at least 1)."""
    return [check_runtime(runtime), "stop", "-t", str(max(int(round(grace_s)), 1)), name]


def remove_argv(runtime: str, name: str) -> list[str]:
    return [check_runtime(runtime), "rm", "--force", name]


def state_argv(runtime: str, name: str) -> list[str]:
    """Prints ``<running true|false> <exit code>``; fails when there is no such container."""
    return [
        check_runtime(runtime),
        "container",
        "inspect",
        "--format",
        "{{.State.Running}} {{.State.ExitCode}}",
        name,
    ]


def labelled_argv(runtime: str, key: str, value: str) -> list[str]:
    """The names of every container (running or not) labelled ``key=value``, one a line."""
    return [
        check_runtime(runtime),
        "ps",
        "--all",
        "--filter",
        f"label={key}={value}",
        "--format",
        "{{.Names}}",
    ]


def image_inspect_argv(runtime: str, image: str) -> list[str]:
    """Prints ``<image id> <repo digests as JSON>``; fails when the image is not present."""
    return [check_runtime(runtime), "image", "inspect", "--format", "{{.Id}} {{json .RepoDigests}}", image]


def pull_argv(runtime: str, image: str) -> list[str]:
    return [check_runtime(runtime), "pull", image]


def oneshot_prefix(
    runtime: str, image: str, *, env: Mapping[str, str] = {}, mounts: Sequence[Mount] = ()
) -> list[str]:
    """``<runtime> run --rm`` of ``image`` with ``env`` and ``mounts``, no device and the image's
    entrypoint cleared: followed by a program and its arguments, it runs that command in the image once
    (the engine's version, its ``--help``, the preflight's check program, which arrives on standard
    input: hence ``--interactive``)."""
    argv = [check_runtime(runtime), "run", "--rm", "--interactive", "--pull", "never", "--network", "host"]
    for key, value in env.items():
        argv += ["--env", f"{key}={value}"]
    for mount in mounts:
        argv += ["--volume", mount.arg()]
    return [*argv, "--entrypoint", "", image]


# supervise RUNTIME NAME RUN_ARGS... : the detached process of one engine container. It starts the
# container, then follows its log from the runtime (into the process's log file), and exits with the
# container's exit status once it stopped; a container that cannot start exits with the runtime's status.
SUPERVISE = r"""
rt=$1; name=$2; shift 2
"$rt" run "$@" >/dev/null || exit $?
"$rt" logs --follow "$name"
code=$("$rt" wait "$name" 2>/dev/null) || exit 255
case $code in ''|*[!0-9]*) exit 255 ;; esac
exit "$code"
"""


def supervised_argv(spec: ContainerSpec) -> list[str]:
    """The argv of the detached process that runs ``spec`` (see :data:`SUPERVISE`)."""
    run = run_argv(spec)
    return ["sh", "-c", SUPERVISE, "perflab-container", spec.runtime, spec.name, *run[2:]]
