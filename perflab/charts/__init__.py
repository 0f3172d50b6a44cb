"""Altair charts of the pages: the run page (:mod:`~perflab.charts.run`), the compare page
(:mod:`~perflab.charts.compare`) and the Datasets page (:mod:`~perflab.charts.datasets`).

Charts take the tables of :mod:`perflab.views` and return Altair charts with tooltips and, where runs
or series are overlaid, a legend that selects (click a legend entry to highlight it).
:func:`perflab.chart_png.chart_png` renders any of them to PNG for download.
"""
