"""The served SavedModel: which version, its signatures and metadata, and calls.

    model = ServedModel.load("runs/tiny")    # a run dir, export/, or export/<version>
    model.run("serving_default", {"inputs": ["one hundred"]})
    # -> {"outputs": array([b"..."]), "scores": array([...]), "truncated": array([False])}
"""

import json
import os

import numpy as np
import tensorflow as tf
import tensorflow_text  # noqa: F401  (registers the sentencepiece ops of the export)
from google.protobuf import json_format
from tensorflow.core.protobuf import saved_model_pb2

from t2t_keras import __version__
from t2t_keras.server.quoting import shown


class NotFound(Exception):
  """An unknown signature (HTTP 400, TF Serving's answer)."""


def versions_in(directory):
  """Numbered subdirectories of `directory` holding a saved_model.pb, highest first."""
  names = [n.rstrip("/") for n in tf.io.gfile.listdir(directory)]
  versions = sorted((int(n) for n in names if n.isdigit()), reverse=True)
  return [v for v in versions
          if tf.io.gfile.exists(os.path.join(directory, str(v), "saved_model.pb"))]


def resolve(path):
  """(SavedModel directory, version) from a version dir, its parent, or a run dir's export/.

  FileNotFoundError naming the places looked at when none holds a SavedModel.
  """
  if tf.io.gfile.exists(os.path.join(path, "saved_model.pb")):
    name = os.path.basename(os.path.normpath(path))
    return path, int(name) if name.isdigit() else 1
  base = version_base(path)
  if base is None:
    raise FileNotFoundError(
        f"no SavedModel in {path}, its numbered subdirectories or {path}/export/<version> "
        f"(t2t-exporter writes one)")
  version = versions_in(base)[0]
  return os.path.join(base, str(version)), version


def version_base(path):
  """The directory of numbered versions `resolve(path)` chooses from (path or path/export),
  or None where `path` is a SavedModel itself or holds none."""
  if tf.io.gfile.exists(os.path.join(path, "saved_model.pb")):
    return None
  for parent in (path, os.path.join(path, "export")):
    if tf.io.gfile.isdir(parent) and versions_in(parent):
      return parent
  return None


class ServedModel:
  """One loaded SavedModel version and what TF Serving's REST API says about it."""

  def __init__(self, path, version, loaded, signature_defs, export_info):
    self.path = path
    self.version = version
    self._loaded = loaded
    self.signature_defs = signature_defs  # name -> SignatureDef as TF Serving's JSON
    self.export_info = export_info  # assets/export_info.json, {} when absent

  @classmethod
  def load(cls, path):
    """Loads the newest version under `path` (see `resolve`)."""
    path, version = resolve(path)
    proto = saved_model_pb2.SavedModel()
    with tf.io.gfile.GFile(os.path.join(path, "saved_model.pb"), "rb") as f:
      proto.ParseFromString(f.read())
    # The signatures whose inputs are all strings: what TF Serving's predict formats carry
    # here (`rest.py`). The exporter's "sample" (a scalar int32 seed) is left to the
    # SavedModel's own callers and to TF Serving.
    defs = {name: json_format.MessageToDict(sig, preserving_proto_field_name=True)
            for name, sig in proto.meta_graphs[0].signature_def.items()
            if not name.startswith("__") and all(
                t.dtype == tf.string.as_datatype_enum for t in sig.inputs.values())}
    info_path = os.path.join(path, "assets", "export_info.json")
    info = {}
    if tf.io.gfile.exists(info_path):
      with tf.io.gfile.GFile(info_path) as f:
        info = json.load(f)
    return cls(path, version, tf.saved_model.load(path), defs, info)

  @property
  def target_languages(self):
    """A multilingual export's target languages (export_info.json), () for a bilingual one."""
    return tuple(self.export_info.get("target_languages", ()))

  def signature(self, name):
    """The concrete function of signature `name`; NotFound listing the known ones."""
    if name not in self.signature_defs:
      raise NotFound(f"Serving signature name: \"{shown(name)}\" not found in signature def; "
                     f"known: {', '.join(sorted(self.signature_defs))}")
    return self._loaded.signatures[name]

  def input_names(self, name):
    """The signature's input names, sorted."""
    return sorted(self.signature_defs[name].get("inputs", {}))

  def list_inputs(self, name):
    """The signature's inputs of rank 2 ([batch, C] strings: a list per instance)."""
    inputs = self.signature_defs[name].get("inputs", {})
    return sorted(k for k, v in inputs.items()
                  if len(v.get("tensor_shape", {}).get("dim", [])) == 2)

  def output_names(self, name):
    """The signature's output names, sorted (TF Serving's order in row responses)."""
    return sorted(self.signature_defs[name].get("outputs", {}))

  def mergeable(self, name):
    """Whether calls of signature `name` may be merged: every output's rows have a fixed
    shape ([batch] or [batch, beam]), so a request's rows do not depend on its neighbours."""
    for output in self.signature_defs[name].get("outputs", {}).values():
      shape = output.get("tensor_shape", {})
      if shape.get("unknown_rank") or any(
          int(d.get("size", -1)) < 0 for d in shape.get("dim", [])[1:]):
        return False
    return True

  def run(self, name, inputs):
    """Calls signature `name` with {input: list of bytes}; returns {output: np.ndarray}.

    An input is a [batch] string tensor, or for a list input ([batch, C]: `list_inputs`)
    a list of lists of bytes, padded with b"" to the longest.
    """
    function = self.signature(name)
    list_inputs = self.list_inputs(name)
    tensors = {}
    for k, v in inputs.items():
      if k in list_inputs:
        width = max([0] + [len(row) for row in v])
        rows = [list(row) + [b""] * (width - len(row)) for row in v]
        tensors[k] = tf.constant(rows, tf.string, shape=[len(v), width])
      else:
        tensors[k] = tf.constant(v, tf.string, shape=[len(v)])
    return {k: v.numpy() for k, v in function(**tensors).items()}

  def metadata(self, model_name):
    """TF Serving's GetModelMetadataResponse as JSON (the signature defs); a multilingual
    export's also lists its "target_languages" beside them (the web page's choice), a
    language-token model's its "language_tokens" ({code: token}: the page then sends lines
    to the `target_language` signature, each led by its source language's token), and
    "t2t_keras" gives the versions of this server and of the program that exported it
    (None for an export that does not say)."""
    metadata = {"signature_def": {"signature_def": self.signature_defs},
                "t2t_keras": {"server_version": __version__,
                              "export_version": self.export_info.get("t2t_keras_version")}}
    if self.target_languages:
      metadata["target_languages"] = list(self.target_languages)
    if self.export_info.get("language_tokens"):
      metadata["language_tokens"] = dict(self.export_info["language_tokens"])
    return {"model_spec": {"name": model_name, "signature_name": "",
                           "version": str(self.version)},
            "metadata": metadata}


def as_json_value(value):
  """A numpy scalar or array -> JSON-ready Python (bytes as UTF-8 text, invalid bytes
  replaced by U+FFFD)."""
  if isinstance(value, np.ndarray):
    return [as_json_value(v) for v in value]
  if isinstance(value, bytes):
    return value.decode("utf-8", errors="replace")
  if isinstance(value, np.generic):
    return value.item()
  return value
