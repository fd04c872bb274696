"""Metrics: disentanglement (InfoMEC, DCI, MIG), sparsity and concentration. Import from the submodules."""
