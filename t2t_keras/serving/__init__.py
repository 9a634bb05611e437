"""Deprecated: the package is `t2t_keras.exporting` (the SavedModel export, the CTranslate2
conversion and their clients). This old name stays for code that imports it (a
--t2t_usr_dir's): `t2t_keras.serving.<module>` is `t2t_keras.exporting.<module>`, the same
module object, with a DeprecationWarning."""

import importlib
import sys
import warnings

warnings.warn("t2t_keras.serving is now t2t_keras.exporting; import that", DeprecationWarning,
              stacklevel=2)
for _name in ("ct2_convert", "ct2_engine", "ct2_translate", "export", "tree_ops"):
  sys.modules[f"{__name__}.{_name}"] = importlib.import_module(f"t2t_keras.exporting.{_name}")
  globals()[_name] = sys.modules[f"{__name__}.{_name}"]
