"""The acxfs test suite. A package, so that tests and the scripts import their helpers as
``tests.support`` from the repository root, with no change to ``sys.path``.

Laid out like the code: ``tests/<package>/test_<behaviour>.py`` for the packages of acxfs
(``formats/acx``, ``formats/azp``, ``mount``, ``library``, ``trust``, ``safe``, ``signing``,
``cli``, ``content``, ``views``); the benches, the fuzzer and the checks of the repository's
own shape stay at the top. Tests that mount, start daemons or run agents are marked ``slow``;
``python -m pytest -m "not slow"`` is the fast lane."""
