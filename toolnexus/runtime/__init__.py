"""Running things: the threads and processes a toolkit starts, and the sandbox around them.

- `loop`, `affinity`: the toolkit's private event-loop thread and the co-scheduled sync
  hand-off to it.
- `workers`: worker threads for sync Python tools.
- `process`: running a command with bounded output and whole-group kills; `reaper`: the
  subreaper child that guarantees no process outlives its call; `resident`: the toolkit's
  resident launchers, which fork that reaper per command instead of starting it.
- `sandbox`: `SandboxPolicy`, path confinement and the bwrap / Landlock wrapping;
  `launcher`: the Landlock launcher run inside the sandboxed child.

`reaper` and `launcher` also run as scripts in child processes (`python -I -S`), so they import
nothing from toolnexus.
"""
