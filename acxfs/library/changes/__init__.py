"""How the library changes: the plan of a change (links to make, re-point and remove, the
state after it) and the journal that carries it out under the library's lock.

Invariant: a change is worked out completely before its first step, then carried out
through one journaled intent that a later command finishes or undoes.
"""
