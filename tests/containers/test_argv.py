"""The runtime argv perflab builds: exact flags per runtime and vendor, checked against Docker's CLI
(its recorded ``--help`` of version 28.2.2, and the installed client itself where there is one, which
parses every flag before it needs a daemon), image references and runtime choice."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest

from perflab.containers import runtime as rt
from perflab.containers.image import IMAGE_PRESETS, check_image, presets_for
from perflab.engines import EngineConfig

DOCKER_HELP = Path(__file__).resolve().parents[1] / "data" / "docker-cli-28.2.2"
_FLAG = re.compile(r"^\s+(?:-(\w), )?--([a-z][\w-]*)", re.MULTILINE)


ENV_FILE = "/w/runs/run-7-abcdef/perflab-run-7-abcdef-1.env"


def _spec(
    runtime: str, vendor: str | None = "nvidia", gpu_ids: tuple[int, ...] = (0, 1), env_file: str = ENV_FILE
) -> rt.ContainerSpec:
    return rt.ContainerSpec(
        runtime=runtime,
        name=rt.container_name("run-7-abcdef", 1),
        image="vllm/vllm-openai:v0.11.0",
        argv=("vllm", "serve", "Qwen/Qwen3-8B", "--port", "8001"),
        labels={rt.LABEL_RUN: "7", rt.LABEL_RUN_KEY: "run-7-abcdef"},
        env={"CUDA_VISIBLE_DEVICES": "0,1"},
        env_file=env_file,
        mounts=(
            rt.Mount("/w/runs/run-7-abcdef/engine-1", "/w/runs/run-7-abcdef/engine-1", read_only=False),
            rt.Mount("/models/qwen", "/models/qwen"),
        ),
        workdir="/w/runs/run-7-abcdef/engine-1",
        vendor=vendor,
        gpu_ids=gpu_ids,
    )


def test_podman_passes_nvidia_gpus_as_cdi_devices_and_runs_the_adapter_argv() -> None:
    assert rt.run_argv(_spec("podman")) == [
        "podman",
        "run",
        "--detach",
        "--name",
        "perflab-run-7-abcdef-1",
        "--pull",
        "never",
        "--network",
        "host",
        "--ipc",
        "host",
        "--label",
        "perflab.run=7",
        "--label",
        "perflab.run_key=run-7-abcdef",
        "--env",
        "CUDA_VISIBLE_DEVICES=0,1",
        "--env-file",
        "/w/runs/run-7-abcdef/perflab-run-7-abcdef-1.env",
        "--volume",
        "/w/runs/run-7-abcdef/engine-1:/w/runs/run-7-abcdef/engine-1",
        "--volume",
        "/models/qwen:/models/qwen:ro",
        "--workdir",
        "/w/runs/run-7-abcdef/engine-1",
        "--device",
        "nvidia.com/gpu=0",
        "--device",
        "nvidia.com/gpu=1",
        "--entrypoint",
        "vllm",
        "vllm/vllm-openai:v0.11.0",
        "serve",
        "Qwen/Qwen3-8B",
        "--port",
        "8001",
    ]


def test_docker_passes_nvidia_gpus_as_one_quoted_device_list() -> None:
    command = shlex.join(rt.run_argv(_spec("docker")))
    assert command.startswith("docker run --detach --name perflab-run-7-abcdef-1 ")
    assert " --gpus '\"device=0,1\"' --entrypoint vllm vllm/vllm-openai:v0.11.0 serve " in command


def test_ascend_npus_get_their_devices_and_driver_mounts_on_either_runtime() -> None:
    for runtime in rt.RUNTIMES:
        argv = rt.run_argv(_spec(runtime, vendor="ascend", gpu_ids=(4,)))
        devices = [argv[i + 1] for i, word in enumerate(argv) if word == "--device"]
        volumes = [argv[i + 1] for i, word in enumerate(argv) if word == "--volume"]
        assert devices == ["/dev/davinci4", "/dev/davinci_manager", "/dev/devmm_svm", "/dev/hisi_hdc"]
        assert "/usr/local/Ascend/driver/lib64:/usr/local/Ascend/driver/lib64:ro" in volumes
        assert "/usr/local/bin/npu-smi:/usr/local/bin/npu-smi:ro" in volumes


def test_no_accelerator_flags_without_devices_and_ids_counted_from_zero_inside() -> None:
    assert rt.accelerator_args("docker", "nvidia", ()) == []
    assert rt.accelerator_args("podman", None, (0,)) == []
    assert rt.in_container_ids((4, 5), passed=True) == (0, 1)
    assert rt.in_container_ids((4, 5), passed=False) == (4, 5)
    with pytest.raises(ValueError, match="not nvidia or ascend"):
        rt.accelerator_args("podman", "amd", (0,))


def test_mount_paths_that_would_change_the_volume_syntax_are_refused() -> None:
    for bad in ("relative/dir", "/a:b", "/a,b", "/a\nb"):
        with pytest.raises(ValueError, match="must be absolute"):
            rt.Mount(bad, "/x")


def _docker_commands() -> list[tuple[str, list[str]]]:
    """(help file, flags) of every docker command perflab builds."""
    run = rt.run_argv(_spec("docker"))
    image_at = run.index("vllm/vllm-openai:v0.11.0")
    commands = [
        ("run", run[2:image_at]),
        ("stop", rt.stop_argv("docker", "c", 15)[2:-1]),
        ("rm", rt.remove_argv("docker", "c")[2:-1]),
        ("container-inspect", rt.state_argv("docker", "c")[3:-1]),
        ("ps", rt.labelled_argv("docker", rt.LABEL_RUN_KEY, "k")[2:]),
        ("image-inspect", rt.image_inspect_argv("docker", "img")[3:-1]),
        ("logs", ["--follow"]),
    ]
    return [(name, [word for word in words if word.startswith("-")]) for name, words in commands]


def test_every_docker_flag_is_one_docker_28_documents() -> None:
    assert (DOCKER_HELP / "VERSION").read_text().startswith("Docker version 28.2.2")
    for name, flags in _docker_commands():
        documented = set()
        for short, long in _FLAG.findall((DOCKER_HELP / f"{name}.txt").read_text()):
            documented |= {f"--{long}", *([f"-{short}"] if short else [])}
        assert set(flags) <= documented, (name, set(flags) - documented)


@pytest.mark.skipif(
    shutil.which("docker") is None, reason="no docker client here (the recorded help is checked)"
)
def test_the_docker_client_accepts_every_command_up_to_the_missing_daemon(tmp_path: Path) -> None:
    env = {**os.environ, "DOCKER_HOST": f"unix://{tmp_path}/no-daemon.sock", "DOCKER_CONFIG": str(tmp_path)}
    # The client reads the env file itself (so it must be on the host the client runs on).
    env_file = tmp_path / "secrets.env"
    env_file.write_text("HF_TOKEN=x\n")
    argvs = [
        rt.run_argv(_spec("docker", env_file=str(env_file))),
        rt.run_argv(_spec("docker", vendor="ascend", gpu_ids=(0, 1), env_file=str(env_file))),
        rt.stop_argv("docker", "c", 15),
        rt.remove_argv("docker", "c"),
        rt.state_argv("docker", "c"),
        rt.labelled_argv("docker", rt.LABEL_RUN_KEY, "k"),
        rt.image_inspect_argv("docker", "img"),
        rt.pull_argv("docker", "vllm/vllm-openai:v0.11.0"),
    ]
    # Past flag parsing, the client needs the daemon: "Cannot connect to the Docker daemon at …", or for
    # `run` (which asks the daemon's OS to check platform options) "unknown server OS".
    reached_daemon = re.compile(r"Cannot connect to the Docker daemon|unknown server OS")
    for argv in argvs:
        done = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=30)
        assert done.returncode != 0 and reached_daemon.search(done.stderr), (argv, done.stderr)
    broken = subprocess.run(
        ["docker", "run", "--gpus", '"device=0,1', "img"], capture_output=True, text=True, env=env, timeout=30
    )
    assert 'invalid argument "\\"device=0,1" for "--gpus" flag' in broken.stderr


def test_image_references_follow_the_registry_grammar() -> None:
    for good in (
        "vllm/vllm-openai:v0.11.0",
        "nvcr.io/nvidia/tensorrt-llm/release:1.0.0",
        "127.0.0.1:5000/perflab/python3",
        "localhost/x@sha256:" + "a" * 64,
        "lmsysorg/sglang",
    ):
        assert check_image(f"  {good} ") == good
    for bad, why in (
        ("-v", "not an image reference"),
        ("Vllm/X:1", "not an image reference"),
        ("a b", "not an image reference"),
        ("x:" + "a" * 129, "not an image reference"),
        ("", "must not be empty"),
        ("x/" + "a" * 300, "longer than 255"),
        ("x:1\n--privileged", "not an image reference"),
    ):
        with pytest.raises(ValueError, match=why):
            check_image(bad)
    with pytest.raises(ValueError, match="not an image reference"):
        EngineConfig(engine="vllm", model="m", image="--privileged")


def test_presets_name_every_engine_and_valid_references() -> None:
    assert {preset.engine for preset in IMAGE_PRESETS} == {
        "vllm",
        "sglang",
        "trtllm",
        "vllm-ascend",
        "mindie",
    }
    assert all(check_image(preset.reference) == preset.reference for preset in IMAGE_PRESETS)
    assert [preset.repository for preset in presets_for("vllm-ascend")] == ["quay.io/ascend/vllm-ascend"]


def test_the_runtime_is_the_configured_one_else_the_first_usable() -> None:
    usable = {"docker": "28.2.2", "podman": "4.3.1"}
    assert rt.choose_runtime(None, usable, {}) == "podman"
    assert rt.choose_runtime("docker", usable, {}) == "docker"
    broken = {"docker": "Cannot connect to the Docker daemon at unix:///var/run/docker.sock."}
    with pytest.raises(ValueError, match="container_runtime docker cannot be used: Cannot connect"):
        rt.choose_runtime("docker", {"podman": "4.3.1"}, broken)
    with pytest.raises(ValueError, match=r"neither podman nor docker .*\(docker: Cannot connect"):
        rt.choose_runtime(None, {}, broken)


def test_host_mounts_are_read_only_unless_rw() -> None:
    assert rt.parse_mount("/data/models") == rt.Mount("/data/models", "/data/models")
    assert rt.parse_mount("/c:/root/.cache/vllm:rw") == rt.Mount("/c", "/root/.cache/vllm", read_only=False)
    assert rt.parse_mount("/a:/b:ro").arg() == "/a:/b:ro"
    for bad in ("/a:/b:/c", "/a::ro", ":rw"):
        with pytest.raises(ValueError, match="SOURCE"):
            rt.parse_mount(bad)
