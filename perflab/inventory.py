"""hosts.yaml: the hosts perflab can reach, loaded into validated, typed models.

A host is reached over SSH (paramiko) or is the app's own machine (``transport: local``). Every problem
in the file is reported at once, each message naming the file, line, host and field, e.g.
``hosts.yaml:12: host 'gpu-a' field 'port': must be an integer``. Secrets are never stored in the
file: a host names the environment variable that holds its password (``auth.password_env``), and its
secret variables (``secrets:``, e.g. ``HF_TOKEN``) name an environment variable or a file on the app
machine; a secret-named entry of ``env:`` is refused.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    ValidationError,
    field_validator,
    model_validator,
)

from db.home import REPO_ROOT
from perflab import safe_yaml
from perflab.bench.user_files import UserFileError
from perflab.containers.runtime import parse_mount
from perflab.price_settings import HourPrice, PriceSettings
from perflab.problems import line_of, plain_message, syntax_problem, yaml_location
from perflab.secret_names import is_secret_name

HOSTS_FILE_ENV = "PERFLAB_HOSTS"
# The app, the worker and every command read the same file wherever they are started from.
DEFAULT_HOSTS_FILE = REPO_ROOT / "hosts.yaml"

_HOST_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_PASSWORD_KEYS = ("password", "passphrase")
PRICE_KEYS = ("currency", "accelerator_prices")
_NAMED_FIELD = re.compile(r"^field '([a-z_]+)'")


class InventoryError(ValueError):
    """hosts.yaml could not be loaded; ``problems`` lists every message (file:line: host field: why)."""

    def __init__(self, problems: Sequence[str]) -> None:
        self.problems = list(problems)
        super().__init__("\n".join(self.problems))


def _check_env_name(value: str | None) -> str | None:
    if value is not None and not _ENV_NAME.match(value):
        raise ValueError(f"'{value}' is not a valid environment variable name")
    return value


class AuthConfig(BaseModel):
    """How to log in: a key file, the ssh-agent, and/or a password read from an environment variable."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    key_file: str | None = Field(None, min_length=1, description="private key path on the app machine")
    passphrase_env: str | None = Field(None, description="variable holding the key file's passphrase")
    agent: bool = Field(True, description="offer the keys of the running ssh-agent")
    password_env: str | None = Field(None, description="variable holding the login password")

    _names_are_env_vars = field_validator("passphrase_env", "password_env")(_check_env_name)


class SecretSource(BaseModel):
    """Where a host's secret variable is read on the app machine: an environment variable or a file."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    env: str | None = Field(None, description="environment variable holding the value")
    file: str | None = Field(None, min_length=1, description="file holding the value (first line)")

    _env_is_a_name = field_validator("env")(_check_env_name)

    @model_validator(mode="after")
    def _exactly_one(self) -> SecretSource:
        if (self.env is None) == (self.file is None):
            raise ValueError("give exactly one of 'env' (a variable name) or 'file' (a path)")
        return self


class SimulateSpec(BaseModel):
    """Make the host look like it has ``count`` accelerators of one kind (answered by the simulator)."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    accelerator: str = Field(min_length=1, description="H100, H200, A100, 910B, ...")
    count: int = Field(8, ge=1, le=64)
    engines: list[str] | None = Field(None, description="simulated engines (default: the usual ones)")
    versions: dict[str, str] = Field(default_factory=dict, description="engine -> simulated version")
    time_scale: float = Field(1.0, gt=0, description="divide simulated durations by this factor")
    startup_scale: float | None = Field(
        None, gt=0, description="divide simulated engine start-up times by this factor (default: time_scale)"
    )
    noise: dict[str, int | float] | None = Field(
        None, description="seeded speed noise: {run_cv_pct, launch_cv_pct, seed} (off when absent)"
    )
    transfer_backends: list[str] | None = Field(
        None, description="KV transfer libraries disaggregated workers find (default: mooncake, nixl)"
    )

    @model_validator(mode="after")
    def _simulator_accepts(self) -> SimulateSpec:
        from perflab.sim.hostspec import normalize_spec

        normalize_spec(self.as_spec())
        return self

    def as_spec(self) -> dict[str, Any]:
        """The plain mapping the simulator's shims take."""
        return self.model_dump(exclude_none=True)


class HostConfig(BaseModel):
    """One entry of hosts.yaml."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    name: str
    transport: Literal["ssh", "local"] = "ssh"
    address: str | None = Field(None, min_length=1)
    port: int = Field(22, ge=1, le=65535)
    user: str | None = Field(None, min_length=1, description="login name; default: the app's user")
    auth: AuthConfig = Field(default_factory=AuthConfig)
    jump: str | None = Field(None, description="name of another host used as ProxyJump")
    known_hosts: str = Field("~/.ssh/known_hosts", min_length=1)
    trust_on_first_use: bool = Field(False, description="accept and save an unknown host key once")
    labels: tuple[str, ...] = ()
    workdir: str = Field("~/.perflab", min_length=1, description="perflab's directory on the host")
    python: str = Field("python3", min_length=1, description="python used on the host")
    env: dict[str, str] = Field(default_factory=dict, description="set for every command on the host")
    secrets: dict[str, SecretSource] = Field(
        default_factory=dict, description="secret variables set for every command, read on the app machine"
    )
    allow_env: tuple[str, ...] = Field(
        (), description="variables that change what code runs (LD_PRELOAD, …) an engine config may set"
    )
    dataset_dirs: tuple[str, ...] = Field(
        (), description="directories of the app machine whose files profiles may send to this host"
    )
    simulate: SimulateSpec | None = None
    container_runtime: Literal["docker", "podman"] | None = Field(
        None, description="runtime for engines run from images (default: the one the probe finds)"
    )
    container_mounts: tuple[str, ...] = Field(
        (),
        description="host paths every engine container gets, SOURCE[:TARGET][:ro|rw] (read-only by default)",
    )
    price_per_accelerator_hour: HourPrice | None = Field(
        None, description="what one accelerator-hour of this host costs (wins over accelerator_prices)"
    )
    price_label: str | None = Field(
        None, min_length=1, max_length=60, description="shown beside figures priced from it ('example price')"
    )
    connect_timeout_s: float = Field(10.0, gt=0, le=600)
    connect_attempts: int = Field(3, ge=1, le=10)
    keepalive_s: int = Field(15, ge=0, le=3600)

    _jump_host: HostConfig | None = PrivateAttr(default=None)

    @field_validator("name")
    @classmethod
    def _name_is_simple(cls, value: str) -> str:
        if not _HOST_NAME.match(value):
            raise ValueError("must start with a letter or digit and use only letters, digits, '.', '_', '-'")
        return value

    @field_validator("env")
    @classmethod
    def _env_names_valid(cls, value: dict[str, str]) -> dict[str, str]:
        for name, text in value.items():
            _check_env_name(name)
            if "\0" in text:
                raise ValueError(f"value of {name} contains a NUL character")
        return value

    @field_validator("secrets")
    @classmethod
    def _secret_names_valid(cls, value: dict[str, SecretSource]) -> dict[str, SecretSource]:
        for name in value:
            _check_env_name(name)
        return value

    @field_validator("allow_env")
    @classmethod
    def _allowed_names_valid(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for name in value:
            _check_env_name(name)
        return value

    @field_validator("container_mounts")
    @classmethod
    def _mounts_parse(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for text in value:
            parse_mount(text)
        return value

    @field_validator("labels")
    @classmethod
    def _labels_are_words(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for label in value:
            if not label.strip() or any(ch in label for ch in "\r\n\0"):
                raise ValueError(f"label {label!r} must be a non-empty single line")
        return value

    @model_validator(mode="after")
    def _transport_fields_consistent(self) -> HostConfig:
        if self.transport == "ssh" and not self.address:
            raise ValueError("field 'address': is required for an SSH host")
        if self.transport == "local":
            for field in ("address", "user", "jump"):
                if getattr(self, field) is not None:
                    raise ValueError(f"field '{field}': has no meaning with transport: local")
        if self.jump == self.name:
            raise ValueError("field 'jump': a host cannot be its own jump host")
        if self.price_label is not None and self.price_per_accelerator_hour is None:
            raise ValueError("field 'price_label': labels a price_per_accelerator_hour, which is not set")
        return self

    @property
    def simulated(self) -> bool:
        return self.simulate is not None

    @property
    def time_scale(self) -> float:
        """How many times faster than real time the host's engines run (1 unless simulated so)."""
        return self.simulate.time_scale if self.simulate is not None else 1.0

    @property
    def jump_host(self) -> HostConfig | None:
        """The resolved jump host (set by :func:`load_inventory` or :meth:`with_jump_host`)."""
        if self.jump is not None and self._jump_host is None:
            raise InventoryError([f"host '{self.name}': jump host '{self.jump}' was not resolved"])
        return self._jump_host

    def with_jump_host(self, jump_host: HostConfig) -> HostConfig:
        """A copy of this host whose ``jump`` resolves to ``jump_host``."""
        if jump_host.name != self.jump:
            raise ValueError(f"host '{self.name}' jumps through '{self.jump}', not '{jump_host.name}'")
        copy = self.model_copy()
        copy._jump_host = jump_host
        return copy

    @property
    def display_address(self) -> str:
        """``user@address:port`` (via the jump host) or ``local``, as the UI shows it."""
        if self.transport == "local":
            return "local"
        user = f"{self.user}@" if self.user else ""
        port = f":{self.port}" if self.port != 22 else ""
        via = f" via {self.jump}" if self.jump else ""
        return f"{user}{self.address}{port}{via}"


@dataclass(frozen=True)
class Inventory:
    """The validated hosts of one hosts.yaml file, in file order."""

    path: Path
    hosts: tuple[HostConfig, ...]
    prices: PriceSettings = PriceSettings()

    def names(self) -> list[str]:
        return [host.name for host in self.hosts]

    def get(self, name: str) -> HostConfig:
        for host in self.hosts:
            if host.name == name:
                return host
        known = ", ".join(self.names()) or "none"
        raise InventoryError([f"{self.path.name}: no host named '{name}' (known hosts: {known})"])

    def __iter__(self) -> Iterator[HostConfig]:
        return iter(self.hosts)

    def __len__(self) -> int:
        return len(self.hosts)


def default_inventory_path() -> Path:
    """``$PERFLAB_HOSTS`` if set (``~`` expanded), else ``hosts.yaml`` at the repository root."""
    configured = os.environ.get(HOSTS_FILE_ENV, "").strip()
    return Path(configured).expanduser() if configured else DEFAULT_HOSTS_FILE


def load_inventory(path: str | os.PathLike[str] | None = None) -> Inventory:
    """Read and validate hosts.yaml; raise :class:`InventoryError` listing every problem found."""
    file_path = Path(path) if path is not None else default_inventory_path()
    try:
        text = safe_yaml.read_file(file_path)
    except FileNotFoundError:
        raise InventoryError([f"{file_path}: file not found"]) from None
    except (OSError, UnicodeDecodeError, UserFileError) as exc:
        raise InventoryError([f"{file_path}: cannot read: {exc}"]) from None
    return parse_inventory(text, file_path)


def parse_inventory(text: str, path: Path) -> Inventory:
    """Validate the YAML ``text`` of hosts.yaml (``path`` names it in messages)."""
    label = path.name
    try:
        document = safe_yaml.load(text)
    except yaml.YAMLError as exc:
        raise InventoryError([syntax_problem(label, exc)]) from None
    data, root = document.data, document.root
    if data is None:
        return Inventory(path=path, hosts=())
    if not isinstance(data, dict) or set(data) - {"hosts", *PRICE_KEYS}:
        raise InventoryError(
            [
                f"{label}:1: expected a mapping of 'hosts' (a list of hosts) and optionally "
                "'currency' and 'accelerator_prices'"
            ]
        )
    entries = data.get("hosts") or []
    if not isinstance(entries, list):
        raise InventoryError([f"{yaml_location(label, root, ('hosts',))}: 'hosts' must be a list of hosts"])

    problems: list[str] = []
    prices = _validate_prices(data, label, root, problems)
    hosts: list[HostConfig] = []
    for index, entry in enumerate(entries):
        host = _validate_host(entry, index, label, root, problems)
        if host is not None:
            hosts.append(host)
    _check_unique_names(entries, label, root, problems)
    resolved = _resolve_jumps(hosts, entries, label, root, problems)
    if problems:
        raise InventoryError(sorted(problems, key=line_of))
    return Inventory(path=path, hosts=tuple(resolved), prices=prices)


def _validate_prices(data: dict[str, Any], label: str, root: yaml.Node, problems: list[str]) -> PriceSettings:
    try:
        return PriceSettings.model_validate({key: data[key] for key in PRICE_KEYS if key in data})
    except ValidationError as exc:
        for error in exc.errors():
            field_loc = tuple(error["loc"])
            field = ".".join(str(part) for part in field_loc)
            where = yaml_location(label, root, field_loc)
            problems.append(f"{where}: field '{field}': {plain_message(error)}")
        return PriceSettings()


def _validate_host(
    entry: Any, index: int, label: str, root: yaml.Node, problems: list[str]
) -> HostConfig | None:
    loc: tuple[Any, ...] = ("hosts", index)
    if not isinstance(entry, dict):
        problems.append(f"{yaml_location(label, root, loc)}: host #{index + 1} must be a mapping of fields")
        return None
    who = _host_label(entry, index)
    stored_secrets = _stored_secrets(entry)
    for field, instead in stored_secrets:
        where = yaml_location(label, root, (*loc, *field.split(".")))
        problems.append(f"{where}: {who} field '{field}': secrets are never stored in hosts.yaml; {instead}")
    if stored_secrets:
        return None
    try:
        return HostConfig.model_validate(entry)
    except ValidationError as exc:
        for error in exc.errors():
            field_loc = tuple(error["loc"])
            field = ".".join(str(part) for part in field_loc)
            message = plain_message(error)
            named = _NAMED_FIELD.match(message)
            if named:
                problems.append(f"{yaml_location(label, root, (*loc, named.group(1)))}: {who} {message}")
            elif field:
                problems.append(
                    f"{yaml_location(label, root, (*loc, *field_loc))}: {who} field '{field}': {message}"
                )
            else:
                problems.append(f"{yaml_location(label, root, loc)}: {who}: {message}")
        return None


def _stored_secrets(entry: dict[str, Any]) -> list[tuple[str, str]]:
    """``(field, what to write instead)`` of every secret written into a host's entry."""
    found = [key for key in _PASSWORD_KEYS if key in entry]
    auth = entry.get("auth")
    if isinstance(auth, dict):
        found += [f"auth.{key}" for key in _PASSWORD_KEYS if key in auth]
    stored = [(field, f"name an environment variable with '{field}_env' instead") for field in found]
    env = entry.get("env")
    if isinstance(env, dict):
        stored += [
            (
                f"env.{name}",
                f"read it on the app machine with secrets: {{{name}: {{env: VARIABLE}}}} "
                f"or {{{name}: {{file: PATH}}}}",
            )
            for name in env
            if isinstance(name, str) and is_secret_name(name)
        ]
    return stored


def _check_unique_names(entries: list[Any], label: str, root: yaml.Node, problems: list[str]) -> None:
    seen: set[str] = set()
    for index, entry in enumerate(entries):
        name = entry.get("name") if isinstance(entry, dict) else None
        if isinstance(name, str) and name in seen:
            problems.append(
                f"{yaml_location(label, root, ('hosts', index, 'name'))}: host '{name}' is defined twice"
            )
        if isinstance(name, str):
            seen.add(name)


def _resolve_jumps(
    hosts: list[HostConfig], entries: list[Any], label: str, root: yaml.Node, problems: list[str]
) -> list[HostConfig]:
    by_name = {host.name: host for host in hosts}
    lines = {
        entry.get("name"): yaml_location(label, root, ("hosts", index, "jump"))
        for index, entry in enumerate(entries)
        if isinstance(entry, dict)
    }
    resolved: dict[str, HostConfig] = {}

    def resolve(host: HostConfig, chain: tuple[str, ...]) -> HostConfig | None:
        if host.name in resolved:
            return resolved[host.name]
        if host.jump is None:
            resolved[host.name] = host
            return host
        where = lines.get(host.name, label)
        jump = by_name.get(host.jump)
        if jump is None:
            problems.append(f"{where}: host '{host.name}' field 'jump': no host named '{host.jump}'")
            return None
        if jump.transport != "ssh":
            problems.append(f"{where}: host '{host.name}' field 'jump': '{host.jump}' is not an SSH host")
            return None
        if jump.name in chain:
            loop = " -> ".join((*chain, jump.name))
            problems.append(f"{where}: host '{host.name}' field 'jump': jump hosts form a loop ({loop})")
            return None
        jump_resolved = resolve(jump, (*chain, jump.name))
        if jump_resolved is None:
            return None
        resolved[host.name] = host.with_jump_host(jump_resolved)
        return resolved[host.name]

    out = [resolve(host, (host.name,)) for host in hosts]
    return [host for host in out if host is not None]


def _host_label(entry: dict[str, Any], index: int) -> str:
    name = entry.get("name")
    return f"host '{name}'" if isinstance(name, str) and name else f"host #{index + 1}"
