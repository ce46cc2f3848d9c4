"""`acxfs completion bash|zsh`: the script the real command prints, sourced in a real bash
(driven through COMP_WORDS/COMP_CWORD, as bash's own completion calls it) completes
subcommands, nested ones, options, option values and paths; the zsh script parses, registers
itself with compinit and answers the same from its `words`.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from acxfs.cli import build_parser
from acxfs.cli.completion import commands
from scripts.mounting import acxfs


def _script(shell: str, tmp_path: Path) -> Path:
    done = acxfs("completion", shell)
    assert done.returncode == 0 and done.stderr == "", done
    path = tmp_path / f"acxfs.{shell}"
    path.write_text(done.stdout)
    return path


def bash_completions(script: Path, cases: list[list[str]],
                     cwd: Path | None = None) -> list[list[str]]:
    """What the completion function offers for each list of words (the last one being
    completed), in one bash."""
    program = [f"source '{script}'"]
    for words in cases:
        quoted = " ".join("'" + w.replace("'", "'\\''") + "'" for w in words)
        program += [f"COMP_WORDS=({quoted}); COMP_CWORD={len(words) - 1}; COMPREPLY=()",
                    "_acxfs; printf '%s\\n' \"${COMPREPLY[@]}\" '@end'"]
    done = subprocess.run(["bash", "--norc", "--noprofile", "-c", "\n".join(program)],
                          capture_output=True, text=True, timeout=30, cwd=cwd, check=False)
    assert done.returncode == 0 and done.stderr == "", done
    answers = done.stdout.split("@end\n")
    assert answers[-1] == "" and len(answers) == len(cases) + 1, done.stdout
    return [[line for line in answer.splitlines() if line] for answer in answers[:-1]]


def bash_complete(script: Path, *words: str, cwd: Path | None = None) -> list[str]:
    return bash_completions(script, [list(words)], cwd)[0]


def test_bash_completes_subcommands_options_and_their_values(tmp_path) -> None:
    script = _script("bash", tmp_path)
    assert bash_complete(script, "acxfs", "ver") == ["verify"]
    assert bash_complete(script, "acxfs", "trust", "l") == ["list"]
    assert bash_complete(script, "acxfs", "verify", "--j") == ["--json"]
    assert bash_complete(script, "acxfs", "trust", "list", "--") == ["--help", "--json"]
    assert bash_complete(script, "acxfs", "mount", "--backend", "") == [
        "libfuse2", "libfuse3", "libfuse3-lowlevel"]
    assert bash_complete(script, "acxfs", "ls", "--min-trust", "=", "p") == ["portable"]
    assert bash_complete(script, "acxfs", "completion", "") == ["bash", "zsh"]
    assert bash_complete(script, "acxfs", "add", "--timeout", "") == []  # a number
    # an option's value is not a command word: `ls` stays the command
    assert bash_complete(script, "acxfs", "ls", "--min-trust", "portable", "x", "--j") == [
        "--json"]


def test_bash_completes_paths_where_a_command_takes_a_file(tmp_path) -> None:
    script = _script("bash", tmp_path)
    (tmp_path / "research.acx").write_bytes(b"")
    (tmp_path / "keys").mkdir()
    assert bash_complete(script, "acxfs", "verify", "res", cwd=tmp_path) == ["research.acx"]
    assert bash_complete(script, "acxfs", "verify", "x.acx", "--registry", "k",
                         cwd=tmp_path) == ["keys"]
    assert bash_complete(script, "acxfs", "status", "res", cwd=tmp_path) == []


def test_every_command_and_option_is_in_the_script(tmp_path) -> None:
    table = list(commands(build_parser()))
    cases = [["acxfs", *c.path.split(), word] for c in table for word in ("", "-")]
    answers = iter(bash_completions(_script("bash", tmp_path), cases))
    for command in table:
        subs, options = next(answers), next(answers)
        if command.subs:
            assert subs == list(command.subs), command.path
        assert options == list(command.options), command.path


ZSH = shutil.which("zsh")
needs_zsh = pytest.mark.skipif(ZSH is None, reason="zsh is not installed (scripts/setup.sh)")

# The completion system's functions, stubbed to print what they were given.
_ZSH_STUBS = """\
_describe() { print -rl -- "${(@P)4}" }
compadd() { print -rl -- "${(@P)2}" }
_files() { print -r -- @files }
"""


def zsh(program: str) -> str:
    assert ZSH is not None
    done = subprocess.run([ZSH, "-f", "-c", program], capture_output=True, text=True,
                          timeout=30, check=False)
    assert done.returncode == 0 and done.stderr == "", done
    return done.stdout


@needs_zsh
def test_zsh_script_parses_and_registers_with_compinit(tmp_path) -> None:
    script = _script("zsh", tmp_path)
    assert script.read_text().startswith("#compdef acxfs\n")
    assert ZSH is not None
    parsed = subprocess.run([ZSH, "-n", str(script)], capture_output=True, text=True,
                            timeout=30, check=False)
    assert (parsed.returncode, parsed.stderr) == (0, "")
    functions = tmp_path / "functions"
    functions.mkdir()
    shutil.copy(script, functions / "_acxfs")
    registered = zsh(f"fpath=('{functions}' $fpath); autoload -U compinit; "
                     f"compinit -u -d '{tmp_path}/zcompdump'; print -r -- $_comps[acxfs]")
    assert registered == "_acxfs\n"


@needs_zsh
def test_zsh_answers_from_its_words(tmp_path) -> None:
    script = _script("zsh", tmp_path)

    def answer(*words: str) -> list[str]:
        array = " ".join("'" + w + "'" for w in words)
        return zsh(f"compdef() {{ }}; source '{script}'\n{_ZSH_STUBS}"
                   f"words=({array}); CURRENT={len(words)}; _acxfs").splitlines()

    assert [line.split(":")[0] for line in answer("acxfs", "trust", "")] == [
        "add", "list", "remove"]
    assert "--json:print the result as JSON" in answer("acxfs", "verify", "--j")
    assert answer("acxfs", "ls", "--min-trust", "") == ["verified", "portable", "legacy"]
    assert answer("acxfs", "verify", "") == ["@files"]
