"""The ``nearid`` command line: ``main`` (book, run, data, params) and ``align``."""
