"""The skills library at scale, side by side in one run: N single-skill bundles installed as

    library             `acxfs add` into the library: one daemon, a link per skill and agent
    library, whole      the same after `acxfs layout whole`: each agent directory one link to
                        a view of the mount, every skill a real directory in it
    per-bundle mounts   one `acxfs mount` (one daemon) per bundle at ~/.claude/skills/<skill>
    copies behind links `acxfs extract --skill` of each at the real path the library's links
                        point to, but in a plain directory, behind links like the library's
                        (its links and layout without the daemon)
    plain copies        `acxfs extract --skill` of each into ~/.agents/skills/<skill> (the floor)

For each N (default 10, 50, 200) it measures the daemons' RSS (VmRSS, summed over daemons) after
start-up and after reading every SKILL.md, start-up until every link resolves, adding one more
small bundle (its full check included; not for the copies behind links), and a cold read of
every SKILL.md through the agent directories; at the largest N, the start-up of Claude Code and
Codex (to their first model request, against a loopback mock) and of Gemini CLI and OpenCode (to
the end of their own skill listing) with both libraries, the copies behind links and plain copies,
cold and warm.
A Markdown table of medians goes to stdout, every raw figure to `--json`.

Invariant: nothing outside one temporary directory is touched. Every column runs with its own
HOME, XDG_* directories and trust store inside it, and on any exit (failure, Ctrl-C, SIGTERM)
every daemon started there is stopped, every mount there unmounted and the directory removed.

    python3 -m scripts.bench_library --quick              # CI smoke test, about a minute
    python3 -m scripts.bench_library --json bench-out/library.json

Modules: `config` (columns, measures, the run's configuration), `system` (commands, daemons,
isolated homes, cleanup), `bundles` (the single-skill cartridges), `columns` (the five ways to
install), `measuring` (one rep, one N, the run), `startup` (the agents' start-up), `report`
(table, targets, JSON), `__main__` (arguments and the run). `profile` (with `probe` and
`ftrace`) is a separate command: where each millisecond of `up` and of a cold first read goes.
"""
