"""Real coding agents run headless against loopback mocks of their model APIs: shared by the
tests (`tests.support.agents`, which adds the agents' own skill listings) and the library
benchmark's start-up rows (`scripts.bench_library.startup`).

Modules: `runs` (the pinned agents, one run of Claude Code or Codex, its first model request),
`mocks` (the mock APIs, recording every request), `skill_lists` (the skills a model request
lists), `relay` (run inside the agent's loopback-only namespace; standard library only).
"""
