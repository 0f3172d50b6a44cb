"""Optimization studies: the seeds' tuning method, automated.

A study (:mod:`~perflab.study.spec`) names a model, hosts, a baseline configuration, a tuning profile,
ordered stages (listed candidates or a search) and validation profiles.
:func:`~perflab.study.study_plan.plan_study` decides the stages from what has been measured (pure),
asking each stage's strategy (:mod:`~perflab.study.strategy`: the staged plan or the search);
:func:`~perflab.study.coordinator.advance` makes the
database follow the plan (one run per distinct configuration, decisions recorded, resumable), and a
worker calls it when the study is due (:mod:`perflab.worker.studies`). Load curves and the
objective live in :mod:`~perflab.study.loadcurve` and :mod:`~perflab.study.objective`;
``python -m perflab study …`` is :mod:`~perflab.study.cli`. docs/studies.md describes it all.
"""

from perflab.lazy_exports import lazy_exports

__getattr__ = lazy_exports(
    __name__,
    {
        "perflab.study.coordinator": (
            "advance",
            "advance_studies",
            "cancel_study",
            "create_study",
            "measure_missing",
            "pause_study",
            "resume_study",
        ),
        "perflab.study.progress": ("load_progress",),
        "perflab.study.spec": ("StudySpec", "StudySpecError", "load_spec", "parse_spec"),
        "perflab.study.study_plan": ("plan_study",),
        "perflab.study.types": ("Measurement", "Rules", "StudyPlan"),
    },
)
