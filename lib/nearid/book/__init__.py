"""The book machinery: chapter profiles, the papermill runner, results files, the run
environment (device, seeds, threads) and the figure style. Science and experiment modules
never import from here; chapters and the command line do."""
