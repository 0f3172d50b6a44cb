"""Hub downloads the web app starts: each runs in a thread of its own (never in a page's script),
one per file at a time, and reports how far it got, so a page can poll it and draw progress. A
download always ends finished: with its file, or with a one-line error (whatever went wrong), so the
file can be fetched again."""

from __future__ import annotations

import threading
from dataclasses import dataclass, replace
from pathlib import Path

from perflab.hub.client import CachedFile, HubError, HubFile, fetch, hub_endpoint, hub_token


@dataclass(frozen=True)
class DownloadState:
    """Where one download stands: bytes so far (of ``total`` when known), and how it ended."""

    file: HubFile
    done: int = 0
    total: int | None = None
    result: CachedFile | None = None
    error: str | None = None

    @property
    def finished(self) -> bool:
        return self.result is not None or self.error is not None

    @property
    def fraction(self) -> float:
        if self.result is not None:
            return 1.0
        return min(1.0, self.done / self.total) if self.total else 0.0


class Downloads:
    """The downloads of this process, by hub reference (thread-safe)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._states: dict[str, DownloadState] = {}

    def state(self, file: HubFile) -> DownloadState | None:
        with self._lock:
            return self._states.get(file.ref)

    def _update(self, file: HubFile, **changes: object) -> None:
        with self._lock:
            self._states[file.ref] = replace(self._states[file.ref], **changes)  # type: ignore[arg-type]

    def start(self, file: HubFile, *, cache_dir: Path) -> DownloadState:
        """Start fetching ``file`` unless it is being fetched already; returns its state."""
        with self._lock:
            current = self._states.get(file.ref)
            if current is not None and not current.finished:
                return current
            self._states[file.ref] = DownloadState(file)
        thread = threading.Thread(
            target=self._run, args=(file, cache_dir), name=f"hub-{file.path}", daemon=True
        )
        thread.start()
        return DownloadState(file)

    def _run(self, file: HubFile, cache_dir: Path) -> None:
        try:
            got = fetch(
                file,
                cache_dir=cache_dir,
                endpoint=hub_endpoint(),
                token=hub_token(),
                on_progress=lambda done, total: self._update(file, done=done, total=total),
            )
        except HubError as problem:
            self._update(file, error=str(problem))
        except Exception as problem:  # a thread that died silently would leave the download unfinished
            self._update(file, error=f"{file.ref}: {type(problem).__name__}: {problem}"[:500])
        else:
            self._update(file, result=got, done=got.size, total=got.size)
