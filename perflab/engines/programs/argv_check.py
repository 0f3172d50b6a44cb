"""What every check program (``vllm_check.py``, ``sglang_check.py``) imports: the text sent on standard
input to the engine's own Python carries this module along (:func:`perflab.engines.asking.program_text`);
perflab itself never imports it.

It reads an argv with the engine's own ``argparse`` parser and names every flag the parser refuses,
and :func:`answer` prints the one JSON object perflab reads (:mod:`perflab.engines.asking`):

- ``version``: the engine's distribution version (``importlib.metadata``);
- ``problems``: ``{"flag", "value", "message"}`` each, ``message`` in the engine's own words;
- ``effective``: the parsed values (argparse: the last flag wins) of the dests perflab types;
- ``options``: each of those dests' option strings (``--disable-prefix-caching`` …);
- ``vocabulary``: the engine's registries of knob values, by perflab knob.

Where the engine cannot be imported it prints ``{"import_error": "..."}`` instead. Runs on Python 3.9+.
"""

import contextlib
import io
import json
import sys

MAX_ROUNDS = 32


def report(payload):
    sys.__stdout__.write("\n" + json.dumps(payload, default=str) + "\n")
    sys.__stdout__.flush()
    sys.exit(0)


def distribution_version(*names):
    from importlib import metadata

    for name in names:
        try:
            return name, metadata.version(name)
        except Exception:
            continue
    return None, None


def literal_values(kind):
    """The strings of a (nested) ``Literal``."""
    import typing

    values = []
    for arg in typing.get_args(kind):
        if isinstance(arg, str):
            values.append(arg)
        else:
            values.extend(literal_values(arg))
    return values


def parse(top, actions, words, lead=()):
    """``(namespace or None, [problem])``: ``top`` over ``lead`` + ``words`` (``actions``: the parser
    whose options the words are); a refused flag is reported and dropped (with its value) and the rest
    parsed again, so every refused flag is named."""
    problems = []
    words = list(words)
    for _ in range(MAX_ROUNDS):
        errors = io.StringIO()
        try:
            with contextlib.redirect_stderr(errors):
                return top.parse_args([*lead, *words]), problems
        except SystemExit:
            lines = [line for line in errors.getvalue().splitlines() if line.strip()]
            message = lines[-1].split(": error: ", 1)[-1] if lines else "refused"
        if message.startswith("unrecognized arguments:"):
            unknown = message.split(":", 1)[1].split()
            for index, word in enumerate(unknown):
                if word.startswith("-"):
                    name, _, inline = word.partition("=")
                    after = unknown[index + 1] if index + 1 < len(unknown) else ""
                    value = inline or (after if after and not after.startswith("-") else None)
                    problems.append({"flag": name, "value": value, "message": message})
            words = drop_unrecognized(words, unknown)
            continue
        flag, words, value = drop_argument(actions, words, message)
        problems.append({"flag": flag, "value": value, "message": message})
        if flag is None:
            return None, problems
    return None, problems


def drop_unrecognized(words, unknown):
    left = list(words)
    for word in unknown:
        if word in left:
            left.remove(word)
    return left


def drop_argument(actions, words, message):
    """The flag an ``argument --x/-y: …`` error names, ``words`` without it and its value, and the
    value its last occurrence carried."""
    if not message.startswith("argument "):
        return None, words, None
    names = message[len("argument ") :].split(":", 1)[0].split("/")
    action = next((actions._option_string_actions.get(name) for name in names if name.startswith("-")), None)
    if action is None:
        return None, words, None
    spellings = set(action.option_strings)
    kept = []
    value = None
    index = 0
    while index < len(words):
        word = words[index]
        index += 1
        name, has_inline, inline = word.partition("=")
        name = name.replace("_", "-") if name.startswith("--") else name
        if name in spellings or any(
            name.startswith("--") and len(name) > 2 and spelling.startswith(name) for spelling in spellings
        ):
            if has_inline:
                value = inline
            elif action.nargs != 0 and index < len(words):
                value = words[index]
                index += 1
            continue
        kept.append(word)
    flag = next((name for name in names if name.startswith("--")), names[0])
    return flag, kept, value


def first_error(exc):
    errors = getattr(exc, "errors", None)
    if callable(errors):
        try:
            return str(errors()[0].get("msg"))
        except Exception:
            pass
    return str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__


def plain(value):
    name = getattr(value, "name", None)
    return name if name is not None and not isinstance(value, (str, int, float, bool)) else value


def answer(top, actions, words, lead, engine):
    """Print the answer for ``words``; ``engine`` (the check program's module) gives ``KNOB_DESTS``,
    ``MODEL_DESTS``, ``version()``, ``check_values(namespace)`` and ``registries()``."""
    namespace, problems = parse(top, actions, words, lead)
    effective = None
    options = {}
    for action in actions._actions:
        if action.dest in engine.KNOB_DESTS:
            options.setdefault(action.dest, []).extend(action.option_strings)
    if namespace is not None:
        problems.extend(engine.check_values(namespace))
        effective = {dest: plain(getattr(namespace, dest, None)) for dest in engine.KNOB_DESTS}
        effective["model"] = next(
            (getattr(namespace, dest) for dest in engine.MODEL_DESTS if getattr(namespace, dest, None)), None
        )
    report(
        {
            "version": engine.version(),
            "problems": problems,
            "effective": effective,
            "options": options,
            "vocabulary": engine.registries(),
        }
    )


def run(main):
    """``main(words)`` with the engine's chatter on standard error; any failure is an import error."""
    with contextlib.redirect_stdout(sys.stderr):
        try:
            main(sys.argv[1:])
        except SystemExit:
            raise
        except Exception as exc:
            report({"import_error": f"{type(exc).__name__}: {exc}"})
