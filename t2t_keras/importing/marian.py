"""A Marian (OPUS-MT) transformer -> a t2t-keras run directory.

    import_run("opus-mt-en-de", "runs/opus-en-de")   # an unpacked OPUS-MT release
    run = runs.load("runs/opus-en-de")    # decodes, fine-tunes, exports and serves as any run

Reads the model's `.npz` (its `special:model.yml` entry gives the architecture), the
joint `vocab.yml` and `source.spm` / `target.spm`; writes the weights as a checkpoint and
the three vocabulary files as one pair file (`data/marian_vocab.py`). A setting that does
not map is refused with one line naming its key. The conventions read from Marian's
source (marian-dev: `src/models/transformer.h`, `src/layers/`, `src/data/`) and where
CTranslate2 and Hugging Face compute otherwise are in docs/migrating.md.
"""

import io
import os
import tempfile

import numpy as np
import tensorflow as tf
import yaml

from t2t_keras import fileio, registry, runs
from t2t_keras.data import marian_vocab
from t2t_keras.errors import InputError
from t2t_keras.ids import PAD_ID

CONFIG_ENTRY = "special:model.yml"
# Settings of model.yml that change the computation, and the values that map (a key
# absent from an older Marian's file has its default, the first value).
_SUPPORTED = {
    "type": ("transformer",),
    "transformer-decoder-autoreg": ("self-attention",),
    "transformer-ffn-depth": (2,),
    "transformer-decoder-ffn-depth": (0, 2),
    "transformer-no-projection": (False,),
    "transformer-postprocess-emb": ("d", ""),
    "transformer-tied-layers": ([], None, ""),
    "transformer-train-position-embeddings": (False,),
    "transformer-disable-position-embeddings": (False,),
    "transformer-no-bias": (False,),
    "transformer-no-affine": (False,),
    "transformer-attention-mask": ("", None),
    "transformer-alibi-shift": (False,),
    "transformer-pool": (False,),
    "right-left": (False,),
    "ulr": (False,),
    "lemma-dim-emb": (0,),
    "factors-dim-emb": (0,),
}
_ACTIVATIONS = ("swish", "relu")
# (transformer-preprocess, transformer-postprocess, transformer-postprocess-top) -> norm_type
_NORMS = {("", "dan", ""): "post", ("n", "da", "n"): "pre"}


def read_config(text, name):
  """special:model.yml's text -> dict; InputError naming `name` if it is not YAML."""
  try:
    config = yaml.safe_load(text)
  except yaml.YAMLError as e:
    raise InputError(f"{name}: {CONFIG_ENTRY} is not YAML ({str(e).splitlines()[0]})") from None
  if not isinstance(config, dict):
    raise InputError(f"{name}: {CONFIG_ENTRY} is not a YAML map")
  return config


def read_npz(path):
  """(the model's parameters {name: float array}, its model.yml dict) from a Marian .npz.
  The config entry is int8 bytes ending in NUL (newer Marian pads it to 256-byte
  multiples with more NULs)."""
  try:
    with np.load(io.BytesIO(fileio.read_bytes(path))) as npz:
      params = {name: npz[name] for name in npz.files}
  except (OSError, ValueError) as e:
    raise InputError(f"{path}: not a NumPy .npz file ({e})") from None
  if CONFIG_ENTRY not in params:
    raise InputError(f"{path}: no {CONFIG_ENTRY!r} entry; is it a Marian model (not a "
                     "*.optimizer.npz)?")
  text = params.pop(CONFIG_ENTRY).astype(np.uint8).tobytes().rstrip(b"\0").decode("utf-8")
  return params, read_config(text, path)


def _check_supported(config):
  """InputError naming the first model.yml key whose value does not map."""
  for key, allowed in _SUPPORTED.items():
    value = config.get(key, allowed[0])
    if value not in allowed:
      raise InputError(f"{CONFIG_ENTRY}: {key}: {value!r} is not supported (t2t-import "
                       f"--from=marian reads {allowed[0]!r})")
  activation = config.get("transformer-ffn-activation", "swish")
  if activation not in _ACTIVATIONS:
    raise InputError(f"{CONFIG_ENTRY}: transformer-ffn-activation: {activation!r} is not "
                     f"supported (supported: {', '.join(_ACTIVATIONS)})")
  dim_ffn = config.get("transformer-dim-ffn", 2048)
  if config.get("transformer-decoder-dim-ffn", 0) not in (0, dim_ffn):
    raise InputError(f"{CONFIG_ENTRY}: transformer-decoder-dim-ffn: "
                     f"{config['transformer-decoder-dim-ffn']} differs from "
                     f"transformer-dim-ffn: {dim_ffn} (one FFN width for both stacks)")
  vocabs = config.get("dim-vocabs") or []
  if len(set(vocabs)) > 1:
    raise InputError(f"{CONFIG_ENTRY}: dim-vocabs: {vocabs}: source and target vocabularies "
                     "of different sizes are not supported (one joint vocab.yml)")


def norm_type(config):
  """"post" or "pre" from the three process strings; InputError for other sequences."""
  key = tuple(str(config.get(k, d) or "") for k, d in (
      ("transformer-preprocess", ""), ("transformer-postprocess", "dan"),
      ("transformer-postprocess-top", "")))
  if key not in _NORMS:
    raise InputError(f"{CONFIG_ENTRY}: transformer-preprocess / -postprocess / "
                     f"-postprocess-top {key} are not supported (post-norm: '', 'dan', ''; "
                     "pre-norm: 'n', 'da', 'n')")
  return _NORMS[key]


def sharing(config):
  """Marian's tied-embeddings settings -> our embedding hparams."""
  if config.get("tied-embeddings-all", False):
    return dict(shared_embedding_and_softmax_weights=True)
  if config.get("tied-embeddings-src", False):
    return dict(shared_embedding_and_softmax_weights=False, shared_source_target_embedding=True)
  if config.get("tied-embeddings", False):
    return dict(shared_embedding_and_softmax_weights=True, separate_source_embedding=True)
  return dict(shared_embedding_and_softmax_weights=False, shared_source_target_embedding=False)


def to_hparams(config, pad_added, overrides=None):
  """model.yml -> our HParams (transformer_base's training settings, Marian's model);
  `overrides` ("a=1,b=2") last, e.g. CTranslate2's conventions (docs/migrating.md)."""
  _check_supported(config)
  d, heads = int(config.get("dim-emb", 512)), int(config.get("transformer-heads", 8))
  if d % heads:
    raise InputError(f"{CONFIG_ENTRY}: dim-emb: {d} is not a multiple of "
                     f"transformer-heads: {heads}")
  hparams = registry.hparams("transformer_base").replace(
      hidden_size=d, num_heads=heads, filter_size=int(config.get("transformer-dim-ffn", 2048)),
      num_encoder_layers=int(config.get("enc-depth", 6)),
      num_decoder_layers=int(config.get("dec-depth", 6)),
      norm_type=norm_type(config), norm_epsilon=1e-6, pos="timing_t2t",
      zero_pad_embedding=True, attention_bias=True,
      ffn_activation=config.get("transformer-ffn-activation", "swish"),
      logit_bias=not config.get("output-omit-bias", False),
      softmax_excludes_pad=bool(pad_added), **sharing(config))
  return hparams.override(overrides) if overrides else hparams


def _embedding_names(hparams, params):
  """{our attribute: Marian's name} of the embedding tables (Marian names its table "Wemb"
  when the source shares it, else encoder_Wemb / decoder_Wemb; an untied output matrix is
  decoder_ff_logit_out_Wt [V, D], or [D, V] _W in old models)."""
  if hparams.shared_embedding_and_softmax_weights:
    if hparams.separate_source_embedding:
      return {"embedding": "decoder_Wemb", "source_table": "encoder_Wemb"}
    return {"embedding": "Wemb"}
  output = ("decoder_ff_logit_out_Wt" if "decoder_ff_logit_out_Wt" in params
            else "decoder_ff_logit_out_W")
  if hparams.shared_source_target_embedding:
    return {"embedding": "Wemb", "softmax_table": output}
  return {"embedding": "encoder_Wemb", "target_table": "decoder_Wemb", "softmax_table": output}


_PROJECTIONS = (("q", "query"), ("k", "key"), ("v", "value"), ("o", "output"))


def variable_map(model):
  """[(Marian name, our variable)] of every variable but the embeddings and the output
  bias; layers are numbered from 1 in Marian's names, pre-norm's LayerNorms end in _pre."""
  ln = "_pre" if model.pre_norm else ""

  def block(prefix, attention, residual):
    dense = [(x, getattr(attention, f"{name}_dense")) for x, name in _PROJECTIONS]
    return ([(f"{prefix}_W{x}", layer.kernel) for x, layer in dense] +
            [(f"{prefix}_b{x}", layer.bias) for x, layer in dense] +
            [(f"{prefix}_Wo_ln_scale{ln}", residual.layer_norm.gamma),
             (f"{prefix}_Wo_ln_bias{ln}", residual.layer_norm.beta)])

  def ffn(prefix, layer):
    return [(f"{prefix}_W1", layer.ffn.filter_dense.kernel),
            (f"{prefix}_b1", layer.ffn.filter_dense.bias),
            (f"{prefix}_W2", layer.ffn.output_dense.kernel),
            (f"{prefix}_b2", layer.ffn.output_dense.bias),
            (f"{prefix}_ffn_ln_scale{ln}", layer.ffn_residual.layer_norm.gamma),
            (f"{prefix}_ffn_ln_bias{ln}", layer.ffn_residual.layer_norm.beta)]

  pairs = []
  for i, layer in enumerate(model.encoder_layers, start=1):
    pairs += block(f"encoder_l{i}_self", layer.self_attention, layer.self_attention_residual)
    pairs += ffn(f"encoder_l{i}_ffn", layer)
  for i, layer in enumerate(model.decoder_layers, start=1):
    pairs += block(f"decoder_l{i}_self", layer.self_attention, layer.self_attention_residual)
    pairs += block(f"decoder_l{i}_context", layer.encdec_attention,
                   layer.encdec_attention_residual)
    pairs += ffn(f"decoder_l{i}_ffn", layer)
  if model.pre_norm:
    for side, norm in (("encoder", model.encoder_norm), ("decoder", model.decoder_norm)):
      pairs += [(f"{side}_top_ln_scale", norm.gamma), (f"{side}_top_ln_bias", norm.beta)]
  return pairs


def _assign(variable, value, name):
  """variable <- value (Marian's [1, n] biases and [D, D] projections reshaped)."""
  if value.size != int(np.prod(variable.shape)):
    raise InputError(f"the model's {name} has shape {list(value.shape)}; its model.yml "
                     f"asks for {list(variable.shape)} values")
  variable.assign(value.reshape(variable.shape).astype(np.float32))


def reorder_rows(table, marian_ids):
  """Marian's rows [V, ...] in our id order; zeros for an added PAD (id -1)."""
  out = np.zeros((len(marian_ids),) + table.shape[1:], np.float32)
  known = np.asarray(marian_ids) >= 0
  out[known] = table[np.asarray(marian_ids)[known]]
  return out


def load_weights(model, params, vocab):
  """Assigns every Marian parameter to `model` (a built Transformer of `to_hparams`),
  embedding rows and the output bias reordered to our ids (`vocab`: the run's
  `MarianVocabulary`; the source table in its source side's ids, the rest in its target
  side's). InputError naming a missing parameter, one of another size, or those left
  over."""
  used = set()

  def take(name):
    if name not in params:
      raise InputError(f"the model has no parameter {name}, which its model.yml needs")
    used.add(name)
    return params[name]

  marian_ids = vocab.target.marian_ids
  if vocab.separate and model.source_embedding is model.target_embedding:
    raise InputError("the model ties its source and target embeddings (tied-embeddings-all "
                     "or tied-embeddings-src), so one table cannot hold the two id spaces "
                     "of separate source and target vocabularies")
  vocab_rows = len(marian_ids) - int(marian_ids[PAD_ID] < 0)
  for attribute, name in _embedding_names(model.hparams, params).items():
    table = take(name)
    if name == "decoder_ff_logit_out_W":  # legacy untransposed [D, V]
      table = table.T
    if table.shape[0] != vocab_rows:
      raise InputError(f"the model's {name} has {table.shape[0]} rows; the vocabulary "
                       f"(vocab.yml) has {vocab_rows} entries")
    layer = getattr(model, attribute)
    ids = vocab.source.marian_ids if layer is model.source_embedding else marian_ids
    _assign(layer.embeddings, reorder_rows(table, ids), name)
  if model.hparams.logit_bias:
    _assign(model.softmax_embedding.bias,
            reorder_rows(take("decoder_ff_logit_out_b").reshape(-1), marian_ids),
            "decoder_ff_logit_out_b")
  for name, variable in variable_map(model):
    _assign(variable, take(name), name)
  left = sorted(set(params) - used)
  if left:
    raise InputError(f"{len(left)} parameter(s) the model has no place for: "
                     f"{', '.join(left[:5])}{' ...' if len(left) > 5 else ''}")


def _one(found, what, flag):
  if len(found) != 1:
    raise InputError(f"give {flag}: {what} ({'none' if not found else ', '.join(found)} "
                     "found)")
  return found[0]


def find_files(marian_dir, npz=None, vocab=None, source_spm=None, target_spm=None,
               target_vocab=None):
  """{"npz", "vocab", "target_vocab", "source_spm", "target_spm"}: the given paths, else
  those of marian_dir: decoder.yml's model and vocabularies (OPUS-MT's releases have one;
  two different vocabularies are separate source and target ones), else its one *.npz
  (not *.optimizer.npz) and one *vocab.yml, or one *.src.vocab.yml and one
  *.trg.vocab.yml; source.spm and target.spm. "target_vocab" is None for a joint
  vocabulary."""
  join = lambda name: os.path.join(marian_dir, name)  # noqa: E731
  listed = {}
  if marian_dir and fileio.exists(join("decoder.yml")):
    decoder = yaml.safe_load(fileio.read_text(join("decoder.yml"))) or {}
    models, vocabs = decoder.get("models") or [], decoder.get("vocabs") or []
    if models:
      listed["npz"] = join(os.path.basename(models[0]))
    if vocabs:
      names = [join(os.path.basename(v)) for v in vocabs]
      listed["vocab"] = names[0]
      if len(vocabs) > 1 and names[1] != names[0]:  # [source, target]
        listed["target_vocab"] = names[1]
  pattern = lambda p: sorted(fileio.glob(join(p))) if marian_dir else []  # noqa: E731
  if not (vocab or listed.get("vocab")):
    sides = [pattern("*.src.vocab.yml"), pattern("*.trg.vocab.yml")]
    if all(len(found) == 1 for found in sides) and len(pattern("*vocab.yml")) == 2:
      listed["vocab"], listed["target_vocab"] = sides[0][0], sides[1][0]
  files = {
      "npz": npz or listed.get("npz") or _one(
          [p for p in pattern("*.npz") if not p.endswith(".optimizer.npz")],
          "the model's .npz", "--marian_npz"),
      "vocab": vocab or listed.get("vocab") or _one(pattern("*vocab.yml"), "the joint "
                                                    "vocab.yml", "--marian_vocab"),
      "target_vocab": target_vocab or (None if vocab else listed.get("target_vocab")),
      "source_spm": source_spm or join("source.spm"),
      "target_spm": target_spm or join("target.spm"),
  }
  for key, flag in (("npz", "--marian_npz"), ("vocab", "--marian_vocab"),
                    ("target_vocab", "--marian_target_vocab"),
                    ("source_spm", "--source_spm"), ("target_spm", "--target_spm")):
    if key == "target_vocab" and files[key] is None:
      continue
    if not files[key] or not fileio.exists(files[key]):
      raise InputError(f"{flag}={files[key]}: no such file")
  if files["vocab"].endswith(".fsv"):
    raise InputError(f"--marian_vocab={files['vocab']}: factored vocabularies (.fsv) are "
                     "not supported")
  return files


def import_run(marian_dir, output_dir, *, files=None, problem="translate_parallel_text",
               overrides=None, log=print):
  """Writes output_dir as a t2t-keras run of a Marian model (`find_files`' files, or
  `files` as it returns them). Returns the written checkpoint prefix. InputError (one
  line) for a setting, parameter or vocabulary that does not fit; nothing is written
  before every check has passed."""
  if fileio.exists(os.path.join(output_dir, runs.RUN_FILE)):
    raise InputError(f"--output_dir={output_dir} already holds a run ({runs.RUN_FILE}); "
                     "give a new directory")
  files = files or find_files(marian_dir)
  params, config = read_npz(files["npz"])
  vocab_data = [fileio.read_bytes(files[k]) for k in ("source_spm", "target_spm", "vocab")]
  target_vocab = files.get("target_vocab")
  with tempfile.TemporaryDirectory() as tmp:
    pair = os.path.join(tmp, runs.VOCAB_FILE)
    marian_vocab.write_archive(
        pair, *vocab_data,
        target_vocab_yml=fileio.read_bytes(target_vocab) if target_vocab else None)
    vocab = marian_vocab.MarianVocabulary(pair, vocab_name=files["vocab"],
                                          target_vocab_name=target_vocab)
    hparams = to_hparams(config, vocab.pad_added, overrides)
    model = runs.build_model(hparams, vocab.vocab_size)
    load_weights(model, params, vocab)  # every check before anything is written
    # The checkpoint first, run.json last: a killed import leaves no run.json.
    manager = tf.train.CheckpointManager(tf.train.Checkpoint(model=model), output_dir,
                                         max_to_keep=None)
    written = manager.save(checkpoint_number=0)
    runs.save_run_info(output_dir, hparams, problem, vocab.vocab_size, pair,
                       imported_from={"marian": dict(files), "pad_added": vocab.pad_added})
  log(f"imported {files['npz']} -> {written}")
  return written
