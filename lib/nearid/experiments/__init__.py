"""One module per chapter, named like its notebook and its profile: the protocol each chapter
runs, built from the science modules.

=========================  ==============================================================
``ch01_definitions``       noise and sample-size sweeps that illustrate the definitions
``ch02_isometric_dgp``     autoencoders on an isometric toy data-generating process
``ch03_bilipschitz``       MNIST autoencoders with a leaky-ReLU decoder, L against alignment
``ch04_pairs``             the model pairs of Table 1, trained or loaded, one task per pair
``ch04_alignment``         their alignment errors, the paper's ordering and its verdicts
``ch05_disentanglement``   Table 2: AE, AE + ICA and the baselines on procedural datasets
``ch06_cell_microscopy``   Tables 3/4: a simulated cell-painting screen, PCA/ICA, LightGBM
=========================  ==============================================================
"""
