"""Approval: decide allow | ask | deny for a call from its tool and arguments.

The executor asks every policy that applies (the toolkit-wide permissions, then the tool's own
rules) and keeps the strongest decision: deny beats ask beats allow. A decision carries the rule
that made it, so audit logs and approvers can show *why*. `ask` goes to the `Approver`; with no
approver configured it is refused (fail closed), and so is any policy or approver that crashes.

Two front ends compile to policies: `compile_rules` for a tool's `approval:` block (matchers
over named arguments) and `compile_permissions` for the manifest-wide `permissions:` strings
(`read(**/.env*)`). Both lean the same way under doubt: a rule that would *allow* a call
needs every reading of an argument to match (the path as written and its symlink target,
every sub-command of a shell line), a rule that would *deny* or *ask* needs only one.
Everything is compiled up front; `decide` touches the disk only for `path` matchers.

One module per job:

- `decision`: `Decision`, `Verdict`, `ApprovalPolicy`, `ApprovalRequest`, `Approver`,
  `combine_verdicts`: the types every part speaks.
- `rules`: `compile_rules` and `ApprovalRules`, the rule language of `approval:` blocks.
- `permissions`: `compile_permissions` and `PermissionRules`, the `permissions:` strings;
  also `split_command` and `is_known_safe_command`.
- `access`: `AccessRules` and `CallerMatch`: which callers of `serve` see and run which tools
  (`access:`), and the `caller:` condition of rules and permissions.
- `paths` (globs and path patterns) and `hosts` (URL hosts), shared by both front ends.

This package re-exports the public names. Shell commands are read by `toolnexus.shell`,
loaded only when a command pattern is compiled or a command is split.
"""

from __future__ import annotations

from .access import AccessRules, CallerMatch, compile_caller
from .decision import ALLOW_BY_DEFAULT as ALLOW_BY_DEFAULT  # not in __all__; executor imports it
from .decision import (
    ApprovalPolicy,
    ApprovalRequest,
    Approver,
    Decision,
    Verdict,
    combine_verdicts,
)
from .permissions import (
    PermissionRules,
    compile_permissions,
    is_known_safe_command,
    split_command,
)
from .rules import ApprovalRules, compile_rules

__all__ = [
    "AccessRules",
    "ApprovalPolicy",
    "ApprovalRequest",
    "ApprovalRules",
    "Approver",
    "CallerMatch",
    "Decision",
    "PermissionRules",
    "Verdict",
    "combine_verdicts",
    "compile_caller",
    "compile_permissions",
    "compile_rules",
    "is_known_safe_command",
    "split_command",
]
