"""Metrics: disentanglement (InfoMEC, DCI, MIG), sparsity and concentration, and the recovery
of known sources (MCC, Amari distance). Import from the submodules."""
