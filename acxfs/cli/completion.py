"""`acxfs completion bash|zsh`: a shell completion script generated from the parser itself.

Invariant: the script knows exactly the parser's commands, options, option values (choices;
numbers take none; anything else is a path) and nothing else, so it cannot drift from the
command line; every word it holds comes from acxfs's own parser and is quoted for the shell.
Both scripts share the same lookup functions (plain `case` statements, which bash and zsh
read alike); only the function that answers the shell differs.
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Iterator
from dataclasses import dataclass

from acxfs.cli.common import SubParsers, add_command

FILES = "@files"  # the value is a path
NONE = "@none"  # the value is not completed (a number)
_WORD = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]*|-[A-Za-z0-9-]+")


@dataclass(frozen=True)
class Command:
    """One command of the parser: its words after `acxfs`, and what may follow them."""

    path: str  # "" for acxfs itself, "trust add" for a nested one
    subs: dict[str, str]  # subcommand -> its summary
    options: dict[str, str]  # option string -> its help
    values: dict[str, str]  # option taking a value -> its choices, FILES or NONE; "": positionals


def _one_line(text: str | None) -> str:
    return " ".join((text or "").split())


def _value(action: argparse.Action) -> str:
    if action.choices is not None:
        return " ".join(str(c) for c in action.choices)
    return NONE if action.type in (int, float) else FILES


def commands(parser: argparse.ArgumentParser, path: str = "") -> Iterator[Command]:
    """`parser`'s command and every one below it, depth first."""
    subs: dict[str, str] = {}
    nested: list[tuple[str, argparse.ArgumentParser]] = []
    options: dict[str, str] = {}
    values: dict[str, str] = {}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {a.dest: _one_line(a.help) for a in action._choices_actions}
            for name, sub in action.choices.items():
                subs[name] = helps.get(name, "")
                nested.append((name, sub))
        elif action.option_strings:
            for option in action.option_strings:
                options[option] = _one_line(action.help)
                if action.nargs != 0:
                    values[option] = _value(action)
        elif action.choices is not None or "" not in values:
            values[""] = _value(action)
    values.setdefault("", NONE)  # no operand: nothing to complete but options
    yield Command(path, subs, options, values)
    for name, sub in nested:
        yield from commands(sub, f"{path} {name}".strip())


def _quote(text: str) -> str:
    return "'" + text.replace("'", "'\\''") + "'"


def _words(words: list[str]) -> str:
    for word in words:
        if word not in (FILES, NONE) and not _WORD.fullmatch(word):
            raise ValueError(f"not a word a completion script may hold: {word!r}")
    return _quote(" ".join(words))


def _function(name: str, cases: dict[str, str], arguments: str = '"$1"') -> list[str]:
    lines = [f"{name}() {{", f"    case {arguments} in"]
    lines += [f"        {_quote(key)}) printf '%s\\n' {value};;" for key, value in cases.items()
              if value != "''"]
    lines += ["        *) return 1;;", "    esac", "}"]
    return lines


def _described(entries: dict[str, str]) -> str:
    """zsh `_describe` entries (NAME:SUMMARY), one per line, as one quoted word."""
    return _quote("\n".join(f"{_words([n])[1:-1]}:{h}" if h else _words([n])[1:-1]
                            for n, h in entries.items()))


def lookups(parser: argparse.ArgumentParser) -> list[str]:
    """The shell functions both scripts use: subcommands, options and values of a command."""
    table = list(commands(parser))
    values = {f"{c.path}|{opt}": _words(v.split()) for c in table for opt, v in c.values.items()}
    lines = ["# acxfs's commands, generated from its parser (acxfs completion)"]
    lines += _function("_acxfs_subs", {c.path: _words(list(c.subs)) for c in table})
    lines += _function("_acxfs_opts", {c.path: _words(list(c.options)) for c in table})
    lines += _function("_acxfs_value", values, '"$1|$2"')
    lines += _function("_acxfs_sub_descs", {c.path: _described(c.subs) for c in table})
    lines += _function("_acxfs_opt_descs", {c.path: _described(c.options) for c in table})
    return lines


# The command path: the words that name subcommands, skipping each option's value.
_WALK = """\
    local cmd='' word i skip=0
    for ((i = {first}; i < {current}; i++)); do
        word=${{{words}[i]}}
        if ((skip)); then skip=0; continue; fi
        if [[ $word == -* ]]; then
            [[ $word != *=* ]] && _acxfs_value "$cmd" "$word" >/dev/null && skip=1
            continue
        fi
        [[ " $(_acxfs_subs "$cmd") " == *" $word "* ]] && cmd=${{cmd:+$cmd }}$word
    done
"""

BASH = """\
_acxfs_reply() {
    case "$1" in
        @none) COMPREPLY=();;
        @files) compopt -o filenames 2>/dev/null; COMPREPLY=($(compgen -f -- "$2"));;
        *) COMPREPLY=($(compgen -W "$1" -- "$2"));;
    esac
}

_acxfs() {
@WALK@    local cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD-1]}
    if ((skip)); then
        _acxfs_reply "$(_acxfs_value "$cmd" "$prev")" "$cur"
    elif [[ $prev == "=" && ${COMP_WORDS[COMP_CWORD-2]} == -* ]]; then
        _acxfs_reply "$(_acxfs_value "$cmd" "${COMP_WORDS[COMP_CWORD-2]}")" "$cur"
    elif [[ $cur == -* ]]; then
        COMPREPLY=($(compgen -W "$(_acxfs_opts "$cmd")" -- "$cur"))
    elif _acxfs_subs "$cmd" >/dev/null; then
        COMPREPLY=($(compgen -W "$(_acxfs_subs "$cmd")" -- "$cur"))
    else
        _acxfs_reply "$(_acxfs_value "$cmd" '')" "$cur"
    fi
    return 0
}

complete -F _acxfs acxfs
""".replace("@WALK@", _WALK.format(first=1, current="COMP_CWORD", words="COMP_WORDS"))

ZSH = """\
_acxfs_answer() {
    local -a found
    case "$1" in
        @none) return 1;;
        @files) _files;;
        *) found=(${=1}); compadd -a found;;
    esac
}

_acxfs() {
@WALK@    local cur=${words[CURRENT]} prev=${words[CURRENT-1]}
    local -a described
    if ((skip)); then
        _acxfs_answer "$(_acxfs_value "$cmd" "$prev")"
    elif [[ $cur == -*=* ]]; then
        local opt=${cur%%=*}
        compset -P '*='
        _acxfs_answer "$(_acxfs_value "$cmd" "$opt")"
    elif [[ $cur == -* ]]; then
        described=("${(@f)$(_acxfs_opt_descs "$cmd")}")
        _describe -t options 'acxfs option' described
    elif _acxfs_subs "$cmd" >/dev/null; then
        described=("${(@f)$(_acxfs_sub_descs "$cmd")}")
        _describe -t commands 'acxfs command' described
    else
        _acxfs_answer "$(_acxfs_value "$cmd" '')"
    fi
}

if [[ ${zsh_eval_context[-1]} == loadautofunc ]]; then
    _acxfs "$@"
else
    compdef _acxfs acxfs
fi
""".replace("@WALK@", _WALK.format(first=2, current="CURRENT", words="words"))

HEADERS = {
    "bash": "# bash completion for acxfs: eval \"$(acxfs completion bash)\" in ~/.bashrc, or\n"
            "# acxfs completion bash > ~/.local/share/bash-completion/completions/acxfs",
    "zsh": "#compdef acxfs\n# zsh completion for acxfs: acxfs completion zsh > a directory of "
           "$fpath, as _acxfs\n# (then compinit), or source <(acxfs completion zsh) after "
           "compinit",
}


def script(parser: argparse.ArgumentParser, shell: str) -> str:
    """The completion script of `parser` for `shell` (bash or zsh)."""
    body = BASH if shell == "bash" else ZSH
    return "\n".join([HEADERS[shell], "", *lookups(parser), "", body])


def add_commands(subs: SubParsers, root: argparse.ArgumentParser) -> None:
    p = add_command(subs, "completion", "print a bash or zsh completion script for acxfs",
                    'eval "$(acxfs completion bash)"           # in ~/.bashrc\n'
                    "  acxfs completion zsh > ~/.zfunc/_acxfs     # a directory of $fpath",
                    cmd_completion)
    p.add_argument("shell", choices=sorted(HEADERS), metavar="bash|zsh")
    p.set_defaults(root=root)


def cmd_completion(args: argparse.Namespace) -> int:
    print(script(args.root, args.shell), end="")
    return 0
