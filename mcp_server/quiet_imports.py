"""Third-party warnings raised while importing a dependency: known ones are logged once at
debug level instead of reaching the user's stderr; any other warning is left to the active
filters (so pytest's `error` still catches it). pyproject.toml's pytest filters list the same
entries for tests that import the dependency directly; a test keeps the two in step."""

from __future__ import annotations

import contextlib
import logging
import re
import warnings
from collections.abc import Iterator
from dataclasses import dataclass

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class KnownWarning:
    message: str  # regex matched at the start of the warning text
    category: str  # dotted path of the warning class
    module: str  # regex matched at the start of the module the warning is attributed to
    reason: str


KNOWN: tuple[KnownWarning, ...] = (
    KnownWarning(
        message="DSA is deprecated", category="cryptography.utils.CryptographyDeprecationWarning",
        module="asyncssh",
        reason="cryptography 51 deprecates DSA; asyncssh still imports its DSA classes to load old keys",
    ),
)

_logged: set[str] = set()


def _category(path: str) -> type[Warning] | None:
    module, _, name = path.rpartition(".")
    try:
        cls = getattr(__import__(module, fromlist=[name]), name)
    except (ImportError, AttributeError):
        return None  # a dependency that no longer defines it raises nothing we know of
    return cls if isinstance(cls, type) and issubclass(cls, Warning) else None


def _known(w: warnings.WarningMessage) -> KnownWarning | None:
    for k in KNOWN:
        cat = _category(k.category)
        if cat is not None and issubclass(w.category, cat) and re.match(k.message, str(w.message)):
            return k
    return None


@contextlib.contextmanager
def quiet_known_warnings() -> Iterator[None]:
    """Around a dependency's import: known warnings go to the debug log, once each."""
    with warnings.catch_warnings(record=True) as caught:
        for k in KNOWN:
            cat = _category(k.category)
            if cat is not None:
                warnings.filterwarnings("always", message=k.message, category=cat, module=k.module)
        yield
    for w in caught:
        known = _known(w)
        if known is None:
            warnings.showwarning(w.message, w.category, w.filename, w.lineno)
        elif known.message not in _logged:
            _logged.add(known.message)
            log.debug("ignored a known warning from %s (%s): %s", known.module, known.reason, w.message)
