"""perflab's fallback tables of each engine's one-word knob values and flags, one module per engine.

Each module lists the releases it was read from (a :class:`~perflab.engines.vocabulary.Release` per
version, oldest first) and says where: vLLM and SGLang from their PyPI wheels' source
(``pip download --no-deps``, never installed), TensorRT-LLM from its repository's source, MindIE from its
documentation. :mod:`perflab.engines.vocabulary` decides which release judges a configuration.
"""
