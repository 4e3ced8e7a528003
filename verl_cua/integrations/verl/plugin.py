"""verl plug-in entry point (`verl.plugins` group): registers verl-cua's names in every process that imports verl.

verl loads this module at `import verl` and swallows errors at DEBUG level, so it stays import-light and
idempotent; the trainer checks `registered()` at start. Registrations arrive with the agent loop and
estimators (issues 4 and 5); today it registers nothing.
"""

from __future__ import annotations

import logging

logger = logging.getLogger(__name__)

_REGISTERED: set[str] = set()


def register() -> set[str]:
    """Register every verl-cua name with verl's registries (safe to call twice); returns the names registered."""
    return set(_REGISTERED)


def registered() -> set[str]:
    """Names this process has registered so far."""
    return set(_REGISTERED)


register()
