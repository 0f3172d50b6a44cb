"""Each engine's own words for the enumerated knobs, release by release, and which release judges a value.

perflab keeps fallback tables of what each engine release accepts for its one-word knobs (attention
backend, KV-cache dtype, quantization, speculative method, performance mode) and which flags it added or
removed: one :class:`Release` per engine version they were read from (:mod:`perflab.engines.tables`,
each module naming its versions and sources). An engine's :class:`EngineReleases` picks the release that
judges a configuration:

- a host whose engine version is known and has a table (a local suffix such as vLLM's ``+cpu``
  ignored): that release's table (:meth:`EngineReleases.release`);
- a host whose version is unknown (never probed): the newest release's (:attr:`EngineReleases.newest`);
- no host at all (a study spec being read, an imported or displayed command): the words of any release
  perflab has a table for (:meth:`EngineReleases.any_release`); the host-aware checks come later.

A refusal (:meth:`Vocabulary.check`) names the engine, the knob, the version the table follows, the word
to use for another engine's spelling, and the accepted values; a flag a release lacks
(:meth:`EngineReleases.flag_problem`) names the release that added or removed it. The preflight
(:mod:`perflab.engines.preflight`) asks the installed engine itself where it can, and the registries it
listed replace these tables where an earlier check cached them
(:func:`perflab.engines.preflight.host_adapter`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from perflab.engines.errors import InvalidKnobValue


@dataclass(frozen=True)
class Vocabulary:
    """The values one engine version accepts for one knob, and hints for other engines' spellings."""

    version: str
    values: tuple[str, ...]
    hints: Mapping[str, str] = field(default_factory=dict)
    case_sensitive: bool = True
    also: tuple[str, ...] = ()

    def _hint(self, value: str) -> str | None:
        return self.hints.get(value if self.case_sensitive else value.lower())

    def installed(self, version: str, values: tuple[str, ...]) -> Vocabulary:
        """The same knob's vocabulary as an installed engine's registry (or another release) lists it."""
        return Vocabulary(version, values, self.hints, self.case_sensitive, self.also)

    def check(self, engine: str, knob: str, value: str, *, hints_only: bool = False) -> None:
        """Raise :class:`InvalidKnobValue` unless ``value`` is one of the engine's words; with
        ``hints_only``, only for another engine's spelling (a word no version of this engine takes)."""
        candidate = value if self.case_sensitive else value.upper()
        if candidate in self.values or value.lower() in self.also:
            return
        hint = self._hint(value)
        if hints_only and hint is None:
            return
        suggestion = f"; use {hint}" if hint else ""
        raise InvalidKnobValue(
            engine,
            knob,
            f"{value!r} is not one of {engine} {self.version}'s values{suggestion} "
            f"(accepted: {', '.join(self.values)})",
        )


@dataclass(frozen=True)
class Release:
    """One engine release as perflab's tables know it: the values of each one-word knob, and the flags
    it added or removed against the release before it (flag → whether it takes a value)."""

    version: str
    words: Mapping[str, tuple[str, ...]]
    flags_added: Mapping[str, bool] = field(default_factory=dict)
    flags_removed: Mapping[str, bool] = field(default_factory=dict)

    def next(
        self,
        version: str,
        *,
        added: Mapping[str, Sequence[str]] | None = None,
        removed: Mapping[str, Sequence[str]] | None = None,
        flags_added: Mapping[str, bool] | None = None,
        flags_removed: Mapping[str, bool] | None = None,
    ) -> Release:
        """The release after this one: each knob's values less ``removed``, then ``added`` appended."""
        added, removed = added or {}, removed or {}
        unknown = sorted((set(added) | set(removed)) - set(self.words))
        if unknown:
            raise ValueError(f"{version}: no knob {', '.join(unknown)} in {self.version}'s table")
        words = {
            knob: (
                *(value for value in values if value not in removed.get(knob, ())),
                *(value for value in added.get(knob, ()) if value not in values),
            )
            for knob, values in self.words.items()
        }
        return Release(version, words, dict(flags_added or {}), dict(flags_removed or {}))


def _versions_text(versions: Sequence[str]) -> str:
    """``0.32.0 or 0.33.0``; ``a, b or c``."""
    return versions[0] if len(versions) == 1 else f"{', '.join(versions[:-1])} or {versions[-1]}"


def release_of(version: str) -> str:
    """The release a reported version belongs to: ``0.32.0+cpu`` → ``0.32.0``."""
    return version.partition("+")[0]


@dataclass(frozen=True)
class EngineReleases:
    """The releases of one engine perflab keeps tables for (oldest first), and how each knob's words
    are read (hints for other engines' spellings, case, extra words such as ``auto``: ``styles``)."""

    engine: str
    releases: tuple[Release, ...]
    styles: Mapping[str, Vocabulary] = field(default_factory=dict)

    def __post_init__(self) -> None:
        versions = [release.version for release in self.releases]
        if not versions or len(set(versions)) != len(versions):
            raise ValueError(f"{self.engine}: releases must be listed once each, got {versions}")

    @property
    def newest(self) -> Release:
        return self.releases[-1]

    def release(self, version: str | None) -> Release | None:
        """The release a table follows for ``version`` as an engine reports it, or None."""
        if version is None:
            return None
        wanted = release_of(version)
        return next((release for release in self.releases if release.version == wanted), None)

    def _style(self, knob: str) -> Vocabulary:
        return self.styles.get(knob, Vocabulary("", ()))

    def vocabulary(self, release: Release) -> dict[str, Vocabulary]:
        """``release``'s words for each knob, naming its version."""
        return {
            knob: self._style(knob).installed(release.version, values)
            for knob, values in release.words.items()
        }

    def any_release(self) -> dict[str, Vocabulary]:
        """The words any release takes for each knob (the newest's first), naming every version."""
        versions = _versions_text([release.version for release in self.releases])
        merged: dict[str, Vocabulary] = {}
        for knob in self.newest.words:
            values = dict.fromkeys(
                value for release in reversed(self.releases) for value in release.words.get(knob, ())
            )
            merged[knob] = self._style(knob).installed(versions, tuple(values))
        return merged

    def with_words(self, knob: str, extra: Sequence[str]) -> EngineReleases:
        """The same releases, each taking ``extra`` for ``knob`` too (a platform plug-in's words)."""
        releases = tuple(
            Release(
                release.version,
                {**release.words, knob: (*release.words[knob], *extra)},
                release.flags_added,
                release.flags_removed,
            )
            for release in self.releases
        )
        return EngineReleases(self.engine, releases, self.styles)

    def switches(self) -> tuple[str, ...]:
        """Flags some release added or removed that take no value (how an imported command reads them)."""
        changed = [
            flag
            for release in self.releases
            for flags in (release.flags_added, release.flags_removed)
            for flag, takes_value in flags.items()
            if not takes_value
        ]
        return tuple(dict.fromkeys(changed))

    def flag_problem(self, flag: str, release: Release) -> str | None:
        """Why ``release`` has no ``flag`` where the tables know it (a later release added it, or this
        or an earlier one removed it), else None."""
        position = self.releases.index(release)
        for later in self.releases[position + 1 :]:
            if flag in later.flags_added:
                return f"{self.engine} {release.version} has no flag {flag} (it came in {later.version})"
        present = True
        removed_in = ""
        for earlier in self.releases[: position + 1]:
            if flag in earlier.flags_removed:
                present, removed_in = False, earlier.version
            elif flag in earlier.flags_added:
                present = True
        if not present:
            return f"{self.engine} {release.version} has no flag {flag} (removed in {removed_in})"
        return None
