"""Shell completion scripts for `toolnexus`, written from the command's own argparse parser.

`toolnexus completion bash|zsh|fish` prints one; the words it completes (commands, their flags,
the choices of an argument such as `install CLIENT`) are read from the parser, so a new command
or flag completes without anyone editing a script. Files complete where a command takes a
manifest. No dependency: the three scripts are small and use each shell's own machinery.
"""

from __future__ import annotations

import argparse
import shlex
from dataclasses import dataclass

__all__ = ["SHELLS", "completion_script"]

SHELLS = ("bash", "zsh", "fish")


@dataclass(frozen=True, kw_only=True)
class _Command:
    name: str
    help: str
    flags: tuple[str, ...]
    choices: tuple[str, ...]
    """Values of the command's first positional argument, when it has a fixed set."""


def _commands(parser: argparse.ArgumentParser) -> list[_Command]:
    commands: list[_Command] = []
    for action in parser._actions:  # argparse has no public walk over subcommands
        if not isinstance(action, argparse._SubParsersAction):
            continue
        helps = {a.dest: a.help or "" for a in action._choices_actions}
        for name, sub in action.choices.items():
            flags = tuple(o for a in sub._actions for o in a.option_strings if o.startswith("--"))
            positional = [a for a in sub._actions if not a.option_strings and a.choices]
            choices = tuple(str(c) for c in positional[0].choices) if positional else ()
            commands.append(
                _Command(name=name, help=helps.get(name, ""), flags=flags, choices=choices)
            )
    return commands


def _top_flags(parser: argparse.ArgumentParser) -> list[str]:
    return [o for a in parser._actions for o in a.option_strings if o.startswith("--")]


def _bash(parser: argparse.ArgumentParser) -> str:
    commands = _commands(parser)
    cases = []
    for c in commands:
        words = " ".join((*c.flags, *c.choices))
        cases.append(f"        {c.name}) words={shlex.quote(words)} ;;")
    names = " ".join(c.name for c in commands)
    top = " ".join(_top_flags(parser))
    body = "\n".join(cases)
    return f"""# bash completion for toolnexus: eval "$(toolnexus completion bash)"
_toolnexus() {{
    local cur command words i
    cur="${{COMP_WORDS[COMP_CWORD]}}"
    command=""
    for ((i = 1; i < COMP_CWORD; i++)); do
        case "${{COMP_WORDS[i]}}" in
            -*) ;;
            *) command="${{COMP_WORDS[i]}}"; break ;;
        esac
    done
    if [[ -z "$command" ]]; then
        COMPREPLY=($(compgen -W {shlex.quote(names + " " + top)} -- "$cur"))
        return 0
    fi
    case "$command" in
{body}
        *) words="" ;;
    esac
    if [[ "$cur" == -* ]]; then
        COMPREPLY=($(compgen -W "$words" -- "$cur"))
    else
        COMPREPLY=($(compgen -W "$words" -- "$cur") $(compgen -f -- "$cur"))
    fi
    return 0
}}
complete -o filenames -F _toolnexus toolnexus
"""


def _zsh(parser: argparse.ArgumentParser) -> str:
    commands = _commands(parser)
    described = " ".join(shlex.quote(f"{c.name}:{c.help.replace(':', ' ')}") for c in commands)
    cases = []
    for c in commands:
        words = " ".join(shlex.quote(w) for w in (*c.flags, *c.choices))
        cases.append(f"        {c.name}) compadd -- {words}; _files ;;")
    body = "\n".join(cases)
    return f"""#compdef toolnexus
# zsh completion for toolnexus: toolnexus completion zsh > "${{fpath[1]}}/_toolnexus"
_toolnexus() {{
    local -a commands
    commands=({described})
    if (( CURRENT == 2 )); then
        _describe -t commands 'toolnexus command' commands
        compadd -- {" ".join(_top_flags(parser))}
        return
    fi
    case "${{words[2]}}" in
{body}
        *) _files ;;
    esac
}}
if [[ "${{funcstack[1]}}" == _toolnexus ]]; then
    _toolnexus "$@"
else
    compdef _toolnexus toolnexus
fi
"""


def _fish(parser: argparse.ArgumentParser) -> str:
    commands = _commands(parser)
    lines = [
        "# fish completion for toolnexus: toolnexus completion fish | source",
        "complete -c toolnexus -f",
    ]
    for flag in _top_flags(parser):
        lines.append(f"complete -c toolnexus -n '__fish_use_subcommand' -l {flag[2:]}")
    for c in commands:
        lines.append(
            f"complete -c toolnexus -n '__fish_use_subcommand' -a {c.name} -d {shlex.quote(c.help)}"
        )
        when = f"'__fish_seen_subcommand_from {c.name}'"
        for flag in c.flags:
            lines.append(f"complete -c toolnexus -n {when} -l {flag[2:]}")
        if c.choices:
            lines.append(f"complete -c toolnexus -n {when} -a {shlex.quote(' '.join(c.choices))}")
        lines.append(f"complete -c toolnexus -n {when} -F")
    return "\n".join(lines) + "\n"


def completion_script(shell: str, parser: argparse.ArgumentParser) -> str:
    """The completion script for `shell` (one of `SHELLS`), from `parser`.

    Raises:
        ValueError: `shell` is not one of `SHELLS`.
    """
    writers = {"bash": _bash, "zsh": _zsh, "fish": _fish}
    if shell not in writers:
        raise ValueError(f"no completion for {shell!r}; choose one of {', '.join(SHELLS)}")
    return writers[shell](parser)
