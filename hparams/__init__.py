"""Built-in hparams sets; importing this package registers them."""

from t2t_keras.hparams import transformer  # noqa: F401
from t2t_keras.hparams import table3_cpu  # noqa: F401
from t2t_keras.hparams import parsing  # noqa: F401
