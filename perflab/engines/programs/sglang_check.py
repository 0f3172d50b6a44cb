"""Sent on standard input to the Python that runs ``python3 -m sglang.launch_server`` on the host (or in
the image); never imported by perflab.

Usage: ``<that python> - <words after "-m sglang.launch_server">``, after :mod:`argv_check` (which the
text sent carries). It builds SGLang's own server-argument parser as ``prepare_server_args`` does
(``argparse`` plus ``ServerArgs.add_cli_args``), parses the words with it, checks the speculative
algorithm the way SGLang resolves it (``SpeculativeAlgorithm.from_string``), and prints the answer
:func:`argv_check.answer` describes. Its ``vocabulary`` holds the parser's own choices of attention
backend, KV-cache dtype and quantization, and the speculative algorithms SGLang defines (its enum, the
NEXTN alias, plug-ins registered); ``version`` is that of ``sglang``. Runs on Python 3.9+.
"""

import functools
import sys

from argv_check import answer, distribution_version, first_error, report, run

KNOB_DESTS = (
    "tp_size", "dp_size", "ep_size", "quantization", "attention_backend", "chunked_prefill_size",
    "max_running_requests", "disable_radix_cache", "kv_cache_dtype", "context_length",
    "mem_fraction_static", "reasoning_parser", "served_model_name",
)  # fmt: skip
MODEL_DESTS = ("model_path",)
CHOICE_DESTS = ("attention_backend", "kv_cache_dtype", "quantization")


def version():
    return distribution_version("sglang")[1]


@functools.cache
def build_parser():
    """SGLang's parser, built once (the answer and the registries both read it)."""
    import argparse

    from sglang.srt.server_args import ServerArgs

    parser = argparse.ArgumentParser(prog="sglang serve")
    ServerArgs.add_cli_args(parser)
    return parser


def check_values(namespace):
    """The speculative algorithm, which SGLang's parser takes as any string, in SGLang's own words."""
    algorithm = getattr(namespace, "speculative_algorithm", None)
    if algorithm is None:
        return []
    try:
        from sglang.srt.speculative.spec_info import SpeculativeAlgorithm

        SpeculativeAlgorithm.from_string(algorithm)
    except ImportError:
        return []
    except Exception as exc:
        return [{"flag": "--speculative-algorithm", "value": algorithm, "message": first_error(exc)}]
    return []


def registries():
    """The choices SGLang's parser lists, and its speculative algorithms (absent where moved)."""
    found = {}
    for action in build_parser()._actions:
        if action.dest in CHOICE_DESTS and action.choices:
            found[action.dest] = [str(choice) for choice in action.choices]
    try:
        from sglang.srt.speculative import spec_registry
        from sglang.srt.speculative.spec_info import SpeculativeAlgorithm

        names = [member.name for member in SpeculativeAlgorithm if member.name != "NONE"]
        for extra in (*sorted(getattr(spec_registry, "_RESERVED_ALIASES", ())), *spec_registry._REGISTRY):
            if extra not in names:
                names.append(extra)
        found["speculative_config"] = names
    except Exception:
        pass
    return found


def main(words):
    try:
        parser = build_parser()
    except Exception as exc:
        report({"import_error": f"{type(exc).__name__}: {exc}", "version": version()})
    answer(parser, parser, words, (), sys.modules[__name__])


if __name__ == "__main__":
    run(main)
