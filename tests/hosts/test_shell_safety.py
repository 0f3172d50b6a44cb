"""Property test: any text passed as an argument or env value reaches the program unchanged.

Model names and extra args carry user text into remote commands. Over real SSH and locally, every
generated argv (shell metacharacters, quotes, newlines, unicode) must arrive as literal arguments:
nothing is interpreted by a shell, so no command can be injected.
"""

from __future__ import annotations

from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from perflab.transport import open_transport
from tests.hosts.conftest import HostFactory

DANGEROUS = [";", "$(", ")", "`", "|", "&", ">", "<", "'", '"', "\n", "\\", "$HOME", "*", "~", " ", "\t", "#"]

_text = st.text(alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\0"), max_size=40)
_dangerous = st.lists(st.sampled_from(DANGEROUS), min_size=1, max_size=6).map("".join)
_arg = st.one_of(_dangerous, _text, st.tuples(_text, _dangerous, _text).map("".join))

# The receiving program prints the env value and each argument it got, NUL-terminated.
PRINT_ARGS = 'printf "%s\\0" "$PERFLAB_PROBE_VALUE" "$@"'


def _check_round_trip(make_host: HostFactory, args: list[str], value: str, marker: Path) -> None:
    with open_transport(make_host()) as transport:
        result = transport.run(
            ["sh", "-c", PRINT_ARGS, "sh", *args], timeout=30, env={"PERFLAB_PROBE_VALUE": value}
        )
    assert result.exit_status == 0, result.stderr
    received = result.stdout.split("\0")
    assert received == [value, *args, ""]
    assert not marker.exists(), "an argument was executed by a shell"


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(args=st.lists(_arg, max_size=12), value=_arg)
def test_arguments_and_env_values_arrive_literally(
    make_host: HostFactory, tmp_path: Path, args: list[str], value: str
) -> None:
    marker = tmp_path / "injected"
    injections = [f"; touch {marker}", f"$(touch {marker})", f"`touch {marker}`", f"' ; touch {marker} ; '"]
    _check_round_trip(make_host, [*args, *injections], value, marker)
