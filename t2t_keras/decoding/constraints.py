"""Deprecated: a problem's output constraint is `t2t_keras.decoding.output_constraint`
("constraint" alone named two things; terminology is `decoding/lexical.py`'s terms). This
old name stays for one release for code that imports it (a --t2t_usr_dir's problem), the
same module object, with a DeprecationWarning."""

import importlib
import sys
import warnings

warnings.warn("t2t_keras.decoding.constraints is now t2t_keras.decoding.output_constraint; "
              "import that", DeprecationWarning, stacklevel=2)
sys.modules[__name__] = importlib.import_module("t2t_keras.decoding.output_constraint")
