"""Which container runtimes a host can use: Podman and Docker, each asked for its version.

A runtime counts as usable when ``<runtime> version`` answers: Podman's client version (it runs
without a daemon), Docker's server version (the client alone cannot start anything). A runtime that
is installed but does not answer is reported with its last output line, e.g. Docker's ``Cannot
connect to the Docker daemon at unix:///var/run/docker.sock. Is the docker daemon running?``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

# one line per installed runtime: "<name> ok <version>" or "<name> fail <last output line>"
SCRIPT = r"""
for rt in podman docker; do
  command -v "$rt" >/dev/null 2>&1 || continue
  case $rt in podman) fmt='{{.Client.Version}}' ;; *) fmt='{{.Server.Version}}' ;; esac
  if out=$("$rt" version --format "$fmt" 2>&1); then
    echo "$rt ok $(printf '%s\n' "$out" | tail -n 1)"
  else
    echo "$rt fail $(printf '%s\n' "$out" | grep . | tail -n 1)"
  fi
done
exit 0
"""
ARGV = ["sh", "-c", SCRIPT, "perflab-runtimes"]


@dataclass(frozen=True)
class RuntimeScan:
    """Usable runtimes (name → version) and installed ones that did not answer (name → why)."""

    usable: dict[str, str] = field(default_factory=dict)
    broken: dict[str, str] = field(default_factory=dict)


def parse(text: str) -> RuntimeScan:
    scan = RuntimeScan()
    for line in text.splitlines():
        name, _, rest = line.strip().partition(" ")
        state, _, detail = rest.partition(" ")
        if name and state == "ok":
            scan.usable[name] = detail.strip()
        elif name and state == "fail":
            scan.broken[name] = detail.strip() or "no output"
    return scan
