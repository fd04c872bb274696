"""The book machinery: chapter profiles, the papermill runner, results files and the figure
style. Science and experiment modules never import from here; chapters and the command line
do. (The run environment, device, seeds and threads, is :mod:`nearid.env`.)"""
