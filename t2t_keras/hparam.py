"""Deprecated: the frozen HParams type lives in `t2t_keras.hparams_lib`.

Kept for `--t2t_usr_dir` modules written against the old name (tensor2tensor's users
import `tensor2tensor.utils.hparam` the same way); it re-exports the same classes.
"""

import warnings

from t2t_keras.hparams_lib import HParams, HParamsError  # noqa: F401

warnings.warn("t2t_keras.hparam is deprecated; import HParams and HParamsError from "
              "t2t_keras.hparams_lib", DeprecationWarning, stacklevel=2)
