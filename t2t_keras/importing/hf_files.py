"""A Hugging Face model directory as the hub serves it: its JSON files, and its weights
as float32 NumPy arrays under PyTorch's parameter names, whichever file holds them.

    config = read_json(hf_dir, "config.json")
    tensors, path = read_weights(hf_dir)    # {"model.shared.weight": [V, d], ...}

The weights are read from, in this order: `model.safetensors` (or the shards that
`model.safetensors.index.json` lists), parsed by the `safetensors` package, in float32,
float16 (the hub's tc-big repositories) or bfloat16; `tf_model.h5`, the
Keras 2 weights file `TF*ForConditionalGeneration.save_pretrained` wrote, its TF names
mapped to PyTorch's by `pt_name` (the scopes from `model/encoder` or `model/decoder` on,
joined with dots; any `shared` scope is `model.shared.weight`; the leaves renamed as
transformers' `convert_tf_weight_name_to_pt_weight_name` renames them: `kernel` ->
`weight` transposed, `gamma` / `beta` / `embeddings` -> `weight` / `bias` / `weight`).
`pytorch_model.bin` alone is refused: it is a pickle that only torch reads.
"""

import io
import json
import os
import re

import numpy as np

from t2t_keras import fileio
from t2t_keras.errors import InputError

SAFETENSORS, SHARD_INDEX, H5 = "model.safetensors", "model.safetensors.index.json", "tf_model.h5"
TORCH_ONLY = "pytorch_model.bin"


def read_json(hf_dir, name, required=True):
  """The JSON object in hf_dir/name; None if absent and not `required`; InputError
  naming the file if it is absent (and required) or not a JSON object."""
  path = os.path.join(hf_dir, name)
  if not fileio.exists(path):
    if required:
      raise InputError(f"{path}: no such file (a Hugging Face model directory has "
                       f"{name})")
    return None
  try:
    value = json.loads(fileio.read_text(path))
  except ValueError as e:
    raise InputError(f"{path}: not JSON ({e})") from None
  if not isinstance(value, dict):
    raise InputError(f"{path}: not a JSON object")
  return value


def weights_path(hf_dir):
  """The weights file read_weights reads; InputError naming what was looked for."""
  for name in (SHARD_INDEX, SAFETENSORS, H5):
    if fileio.exists(os.path.join(hf_dir, name)):
      return os.path.join(hf_dir, name)
  if fileio.exists(os.path.join(hf_dir, TORCH_ONLY)):
    raise InputError(
        f"{hf_dir}: only {TORCH_ONLY}, a pickle that needs torch; download the "
        f"repository's {SAFETENSORS} (the hub converts on request), or write one where "
        "torch is: AutoModelForSeq2SeqLM.from_pretrained(DIR).save_pretrained(DIR)")
  raise InputError(f"{hf_dir}: no weights ({SAFETENSORS}, {SHARD_INDEX} or {H5} looked "
                   "for)")


def _float32(tensors, path):
  out = {}
  for name, value in tensors.items():
    if not np.issubdtype(value.dtype, np.floating):
      raise InputError(f"{path}: tensor {name} is {value.dtype}, not a float")
    out[name] = value.astype(np.float32)
  return out


# safetensors' dtype names -> the NumPy dtypes they are read as (bfloat16: TensorFlow's
# NumPy type for it, which safetensors' NumPy API lacks); any other dtype is refused.
_SAFETENSORS_FLOATS = {"F64": np.float64, "F32": np.float32, "F16": np.float16}


def read_safetensors(path):
  """{name: float32 array} of one .safetensors file: float64, float32, float16 or
  bfloat16 tensors (float64 rounded to float32, the others widened exactly)."""
  from safetensors import SafetensorError, deserialize  # pylint: disable=import-outside-toplevel
  try:
    views = deserialize(fileio.read_bytes(path))
  except SafetensorError as e:
    raise InputError(f"{path}: not a safetensors file ({e})") from None
  out = {}
  for name, view in views:
    dtype = (_bfloat16() if view["dtype"] == "BF16"
             else _SAFETENSORS_FLOATS.get(view["dtype"]))
    if dtype is None:
      raise InputError(f"{path}: tensor {name} is {view['dtype']}, not a float")
    out[name] = np.frombuffer(view["data"], dtype).reshape(view["shape"]).astype(np.float32)
  return out


def _bfloat16():
  import tensorflow as tf  # pylint: disable=import-outside-toplevel
  return tf.bfloat16.as_numpy_dtype


def read_shards(index_path):
  """{name: float32 array} of every shard model.safetensors.index.json lists."""
  try:
    weight_map = json.loads(fileio.read_text(index_path))["weight_map"]
  except (ValueError, KeyError, TypeError) as e:
    raise InputError(f"{index_path}: not a safetensors index with a weight_map ({e})") from None
  if not isinstance(weight_map, dict):
    raise InputError(f"{index_path}: its weight_map is not a JSON object")
  tensors = {}
  directory = os.path.dirname(index_path)
  for shard in sorted(set(map(str, weight_map.values()))):
    path = os.path.join(directory, shard)
    if not fileio.exists(path):
      raise InputError(f"{index_path} lists {shard}, which is missing")
    for name, value in read_safetensors(path).items():
      if name in tensors:
        raise InputError(f"{path}: tensor {name} is in another shard too")
      tensors[name] = value
  return tensors


_LEAVES = {"kernel": "weight", "gamma": "weight", "beta": "bias", "embeddings": "weight",
           "weight": "weight", "bias": "bias"}


def pt_name(tf_name):
  """A TF variable name of a transformers seq2seq model -> (PyTorch name, transposed?).

  `model/tf_marian_mt_model/model/encoder/layers.0/fc1/kernel:0` ->
  (`model.encoder.layers.0.fc1.weight`, True); the shared table (`model.shared/...`,
  or `shared/weight` in older files) -> `model.shared.weight`; `final_logits_bias`
  keeps its name. Names of no known place come back unchanged (and are then reported
  as left over)."""
  parts = tf_name.replace(":0", "").split("/")
  if parts[-1] == "final_logits_bias":
    return "final_logits_bias", False
  if any(p in ("model.shared", "shared") for p in parts[:-1]):
    return "model.shared.weight", False
  for i, part in enumerate(parts):
    if part in ("encoder", "decoder") and i and parts[i - 1] == "model" and \
        parts[-1] in _LEAVES:
      rest = parts[i:-1] + [_LEAVES[parts[-1]]]
      return "model." + ".".join(rest), parts[-1] == "kernel"
  return tf_name, False


def read_h5(path):
  """{PyTorch name: float32 array} of a Keras 2 weights file (`pt_name`'s mapping)."""
  import h5py  # pylint: disable=import-outside-toplevel
  tensors = {}
  try:
    with h5py.File(io.BytesIO(fileio.read_bytes(path)), "r") as f:
      datasets = []
      f.visititems(lambda name, obj: datasets.append(name)
                   if isinstance(obj, h5py.Dataset) else None)
      for name in datasets:
        key, transpose = pt_name(name)
        value = np.asarray(f[name])
        if key in tensors:
          raise InputError(f"{path}: two tensors map to {key} (one is {name})")
        tensors[key] = value.T if transpose else value
  except OSError as e:
    raise InputError(f"{path}: not an HDF5 weights file ({e})") from None
  return _float32(tensors, path)


def read_weights(hf_dir):
  """({PyTorch name: float32 array}, the file read) of hf_dir (`weights_path`)."""
  path = weights_path(hf_dir)
  if path.endswith(SHARD_INDEX):
    return read_shards(path), path
  if path.endswith(".h5"):
    return read_h5(path), path
  return read_safetensors(path), path


def numbered(names):
  """Names sorted with their layer numbers as numbers (layers.2 before layers.10)."""
  return sorted(names, key=lambda n: [int(t) if t.isdigit() else t
                                      for t in re.split(r"(\d+)", n)])
