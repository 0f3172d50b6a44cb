"""Which environment variables an engine config may set on a host.

Some variables make a program load or run code other than its own: the dynamic loader's
(``LD_PRELOAD``, ``LD_LIBRARY_PATH``, …), the interpreters' start-up hooks (``PYTHONPATH``,
``PYTHONWARNINGS`` with ``BROWSER``, ``PERL5OPT``, ``NODE_OPTIONS``, ``RUBYOPT``, …), shells'
start-up files (``BASH_ENV``, ``ENV``) and libraries' plug-in paths (``GCONV_PATH``, ``OPENSSL_CONF``,
``CUDA_INJECTION64_PATH``). Given as an engine's environment they would run a user's code as the host
user, so a config that sets one is refused unless the administrator's hosts.yaml allows that name for
the host (``allow_env: [LD_LIBRARY_PATH]``). The host's own ``env:`` is the administrator's and is not
checked.
"""

from __future__ import annotations

from collections.abc import Mapping

from perflab.engines.config import EngineConfig
from perflab.engines.errors import EngineConfigError
from perflab.inventory import HostConfig

# What each variable does, for the message. Prefix entries end with "*".
_HIJACKING: dict[str, str] = {
    "LD_*": "the dynamic loader's settings load other libraries into every program",
    "DYLD_*": "the dynamic loader's settings load other libraries into every program",
    "GLIBC_TUNABLES": "glibc's tunables change how the C library behaves",
    "GCONV_PATH": "glibc loads character-set converters from it",
    "LOCPATH": "glibc loads locale data from it",
    "NLSPATH": "glibc loads message catalogues from it",
    "PATH": "it chooses which programs run",
    "HOME": "programs read start-up files and Python's user site-packages from it",
    "PYTHONPATH": "Python imports modules from it first",
    "PYTHONHOME": "Python loads its standard library from it",
    "PYTHONSTARTUP": "Python runs this file",
    "PYTHONWARNINGS": "Python imports the warning categories it names",
    "PYTHONBREAKPOINT": "Python imports and calls the function it names",
    "PYTHONUSERBASE": "Python runs the .pth files of its site-packages",
    "PYTHONPYCACHEPREFIX": "Python loads compiled modules from it",
    "PYTHONPLATLIBDIR": "Python loads its platform libraries from it",
    "PYTHONEXECUTABLE": "Python takes it for its own executable",
    "BROWSER": "Python's webbrowser module runs it",
    "PERL5OPT": "Perl runs the options it holds",
    "PERL5LIB": "Perl loads modules from it first",
    "PERLLIB": "Perl loads modules from it first",
    "PERL5DB": "Perl runs it as its debugger",
    "RUBYOPT": "Ruby runs the options it holds",
    "RUBYLIB": "Ruby loads libraries from it first",
    "NODE_OPTIONS": "Node.js runs the options it holds",
    "NODE_PATH": "Node.js loads modules from it",
    "JAVA_TOOL_OPTIONS": "the JVM runs the options it holds",
    "_JAVA_OPTIONS": "the JVM runs the options it holds",
    "JDK_JAVA_OPTIONS": "the JVM runs the options it holds",
    "BASH_ENV": "bash runs this file before any script",
    "ENV": "sh runs this file when it starts",
    "BASH_FUNC_*": "bash imports these as functions",
    "SHELLOPTS": "bash takes shell options from it",
    "BASHOPTS": "bash takes shell options from it",
    "PS4": "a traced shell expands it as a command",
    "PROMPT_COMMAND": "bash runs it",
    "IFS": "shells split words with it",
    "GIT_*": "git runs the commands and reads the configuration it names",
    "EDITOR": "programs run it",
    "VISUAL": "programs run it",
    "PAGER": "programs run it",
    "SSH_ASKPASS": "ssh runs it",
    "OPENSSL_CONF": "OpenSSL loads the engines and providers its file names",
    "OPENSSL_ENGINES": "OpenSSL loads engines from it",
    "OPENSSL_MODULES": "OpenSSL loads providers from it",
    "CUDA_INJECTION32_PATH": "the CUDA runtime loads this library",
    "CUDA_INJECTION64_PATH": "the CUDA runtime loads this library",
    "NVTX_INJECTION32_PATH": "NVTX loads this library",
    "NVTX_INJECTION64_PATH": "NVTX loads this library",
}


def hijack_reason(name: str) -> str | None:
    """Why variable ``name`` can make a program run other code, or None for an ordinary variable."""
    for pattern, reason in _HIJACKING.items():
        if name == pattern or (pattern.endswith("*") and name.startswith(pattern[:-1])):
            return reason
    return None


class EnvNotAllowed(EngineConfigError):
    """An engine config sets a variable that changes what code runs, and the host does not allow it."""


def env_problems(env: Mapping[str, str], host: HostConfig) -> list[tuple[str, str]]:
    """``("env", why)`` for each variable of ``env`` that hijacks a program and that the host's
    ``allow_env`` does not list (empty: every variable may be set)."""
    problems = []
    for name in env:
        reason = hijack_reason(name)
        if reason is not None and name not in host.allow_env:
            problems.append(
                (
                    "env",
                    f"{name} is refused: {reason}; the administrator may allow it for host "
                    f"'{host.name}' in hosts.yaml with allow_env: [{name}]",
                )
            )
    return problems


def check_env(config: EngineConfig, host: HostConfig) -> None:
    """Raise :class:`EnvNotAllowed` (naming the first refused variable) for a config whose environment
    sets a hijacking variable the host does not allow."""
    problems = env_problems(config.env, host)
    if problems:
        field, why = problems[0]
        raise EnvNotAllowed(config.engine, field, f"{field}: {why}")
