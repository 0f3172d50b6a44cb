"""Study reports in the seeds' layout: markdown, PNG charts, CSV/JSON of every number, as a zip.

:func:`~perflab.report.from_study.study_report` builds a :class:`~perflab.report.model.Report` from a
study; :func:`~perflab.report.from_runs.build_report_from_runs` from any runs (a seed document's
imported blocks); :mod:`~perflab.report.published` is where every rendering reads a decision's
published gain (and the one definition of a change), :mod:`~perflab.report.summary` holds the Summary's
rules,
:mod:`~perflab.report.markdown` writes the document, :mod:`~perflab.report.charts` draws the charts
and :func:`~perflab.report.export.write_report` writes it all to a directory or a zip.
"""

from perflab.lazy_exports import lazy_exports

__getattr__ = lazy_exports(
    __name__,
    {
        "perflab.report.export": ("report_files", "write_report", "zip_bytes"),
        "perflab.report.from_runs": ("RunLayoutError", "build_report_from_runs"),
        "perflab.report.from_study": ("report_of", "study_report"),
        "perflab.report.markdown": ("render_markdown",),
        "perflab.report.model": ("Report",),
    },
)
