"""Choosing among runs and checkpoints: checkpoint averaging, window and decoding
selection on dev, and sweeps of hparams rows (t2t-avg-all, t2t-sweep).

Uses training and decoding as libraries; nothing in training/ or decoding/ imports it.
"""
