"""Models from elsewhere, turned into t2t-keras runs: tensor2tensor's TF1 checkpoints."""
