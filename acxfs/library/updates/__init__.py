"""Keeping the library current: releases fetched from sources, `acxfs update`, and the
checks `acxfs refresh` and the daemon's timer run.

Invariant: what a source says is discovery, never trust: every release it names is installed
only through the same fully checked path as a file, and a source that lies or goes away
changes nothing installed.
"""
