"""The ``callagent`` command line: one thin module per command, formatting only."""
