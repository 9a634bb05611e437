"""t2t-keras: the Transformer of "Attention Is All You Need" on TensorFlow 2 and Keras 3.

    import t2t_keras
    translator = t2t_keras.load("runs/tiny")
    translator.translate("one hundred and five").text
    t2t_keras.train(output_dir="runs/tiny", generate_data=True)

`import t2t_keras` loads no TensorFlow: `load` and `train` do, on first use
(`t2t_keras/library/`; docs/library.md).
"""

__version__ = "0.1.0"

__all__ = ["load", "train", "InputError", "Translation", "Candidate", "Attention",
           "TrainingResult", "__version__"]

_LAZY = {"InputError": "t2t_keras.errors", "Translation": "t2t_keras.library.results",
         "Candidate": "t2t_keras.library.results", "Attention": "t2t_keras.library.results",
         "TrainingResult": "t2t_keras.library.results"}


def load(path, **kwargs):
  """A Translator of the model at `path`: `t2t_keras.library.load`."""
  from t2t_keras import library  # pylint: disable=import-outside-toplevel
  return library.load(path, **kwargs)


def train(**kwargs):
  """What t2t-trainer runs: `t2t_keras.library.train`."""
  from t2t_keras import library  # pylint: disable=import-outside-toplevel
  return library.train(**kwargs)


def __getattr__(name):
  if name in _LAZY:
    import importlib  # pylint: disable=import-outside-toplevel
    return getattr(importlib.import_module(_LAZY[name]), name)
  raise AttributeError(f"module 't2t_keras' has no attribute {name!r}")
