"""Pull and container-runtime failures classified from the runtimes' own words: lines Podman 4.3.1
printed on these machines and the messages of Docker's daemon and CLI (moby sources, CLI 28.2.2)."""

from __future__ import annotations

import pytest

from perflab.containers.failures import classify_container_failure, classify_pull_failure
from perflab.engines import get_adapter
from perflab.runner.logs import classify_log

IMAGE = "vllm/vllm-openai:v0.11.0"


@pytest.mark.parametrize(
    ("output", "failure_class"),
    [
        # Podman 4.3.1, recorded against a local registry and with no registry reachable.
        (
            "Trying to pull 127.0.0.1:5055/perflab/nosuch:1...\nError: initializing source "
            "docker://127.0.0.1:5055/perflab/nosuch:1: reading manifest 1 in 127.0.0.1:5055/perflab/nosuch: "
            "manifest unknown: manifest unknown",
            "image_not_found",
        ),
        (
            "Error: initializing source docker://127.0.0.1:5056/perflab/python:dev: reading manifest dev in "
            "127.0.0.1:5056/perflab/python: unauthorized: authentication required",
            "image_unauthorized",
        ),
        (
            "Error: initializing source docker://localhost/doesnotexist:latest: pinging container registry "
            'localhost: Get "https://localhost/v2/": dial tcp 127.0.0.1:443: connect: connection refused',
            "registry_unreachable",
        ),
        # Docker: distribution/errors.go, the daemon's not-found and a full disk while extracting layers.
        (
            "Error response from daemon: pull access denied for perflab/nothing, repository does not exist "
            "or may require 'docker login': denied: requested access to the resource is denied",
            "image_not_found",
        ),
        (
            "Error response from daemon: manifest for vllm/vllm-openai:v9 not found: manifest unknown: "
            "manifest unknown",
            "image_not_found",
        ),
        (
            "failed to register layer: write /usr/lib/x86_64-linux-gnu/libcublasLt.so.12: no space left on "
            "device",
            "image_no_space",
        ),
        (
            "Cannot connect to the Docker daemon at unix:///var/run/docker.sock. "
            "Is the docker daemon running?",
            "container_runtime_missing",
        ),
        ("error pulling image configuration: download failed after attempts=6: EOF", "image_pull_failed"),
    ],
)
def test_pull_output_gets_its_class(output: str, failure_class: str) -> None:
    info = classify_pull_failure(output, IMAGE)
    assert info.failure_class == failure_class
    assert info.message.startswith(f"pulling {IMAGE}: ")
    assert info.evidence_line in output.splitlines()


@pytest.mark.parametrize(
    ("log", "failure_class"),
    [
        # Podman 4.3.1 recorded: a CDI device that no spec defines.
        (
            "Error: setting up CDI devices: unresolvable CDI devices nvidia.com/gpu=0",
            "container_gpu_unavailable",
        ),
        # moby daemon/errors.go (incompatibleDeviceRequest) as the CLI prints it.
        (
            'docker: Error response from daemon: could not select device driver "" with capabilities: '
            "[[gpu]].",
            "container_gpu_unavailable",
        ),
        (
            "docker: Error response from daemon: failed to create task for container: failed to create shim "
            "task: OCI runtime create failed: runc create failed: unable to start container process: error "
            "during container init: error running hook #0: error running hook: exit status 1, stdout: , "
            "stderr: nvidia-container-cli: initialization error: nvml error: driver not loaded: unknown",
            "container_gpu_unavailable",
        ),
        ("Error: localhost/nope:1: image not known", "image_not_found"),
    ],
)
def test_a_container_that_cannot_start_is_classified_before_the_engine_log(
    log: str, failure_class: str
) -> None:
    info = classify_log(get_adapter("vllm"), log)
    assert info is not None and info.failure_class == failure_class
    assert info.message.startswith("vLLM: ")


def test_engine_logs_keep_their_own_classes() -> None:
    log = "\n".join(
        [
            "INFO 11-24 00:10:00 [api_server.py:1] writing cache",
            "OSError: [Errno 28] No space left on device",
            "ConnectionRefusedError: [Errno 111] Connection refused",
            "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB",
        ]
    )
    assert classify_container_failure(log) is None
    info = classify_log(get_adapter("vllm"), log)
    assert info is not None and info.failure_class == "oom"
