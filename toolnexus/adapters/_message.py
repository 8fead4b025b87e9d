"""`Message`, the provider-JSON type that tool definitions, results and `Adapter` are written in.

Private and on its own so that `definitions`, `results` and the package's `Adapter` share one
alias without importing each other.
"""

from __future__ import annotations

from typing import Any

__all__ = ["Message"]


Message = dict[str, Any]
"""One provider message, content block or input item, as the provider's JSON."""
