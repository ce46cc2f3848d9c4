"""Real coding agents for the tests: the runs of `scripts.agent_runs` (headless Claude Code and
Codex against loopback mocks of their model APIs) and the agents' own skill listings
(`scripts.agent_runs.listings`), re-exported here under their names.

Invariant: an agent run here reaches nothing but its mock (`scripts.agent_runs.runs`): a
network namespace of its own with only loopback and the relay to the mock of the calling
process, proxies pointing at a closed port, an environment of only the variables set here,
every run bounded by a timeout.
"""

from __future__ import annotations

from scripts.agent_runs.listings import GEMINI_SETTINGS as GEMINI_SETTINGS
from scripts.agent_runs.listings import LISTING_ARGS as LISTING_ARGS
from scripts.agent_runs.listings import PARSERS as PARSERS
from scripts.agent_runs.listings import Listed as Listed
from scripts.agent_runs.listings import copilot_listed as copilot_listed
from scripts.agent_runs.listings import gemini_listed as gemini_listed
from scripts.agent_runs.listings import listed_skills as listed_skills
from scripts.agent_runs.listings import listing_env as listing_env
from scripts.agent_runs.listings import opencode_listed as opencode_listed
from scripts.agent_runs.mocks import RUN_TIMEOUT as RUN_TIMEOUT
from scripts.agent_runs.mocks import AnthropicMock as AnthropicMock
from scripts.agent_runs.mocks import MockAPI as MockAPI
from scripts.agent_runs.mocks import Recorded as Recorded
from scripts.agent_runs.mocks import Reply as Reply
from scripts.agent_runs.mocks import ResponsesMock as ResponsesMock
from scripts.agent_runs.relay import PORT_TOKEN as PORT_TOKEN
from scripts.agent_runs.relay import loopback_up as loopback_up
from scripts.agent_runs.relay import namespace_problem as namespace_problem
from scripts.agent_runs.runs import CLOSED_PROXY as CLOSED_PROXY
from scripts.agent_runs.runs import AgentRun as AgentRun
from scripts.agent_runs.runs import agent_binary as agent_binary
from scripts.agent_runs.runs import agent_problem as agent_problem
from scripts.agent_runs.runs import agents_dir as agents_dir
from scripts.agent_runs.runs import base_env as base_env
from scripts.agent_runs.runs import binary_path as binary_path
from scripts.agent_runs.runs import claude_env as claude_env
from scripts.agent_runs.runs import claude_first_request as claude_first_request
from scripts.agent_runs.runs import claude_skills as claude_skills
from scripts.agent_runs.runs import codex_first_request as codex_first_request
from scripts.agent_runs.runs import codex_skills as codex_skills
from scripts.agent_runs.runs import first_request as first_request
from scripts.agent_runs.runs import pinned_version as pinned_version
from scripts.agent_runs.runs import start_agent as start_agent
from scripts.agent_runs.runs import start_claude as start_claude
from scripts.agent_runs.runs import start_codex as start_codex
from scripts.agent_runs.skill_lists import CLAUDE_SKILLS_HEADER as CLAUDE_SKILLS_HEADER
from scripts.agent_runs.skill_lists import CODEX_SKILLS_HEADER as CODEX_SKILLS_HEADER
from scripts.agent_runs.skill_lists import claude_skill_lists as claude_skill_lists
from scripts.agent_runs.skill_lists import claude_skills_in as claude_skills_in
from scripts.agent_runs.skill_lists import codex_skill_files as codex_skill_files
from scripts.agent_runs.skill_lists import codex_skills_in as codex_skills_in
