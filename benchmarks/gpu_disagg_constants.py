"""On a real GPU: the figures behind the simulator's disaggregation constants (for the ``device`` tool).

Needs one NVIDIA GPU with PyTorch (no vLLM, no network); nothing in perflab depends on it. It measures
what :mod:`perflab.sim.disagg` and :mod:`perflab.sim.perfmodel` assume:

1. KV-transfer-sized copies: a Qwen3-32B prompt's KV cache is 256 KiB per token in bf16 (64 layers ×
   8 KV heads × 128 × 2 × 2 bytes); copies of 1k, 4k and 16k tokens' worth device → host (pinned),
   host → device and device → device, in GB/s — the simulator moves KV at 80 % of the accelerator's
   link figure (450 GB/s NVLink on H200) between GPUs; one GPU shows the copy engines' side of it;
2. a prefill/decode step ratio: a bf16 matmul of a 5120-wide layer (Qwen3-32B's hidden size) at 4096
   tokens (prefill-like, compute bound) against 64 tokens (decode-like, bandwidth bound), and the
   achieved TFLOP/s and GB/s against the simulator's 45 % MFU / 75 % MBU.

Run: ``python3 benchmarks/gpu_disagg_constants.py [--smoke]`` (``--smoke`` runs on the CPU with tiny
sizes when no GPU is there, so a test can check the script itself). Prints one line per figure and a
JSON object last.
"""

from __future__ import annotations

import argparse
import json
import time

KV_BYTES_PER_TOKEN = 64 * 8 * 128 * 2 * 2  # Qwen3-32B, bf16
HIDDEN = 5120


def timed(torch, fn, device: str, repeats: int) -> float:  # noqa: ANN001
    fn()
    if device == "cuda":
        torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(repeats):
        fn()
    if device == "cuda":
        torch.cuda.synchronize()
    return (time.perf_counter() - start) / repeats


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--smoke", action="store_true", help="tiny sizes; the CPU when there is no GPU")
    args = parser.parse_args()
    import torch

    device = "cuda" if torch.cuda.is_available() else "cpu"
    if device == "cpu" and not args.smoke:
        print("no GPU: run with --smoke to check the script on the CPU")
        return 1
    scale = 64 if args.smoke else 1
    repeats = 2 if args.smoke else 20
    figures: dict[str, float] = {}
    for tokens in (1024, 4096, 16384):
        size = tokens * KV_BYTES_PER_TOKEN // scale
        source = torch.empty(size, dtype=torch.uint8, device=device)
        host = torch.empty(size, dtype=torch.uint8, pin_memory=device == "cuda")
        other = torch.empty_like(source)
        for name, fn in (
            ("d2h", lambda host=host, source=source: host.copy_(source, non_blocking=True)),
            ("h2d", lambda host=host, source=source: source.copy_(host, non_blocking=True)),
            ("d2d", lambda other=other, source=source: other.copy_(source)),
        ):
            seconds = timed(torch, fn, device, repeats)
            figures[f"{name}_{tokens}_gbs"] = size / seconds / 1e9
            print(f"{name} {tokens} tokens of KV ({size / 2**20:.0f} MiB): {size / seconds / 1e9:.1f} GB/s")
    dtype = torch.bfloat16 if device == "cuda" else torch.float32
    weight = torch.randn(
        HIDDEN // (8 if args.smoke else 1), HIDDEN * 5 // (8 if args.smoke else 1), device=device, dtype=dtype
    )
    step: dict[int, float] = {}
    for tokens in (4096, 64):
        activations = torch.randn(
            tokens // (8 if args.smoke else 1), weight.shape[0], device=device, dtype=dtype
        )
        seconds = timed(torch, lambda activations=activations: activations @ weight, device, repeats)
        step[tokens] = seconds
        flops = 2 * activations.shape[0] * weight.shape[0] * weight.shape[1]
        moved = weight.numel() * weight.element_size()
        print(
            f"{tokens}-token step: {seconds * 1e6:.0f} µs, {flops / seconds / 1e12:.1f} TFLOP/s, "
            f"{moved / seconds / 1e9:.0f} GB/s of weights"
        )
        figures[f"step_{tokens}_us"] = seconds * 1e6
    figures["prefill_decode_step_ratio"] = step[4096] / step[64]
    print(f"prefill/decode step ratio (4096 vs 64 tokens): {figures['prefill_decode_step_ratio']:.1f}")
    print(json.dumps({"device": torch.cuda.get_device_name(0) if device == "cuda" else "cpu", **figures}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
