"""Read models and formatting for the pages: everything a page shows, computed without streamlit.

Pages call these functions (and :mod:`db.crud`) and only draw what they return: ``run_list`` (the
Runs page), ``run_detail``/``cards``/``run_export`` (the Run page), ``compare``/``pareto``/
``distributions`` (the Compare page), ``launch``/``commands`` (the Launch page), ``datasets`` (the
Datasets page), ``hosts`` (the Hosts page) and ``status`` (the sidebar). ``metrics`` names every
result metric with its unit and which direction is better; ``formatting`` writes numbers the way the
seeds do; ``urlstate`` validates query parameters.
"""
