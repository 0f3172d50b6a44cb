"""Start-up failures of the simulated engines, worded as the real engines word them.

Each function returns an :class:`EngineFailure` whose ``lines`` end with the exception line the real
engine prints (``RuntimeError: Unsupported SM version for FP8 block scaling GEMM``,
``torch.OutOfMemoryError: CUDA out of memory. …``), preceded by a short traceback in that engine's
shape. The shims print the lines to stderr and exit non-zero, so log classifiers see what they would
see on a real host.
"""

from __future__ import annotations

from typing import List

GIB = 1024**3
_ENTRY = {
    "vllm": ("/usr/local/bin/vllm", "vllm/entrypoints/cli/main.py", "main"),
    "vllm-ascend": ("/usr/local/bin/vllm", "vllm/entrypoints/cli/main.py", "main"),
    "sglang": ("/usr/lib/python3.10/runpy.py", "sglang/launch_server.py", "<module>"),
    "trtllm": ("/usr/local/bin/trtllm-serve", "tensorrt_llm/commands/serve.py", "serve"),
    "mindie": (
        "/usr/local/Ascend/mindie/latest/mindie-service/bin/mindieservice_daemon",
        "mindie_llm/text_generator/adapter/generator_torch.py",
        "__init__",
    ),
}


class EngineFailure(Exception):
    """An engine that cannot start; ``lines`` is what it prints before exiting."""

    def __init__(self, lines: List[str], exit_code: int = 1) -> None:
        super().__init__(lines[-1] if lines else "engine failure")
        self.lines = lines
        self.exit_code = exit_code


def raised(engine: str, exception_line: str) -> EngineFailure:
    """A traceback ending in ``exception_line``, framed like ``engine``'s entry point."""
    script, module, function = _ENTRY.get(engine, _ENTRY["vllm"])
    return EngineFailure(
        [
            "Traceback (most recent call last):",
            f'  File "{script}", line 8, in <module>',
            "    sys.exit(main())",
            f'  File "/usr/local/lib/python3.10/dist-packages/{module}", line 73, in {function}',
            "    raise",
            exception_line,
        ]
    )


def model_not_found(engine: str, model: str) -> EngineFailure:
    if engine in ("vllm", "vllm-ascend"):
        return raised(
            engine,
            (
                f"ValueError: Invalid repository ID or local directory specified: '{model}'.\n"
                "Please verify the following requirements:\n"
                "1. Provide a valid Hugging Face repository ID.\n"
                "2. Specify a local directory that contains a recognized configuration file.\n"
                "   - For Hugging Face models: ensure the presence of a 'config.json'.\n"
                "   - For Mistral models: ensure the presence of a 'params.json'."
            ),
        )
    if engine == "mindie":
        return raised(engine, f"FileNotFoundError: model weight path {model} does not contain config.json")
    return raised(
        engine,
        (
            f"OSError: {model} is not a local folder and is not a valid model identifier listed on "
            "'https://huggingface.co/models'\nIf this is a private repository, make sure to pass a token "
            "having permission to this repo either by logging in with `hf auth login` or by passing "
            "`token=<your_token>`"
        ),
    )


def not_enough_devices(engine: str, needed: int, available: int) -> EngineFailure:
    if engine in ("vllm", "vllm-ascend"):
        kind = "GPUs" if engine == "vllm" else "NPUs"
        return raised(
            engine,
            (
                "pydantic_core._pydantic_core.ValidationError: 1 validation error for ParallelConfig\n"
                f"  Value error, World size ({needed}) is larger than the number of available {kind} "
                f"({available}) in this node. If this is intentional and you are using:\n"
                "- ray, set '--distributed-executor-backend ray'.\n"
                "- multiprocessing, set '--nnodes' appropriately."
            ),
        )
    if engine == "mindie":
        return raised(
            engine,
            (
                f"RuntimeError: npuDeviceIds needs {needed} devices but only {available} are visible "
                "(check ASCEND_RT_VISIBLE_DEVICES and worldSize)"
            ),
        )
    if engine == "trtllm":
        return raised(
            engine,
            "RuntimeError: [TensorRT-LLM][ERROR] CUDA runtime error in cudaSetDevice(device): "
            "invalid device ordinal",
        )
    return raised(
        engine,
        "torch.AcceleratorError: CUDA error: invalid device ordinal\n"
        "CUDA kernel errors might be asynchronously reported at some other API call, so the "
        "stacktrace below might be incorrect.",
    )


def fp8_unsupported(engine: str) -> EngineFailure:
    if engine == "trtllm":
        return raised(engine, "RuntimeError: Unsupported SM version for FP8 block scaling GEMM")
    return raised(
        engine,
        "ValueError: type fp8e4nv not supported in this architecture. "
        "The supported fp8 dtypes are ('fp8e4b15', 'fp8e5')",
    )


def trtllm_awq_on_sm80() -> EngineFailure:
    return raised("trtllm", "KeyError: 'weight'")


def fp8_block_not_divisible(engine: str, size: int) -> EngineFailure:
    return raised(
        engine,
        f"ValueError: The output_size of gate's and up's weight = {size} is not divisible "
        "by weight quantization block_n = 128.",
    )


def prefix_cache_on_moe(model_type: str) -> EngineFailure:
    return raised(
        "mindie",
        f"RuntimeError: prefix cache plugin is not supported for model type {model_type} "
        "(MoE); set ScheduleConfig.enablePrefixCache to false",
    )


def out_of_memory(engine: str, device: int, total: float, tried: float, in_use: float) -> EngineFailure:
    """The allocator's out-of-memory error (sizes in bytes)."""
    free = max(0.0, total - in_use)
    if engine in ("mindie", "vllm-ascend"):
        return raised(
            engine,
            (
                f"RuntimeError: NPU out of memory. Tried to allocate {tried / GIB:.2f} GiB (NPU {device}; "
                f"{total / GIB:.2f} GiB total capacity; {in_use / GIB:.2f} GiB already allocated; "
                f"{in_use / GIB:.2f} GiB current active; {free / GIB:.2f} GiB free; {in_use / GIB:.2f} GiB "
                "reserved in total by PyTorch)"
            ),
        )
    return raised(
        engine,
        (
            f"torch.OutOfMemoryError: CUDA out of memory. Tried to allocate {tried / GIB:.2f} GiB. "
            f"GPU {device} has a total capacity of {total / GIB:.2f} GiB of which "
            f"{free * 1024 / GIB:.2f} MiB is free. Including non-PyTorch memory, this process has "
            f"{in_use / GIB:.2f} GiB memory in use. "
            f"Of the allocated memory {in_use / GIB:.2f} GiB is allocated by PyTorch, and 20.00 MiB is "
            "reserved by PyTorch but unallocated. If reserved but unallocated memory is large try setting "
            "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.  See documentation for "
            "Memory Management  "
            "(https://pytorch.org/docs/stable/notes/cuda.html#environment-variables)"
        ),
    )


def no_kv_cache_memory(engine: str) -> EngineFailure:
    if engine == "sglang":
        return raised(
            engine, "RuntimeError: Not enough memory. Please try to increase --mem-fraction-static."
        )
    if engine == "trtllm":
        return raised(
            engine,
            "RuntimeError: [TensorRT-LLM][ERROR] Assertion failed: Insufficient memory for "
            "the KV cache: no blocks can be allocated",
        )
    return raised(
        engine,
        "ValueError: No available memory for the cache blocks. Try increasing "
        "`gpu_memory_utilization` when initializing the engine.",
    )


def max_len_exceeds_kv(
    engine: str, max_model_len: int, needed: float, available: float, estimated_len: int
) -> EngineFailure:
    return raised(
        engine,
        (
            f"ValueError: To serve at least one request with the models's max seq len ({max_model_len}), "
            f"({needed / GIB:.2f} GiB KV cache is needed, which is larger than the available KV cache memory "
            f"({available / GIB:.2f} GiB). Based on the available memory, the estimated maximum model length "
            f"is {estimated_len}. Try increasing `gpu_memory_utilization` or decreasing `max_model_len` when "
            "initializing the engine."
        ),
    )


def free_memory_too_low(engine: str, free: float, total: float, utilization: float) -> EngineFailure:
    return raised(
        engine,
        (
            f"ValueError: Free memory on device ({free / GIB:.2f}/{total / GIB:.2f} GiB) on startup is less "
            f"than desired GPU memory utilization ({utilization}, {total * utilization / GIB:.2f} GiB). "
            "Decrease GPU memory utilization or reduce GPU memory used by other processes."
        ),
    )


def unknown_attention_backend(engine: str, backend: str, valid: List[str]) -> EngineFailure:
    """A backend name the engine does not know (vLLM 0.32: vllm/v1/attention/backends/registry.py)."""
    if engine in ("vllm", "vllm-ascend"):
        return raised(
            engine,
            f"ValueError: Unknown attention backend: '{backend}'. Valid options are: {', '.join(valid)}",
        )
    return raised(engine, f"ValueError: Invalid attention backend: '{backend}'. Valid backends are: {valid}")


def backend_rejects_device(engine: str, backend: str, valid: List[str]) -> EngineFailure:
    """A known backend this GPU generation cannot run, worded as each engine words it."""
    if engine in ("vllm", "vllm-ascend"):
        # vLLM 0.32 vllm/platforms/cuda.py, reasons from vllm/v1/attention/backend.py
        return raised(
            engine,
            f"ValueError: Selected backend AttentionBackendEnum.{backend} is not valid for this "
            "configuration. Reason: ['compute capability not supported']",
        )
    if engine == "sglang" and backend == "fa3":
        # SGLang 0.5.23 sglang/srt/layers/attention/attention_registry.py
        return raised(
            engine,
            "AssertionError: FlashAttention v3 Backend requires SM>=80 and SM<=90. "
            "Please use `--attention-backend flashinfer`.",
        )
    return unknown_attention_backend(engine, backend, valid)


def port_in_use(engine: str, host: str, port: int) -> EngineFailure:
    if engine == "trtllm":
        return raised(
            engine, f"RuntimeError: Failed to bind socket to {host}:{port}: [Errno 98] Address already in use"
        )
    if engine in ("vllm", "vllm-ascend"):
        return raised(engine, "OSError: [Errno 98] Address already in use")
    return EngineFailure(
        [
            f"ERROR:    [Errno 98] error while attempting to bind on address ('{host}', {port}): "
            "address already in use"
        ]
    )


def layout_invalid(engine: str, message: str) -> EngineFailure:
    """A parallel layout the engine's configuration check refuses."""
    return raised(engine, f"ValueError: {message}")
