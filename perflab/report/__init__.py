"""Study reports in the seeds' layout: markdown, PNG charts, CSV/JSON of every number, as a zip.

:func:`~perflab.report.from_study.study_report` builds a :class:`~perflab.report.model.Report` from a
study; :func:`~perflab.report.from_runs.build_report_from_runs` from any runs (a seed document's
imported blocks); :mod:`~perflab.report.published` is where every rendering reads a decision's
published gain (and the one definition of a change), :mod:`~perflab.report.summary` holds the Summary's
rules,
:mod:`~perflab.report.markdown` writes the document, :mod:`~perflab.report.charts` draws the charts
and :func:`~perflab.report.export.write_report` writes it all to a directory or a zip.
"""

from perflab.report.export import report_files, write_report, zip_bytes
from perflab.report.from_runs import RunLayoutError, build_report_from_runs
from perflab.report.from_study import report_of, study_report
from perflab.report.markdown import render_markdown
from perflab.report.model import Report

__all__ = [
    "Report",
    "RunLayoutError",
    "build_report_from_runs",
    "render_markdown",
    "report_files",
    "report_of",
    "study_report",
    "write_report",
    "zip_bytes",
]
