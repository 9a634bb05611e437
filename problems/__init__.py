"""Built-in problems; importing this package registers them."""

from t2t_keras.problems import algorithmic  # noqa: F401
from t2t_keras.problems import multi30k  # noqa: F401
from t2t_keras.problems import multilingual  # noqa: F401
from t2t_keras.problems import numbers  # noqa: F401
from t2t_keras.problems import parallel_text  # noqa: F401
from t2t_keras.problems import parsing  # noqa: F401
from t2t_keras.problems import wmt  # noqa: F401
from t2t_keras.problems import wmt14_sample  # noqa: F401
