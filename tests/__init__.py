"""The acxfs test suite. A package, so that tests and the scripts import their helpers as
``tests.support`` from the repository root, with no change to ``sys.path``."""
