"""Importing existing benchmark results as runs with source ``imported``.

One parser per format: :mod:`~perflab.importers.vllm_json` (``vllm bench serve --save-result``),
:mod:`~perflab.importers.vllm_text` (the printed "Serving Benchmark Result" block, with the serving
command above it), :mod:`~perflab.importers.guidellm` (guidellm JSON reports). :func:`parse_content`
detects the format from the content; :func:`import_files` / :func:`import_content` store the results.
"""

from perflab.importers.detect import parse_content
from perflab.importers.model import ImportedResult, ImportFileError
from perflab.importers.store import (
    AlreadyImported,
    ImportFailed,
    ParsedFile,
    import_content,
    import_files,
    read_file,
    run_record,
    store_parsed,
)

__all__ = [
    "AlreadyImported",
    "ImportFailed",
    "ImportFileError",
    "ImportedResult",
    "ParsedFile",
    "import_content",
    "import_files",
    "parse_content",
    "read_file",
    "run_record",
    "store_parsed",
]
