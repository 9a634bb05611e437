"""A tensor2tensor `transformer` checkpoint -> a t2t-keras run directory.

    import_run("t2t_train/ende", "runs/ende",
               vocab_path="t2t_data/vocab.translate_ende_wmt8k.8192.subwords")
    run = runs.load("runs/ende")      # decodes, fine-tunes, exports and serves as any run

Every model variable of the checkpoint is read by its t2t name (`variable_map`
lists them for a model); optimizer state (`training/...`, Adam's slots,
`global_step`, t2t's loss averages) is left behind. A variable the model has no
place for, one missing, or one of another shape stops the import with one line.
The conventions read from t2t's source are in docs/migrating.md.
"""

import os
import re
import tempfile

import numpy as np
import tensorflow as tf

from t2t_keras import fileio, runs
from t2t_keras.data import t2t_subwords
from t2t_keras.data import vocabulary as vocab_lib
from t2t_keras.errors import InputError
from t2t_keras.importing import t2t_hparams

_MODALITY = re.compile(r"^transformer/(symbol_modality_(\d+)_(\d+)[^/]*)/"
                       r"(shared|input_emb|target_emb|softmax)/weights_(\d+)$")
# Not part of the model: optimizer state, the step counter, t2t's loss averages.
_NOT_MODEL = re.compile(r"^(global_step|training/.*|losses_avg/.*|train_stats/.*|.*beta[12]_power"
                        r"|.*/(Adam|Adam_1|Momentum)|.*adafactor.*)$")


def model_names(reader):
  """{t2t name: shape} of the checkpoint's model variables (optimizer state left out)."""
  return {n: s for n, s in reader.get_variable_to_shape_map().items() if not _NOT_MODEL.match(n)}


def _modality_shards(names):
  """{scope ("shared", "input_emb", ...): [t2t names of weights_0, weights_1, ...]} and the
  modality's (vocab_size, hidden_size) from its name symbol_modality_<V>_<d>."""
  shards, sizes = {}, set()
  for name in names:
    match = _MODALITY.match(name)
    if match:
      sizes.add((int(match.group(2)), int(match.group(3))))
      shards.setdefault(match.group(4), []).append((int(match.group(5)), name))
  if len(sizes) != 1:
    raise InputError("the checkpoint has no transformer/symbol_modality_<vocab>_<hidden>/"
                     "weights_<i> variables" if not sizes else
                     f"the checkpoint has symbol modalities of several sizes {sorted(sizes)}: "
                     "t2t-keras imports one vocabulary shared by inputs and targets")
  return {k: [n for _, n in sorted(v)] for k, v in shards.items()}, sizes.pop()


def _embedding_scopes(hparams):
  """{our attribute: the modality scope it reads}: "shared" for every role when t2t shared
  them; else input_emb / target_emb / softmax, or (t2t 1.15's shared_embedding) one
  "shared" for both embeddings and "softmax" for the projection."""
  if hparams.shared_embedding_and_softmax_weights:
    return {"embedding": "shared"}
  if hparams.shared_source_target_embedding:
    return {"embedding": "shared", "softmax_table": "softmax"}
  return {"embedding": "input_emb", "target_table": "target_emb", "softmax_table": "softmax"}


def _t2t_shape(variable_shape, kind):
  """The t2t shape of one of our variables: attention projections are 2-D there."""
  if kind == "qkv":  # ours [d, h, k]
    return [variable_shape[0], variable_shape[1] * variable_shape[2]]
  if kind == "output":  # ours [h, v, d]
    return [variable_shape[0] * variable_shape[1], variable_shape[2]]
  return list(variable_shape)


def _attention(prefix, attention):
  return [(f"{prefix}/multihead_attention/{t2t}/kernel", dense.kernel, kind)
          for t2t, dense, kind in (("q", attention.query_dense, "qkv"),
                                   ("k", attention.key_dense, "qkv"),
                                   ("v", attention.value_dense, "qkv"),
                                   ("output_transform", attention.output_dense, "output"))]


def _norm(prefix, norm, scope="layer_prepostprocess"):
  """A LayerNorm's two variables; t2t's scope is layer_prepostprocess for a norm applied
  before a sublayer (and the stacks' final ones), layer_postprocess after it."""
  return [(f"{prefix}/{scope}/layer_norm/layer_norm_scale", norm.gamma, None),
          (f"{prefix}/{scope}/layer_norm/layer_norm_bias", norm.beta, None)]


def _ffn(prefix, ffn):
  return [(f"{prefix}/conv1/kernel", ffn.filter_dense.kernel, None),
          (f"{prefix}/conv1/bias", ffn.filter_dense.bias, None),
          (f"{prefix}/conv2/kernel", ffn.output_dense.kernel, None),
          (f"{prefix}/conv2/bias", ffn.output_dense.bias, None)]


def variable_map(model):
  """[(t2t name, our variable, kind)] for every variable of `model` but its embeddings
  (`_modality_shards`), kind "qkv" / "output" where the shapes differ (`_t2t_shape`)."""
  body = "transformer/body"
  scope = "layer_prepostprocess" if model.pre_norm else "layer_postprocess"
  pairs = []
  for i, layer in enumerate(model.encoder_layers):
    p = f"{body}/encoder/layer_{i}"
    pairs += _attention(f"{p}/self_attention", layer.self_attention)
    pairs += _norm(f"{p}/self_attention", layer.self_attention_residual.layer_norm, scope)
    pairs += _ffn(f"{p}/ffn", layer.ffn) + _norm(f"{p}/ffn", layer.ffn_residual.layer_norm, scope)
  for i, layer in enumerate(model.decoder_layers):
    p = f"{body}/decoder/layer_{i}"
    for part in ("self_attention", "encdec_attention"):
      pairs += _attention(f"{p}/{part}", getattr(layer, part))
      pairs += _norm(f"{p}/{part}", getattr(layer, f"{part}_residual").layer_norm, scope)
    pairs += _ffn(f"{p}/ffn", layer.ffn) + _norm(f"{p}/ffn", layer.ffn_residual.layer_norm, scope)
  if model.pre_norm:
    pairs += _norm(f"{body}/encoder", model.encoder_norm)
    pairs += _norm(f"{body}/decoder", model.decoder_norm)
  if model.target_space is not None:
    pairs.append((f"{body}/target_space_embedding/kernel", model.target_space.embeddings, None))
  return pairs


def _assign(variable, value, name, kind=None):
  """variable <- value, t2t's shape checked (`_t2t_shape`; conv1d kernels' 1s dropped)."""
  squeezed = [s for s in value.shape if s != 1] if value.ndim > 2 else list(value.shape)
  if squeezed != _t2t_shape(variable.shape, kind):
    raise InputError(f"the checkpoint's {name} has shape {list(value.shape)}; the model of "
                     f"hparams.json and the vocabulary needs {_t2t_shape(variable.shape, kind)}")
  variable.assign(value.reshape(variable.shape).astype(np.float32))


def trained_target_spaces(reader):
  """Rows of target_space_embedding/kernel whose optimizer moments are non-zero (the
  rows training fed; a row never fed keeps moments of exactly 0), or None when the
  checkpoint holds no optimizer state for it."""
  slots = [n for n in reader.get_variable_to_shape_map()
           if "target_space_embedding/kernel/" in n and _NOT_MODEL.match(n)]
  if not slots:
    return None
  used = np.zeros(reader.get_tensor(slots[0]).shape[0], bool)
  for name in slots:
    used |= np.abs(reader.get_tensor(name)).reshape(len(used), -1).sum(axis=1) > 0
  return [int(i) for i in np.nonzero(used)[0]]


def load_weights(model, reader):
  """Assigns every model variable of the t2t checkpoint (`reader`) to `model` (a built
  Transformer of `t2t_hparams.to_hparams`' hparams). InputError naming the first missing
  variable, a shape mismatch, or the variables left over."""
  names = model_names(reader)
  used = set()
  shards, (vocab_size, hidden) = _modality_shards(names)
  if vocab_size != model.vocab_size or hidden != model.hparams.hidden_size:
    raise InputError(f"the checkpoint's embeddings are symbol_modality_{vocab_size}_{hidden}, "
                     f"the vocabulary has {model.vocab_size} ids and hparams.json "
                     f"hidden_size={model.hparams.hidden_size}")
  for attribute, scope in _embedding_scopes(model.hparams).items():
    if scope not in shards:
      raise InputError(f"the checkpoint has no symbol_modality_*/{scope}/weights_* "
                       f"(it has {', '.join(sorted(shards))}), which hparams.json's "
                       "shared_embedding_and_softmax_weights / shared_embedding ask for")
    table = np.concatenate([reader.get_tensor(n) for n in shards[scope]], axis=0)
    _assign(getattr(model, attribute).embeddings, table, f"symbol_modality_*/{scope}")
    used.update(shards[scope])
  for name, variable, kind in variable_map(model):
    if name not in names:
      raise InputError(f"the checkpoint has no {name}, which the model of its "
                       f"hparams.json needs (is hparams.json this checkpoint's?)")
    _assign(variable, reader.get_tensor(name), name, kind)
    used.add(name)
  left = sorted(set(names) - used)
  if left:
    raise InputError(f"{len(left)} checkpoint variable(s) the model has no place for: "
                     f"{', '.join(left[:5])}{' ...' if len(left) > 5 else ''}")


def checkpoint_paths(t2t_dir, checkpoint_path=None, all_checkpoints=False):
  """The t2t checkpoint prefixes to import, oldest first: --checkpoint_path, else the
  newest of t2t_dir's `checkpoint` index (every one listed with all_checkpoints).
  Prefixes recorded on another machine are looked up by name in t2t_dir."""
  if checkpoint_path:
    if not runs.checkpoint_is_readable(checkpoint_path):
      raise InputError(f"--checkpoint_path={checkpoint_path}: no readable checkpoint there "
                       "(give a prefix such as DIR/model.ckpt-250000, not a file)")
    return [checkpoint_path]
  state = tf.train.get_checkpoint_state(t2t_dir)
  listed = list(state.all_model_checkpoint_paths) if state else []
  if state and state.model_checkpoint_path not in listed:
    listed.append(state.model_checkpoint_path)
  local = [os.path.join(t2t_dir, os.path.basename(p)) for p in listed]
  readable = runs.readable_checkpoints(local)
  if not readable:
    raise InputError(f"--t2t_dir={t2t_dir}: no readable checkpoint listed in its checkpoint "
                     "file (give --checkpoint_path)")
  return readable if all_checkpoints else readable[-1:]


def find_vocabulary(t2t_dir, given=None):
  """--vocab, else the one tensor2tensor vocabulary (`vocab.*`) in t2t_dir."""
  if given:
    if not fileio.exists(given):
      raise InputError(f"--vocab={given}: no such file")
    return given
  found = [p for p in fileio.glob(os.path.join(t2t_dir, "vocab.*"))
           if t2t_subwords.is_subwords_file(p)]
  if len(found) != 1:
    raise InputError(f"give --vocab: the problem's .subwords vocabulary (t2t-datagen wrote "
                     f"it into its --data_dir); {t2t_dir} holds "
                     f"{'none' if not found else ', '.join(found)}")
  return found[0]


def _step(reader, path):
  """t2t's global_step of a checkpoint, else the N of its name model.ckpt-N (else 0)."""
  if reader.has_tensor("global_step"):
    return int(reader.get_tensor("global_step"))
  match = re.search(r"-(\d+)$", path)
  return int(match.group(1)) if match else 0


def import_run(t2t_dir, output_dir, *, checkpoint_path=None, all_checkpoints=False,
               vocab_path=None, problem=None, target_space_id=None, log=print):
  """Writes output_dir as a t2t-keras run of t2t_dir's `transformer` checkpoint(s).

  Returns the written checkpoint prefixes (output_dir/ckpt-<t2t's global step>).
  InputError (one line) for a setting, variable or vocabulary that does not fit.
  """
  if fileio.exists(os.path.join(output_dir, runs.RUN_FILE)):
    raise InputError(f"--output_dir={output_dir} already holds a run ({runs.RUN_FILE}); "
                     "give a new directory")
  settings = t2t_hparams.read_t2t_dir(t2t_dir)
  model_name = settings.flags.get("model", "transformer")
  if model_name != "transformer":
    raise InputError(f"unsupported t2t model {model_name!r} ({t2t_hparams.FLAGS_FILE}): "
                     "t2t-import reads tensor2tensor's 'transformer'")
  problem = t2t_hparams.resolve_problem(settings, problem)
  paths = checkpoint_paths(t2t_dir, checkpoint_path, all_checkpoints)
  vocab_path = find_vocabulary(t2t_dir, vocab_path)
  vocab = vocab_lib.load(vocab_path)
  newest = runs.checkpoint_reader(paths[-1])
  space = 0  # 1.15's use_target_space_embedding=False: no target-space row at all
  if settings.hparams.get("use_target_space_embedding", True):
    space = t2t_hparams.target_space_id(problem, target_space_id, trained_target_spaces(newest))
  hparams = t2t_hparams.to_hparams(settings.hparams, space)
  model = runs.build_model(hparams, vocab.vocab_size)
  load_weights(model, newest)  # every check before anything is written
  manager = tf.train.CheckpointManager(tf.train.Checkpoint(model=model), output_dir,
                                       max_to_keep=None)
  written = []
  for path in paths:
    reader = runs.checkpoint_reader(path)
    load_weights(model, reader)
    step = _step(reader, path)
    written.append(manager.save(checkpoint_number=step))
    log(f"imported {path} (step {step}) -> {written[-1]}")
  # The vocabulary stored plain (as t2t-datagen writes it), so a warm start from this run
  # accepts the vocabulary file of a t2t data_dir byte for byte; run.json last, so a
  # killed import leaves no run.json and can be run again.
  with tempfile.TemporaryDirectory() as tmp:
    plain = os.path.join(tmp, runs.VOCAB_FILE)
    fileio.write_atomic(plain, t2t_subwords.read_plain(vocab_path))
    runs.save_run_info(output_dir, hparams, problem, vocab.vocab_size, plain, imported_from={
        "t2t_dir": t2t_dir, "checkpoints": paths, "target_space_id": space,
        "vocab": vocab_path})
  return written
