"""Built-in hparams sets; importing this package registers them."""

from t2t_keras.hparams import transformer  # noqa: F401
