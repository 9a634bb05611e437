"""Models; importing this package registers them."""

from t2t_keras.models.transformer import Transformer  # noqa: F401
