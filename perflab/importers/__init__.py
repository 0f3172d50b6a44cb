"""Importing existing benchmark results as runs with source ``imported``.

One parser per format: :mod:`~perflab.importers.vllm_json` (``vllm bench serve --save-result``),
:mod:`~perflab.importers.vllm_text` (the printed "Serving Benchmark Result" block, with the serving
command above it), :mod:`~perflab.importers.guidellm` (guidellm JSON reports). :func:`parse_content`
detects the format from the content; :func:`import_files` / :func:`import_content` store the results.
"""

from perflab.lazy_exports import lazy_exports

__getattr__ = lazy_exports(
    __name__,
    {
        "perflab.importers.detect": ("parse_content",),
        "perflab.importers.model": ("ImportedResult", "ImportFileError"),
        "perflab.importers.store": (
            "AlreadyImported",
            "ImportFailed",
            "ParsedFile",
            "import_content",
            "import_files",
            "read_file",
            "run_record",
            "store_parsed",
        ),
    },
)
