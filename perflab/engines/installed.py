"""What a host's installed engine refuses in a configuration, known without reaching the host.

Used where a configuration is checked before anything runs (a study spec when it is created): the
engine version comes from the host's last probe, and the judge is the best record perflab has of that
version on that host, in this order:

1. the installed engine's own answer for this launch argv, where an earlier preflight recorded it
   (:func:`perflab.engines.preflight.recorded_answer`): each refusal in the engine's own words, naming
   the version it reported, and any typed knob an extra argument contradicts;
2. the one-word values and flags judged by :func:`perflab.engines.preflight.host_adapter`: the
   registries that version listed to an earlier check on the host, else perflab's table of that release
   (the newest release's where the version is unknown), each refusal naming the version it follows.

A configuration in a container image is judged only for other engines' spellings (the image's engine is
asked before launch).
"""

from __future__ import annotations

from perflab.engines.config import EngineConfig
from perflab.engines.errors import EngineConfigError
from perflab.engines.preflight import HelpCache, contradictions, host_adapter, recorded_answer
from perflab.engines.registry import get_adapter


def refusals(config: EngineConfig, *, host: str, version: str | None, cache: HelpCache | None) -> list[str]:
    """Why the engine ``version`` (None: unknown) installed on ``host`` would refuse ``config``; empty
    when nothing perflab knows of it does."""
    adapter = get_adapter(config.engine)
    if config.image is None and adapter.check_program is not None and cache is not None and version:
        answer = recorded_answer(cache, host, adapter, config, version)
        if answer is not None:
            who = f"{adapter.display_name} {answer.version or version}"
            return [problem.words(who) for problem in answer.problems] + contradictions(
                adapter, config, answer
            )
    judge = host_adapter(config.engine, host=host, version=version, cache=cache, image=config.image)
    try:
        judge.validate(config)
    except EngineConfigError as error:
        return [str(error)]
    return []
