"""An M2M-100 or NLLB-200 model in Hugging Face's layout (`facebook/m2m100_418M`,
`facebook/nllb-200-distilled-600M` and kin: both `model_type: m2m_100`) -> a t2t-keras run.

    import_run("m2m100_418M", "runs/m2m100")   # a directory as the hub serves it
    run = runs.load("runs/m2m100")
    translate_lines(run.model, run.vocab, ["__en__ Hello"], settings, prefixes=["__fr__"])

Reads `config.json`, the weights (`hf_files.read_weights`), `vocab.json` (fairseq's
dictionary: <s> 0, <pad> 1, </s> 2, <unk> 3, then the pieces), `sentencepiece.bpe.model`
(the segmentation of both sides) and the language tokens (`__fr__`: the
`additional_special_tokens` of tokenizer_config.json or special_tokens_map.json, in the
order M2M100Tokenizer numbers them, after vocab.json's ids), the rows after them unused
(fairseq's `madeupword`s). The vocabulary becomes the pair file of the Marian import with
the language tokens as its labels (`data/marian_vocab.py`): a line's leading language token
is one piece, and output text leaves them out.

NLLB's directory has no vocab.json: its ids are the sentencepiece model's plus one
(`NllbTokenizer`'s fairseq_offset: spm's <unk> 0, <s> 1, </s> 2 become 3, 0, 2, <pad> is 1),
and the language tokens (`fra_Latn`) and <mask> follow at the ids tokenizer_config.json's
`added_tokens_decoder` gives them (transformers writes it since 4.34).

The conventions, from transformers' `models/m2m_100/modeling_m2m_100.py` and
`tokenization_m2m_100.py`, each in docs/migrating.md: pre-norm with a final LayerNorm in
each stack, LayerNorm epsilon 1e-5, embeddings times sqrt(d_model), fairseq's sinusoids
(`pos=timing_t2t`) from position padding_idx + 1 = 2 (`position_offset`), attention and FFN
biases, no logit bias, the decoder starting from </s> (`decoder_start_id`); a source is
`__src__ words </s>`, the target language forced as the decoder's first token.
"""

import os

import sentencepiece
import yaml

from t2t_keras import fileio, registry
from t2t_keras.errors import InputError
from t2t_keras.ids import EOS_ID
from t2t_keras.importing import hf_files, hf_marian, marian

SPM = "sentencepiece.bpe.model"
TOKENIZER_FILES = ("tokenizer_config.json", "special_tokens_map.json")
# The fairseq dictionary's first entries (`M2M100Tokenizer`), and what config.json must say.
_SPECIAL = {"<s>": 0, "<pad>": 1, "</s>": 2, "<unk>": 3}
_IDS = {"pad_token_id": 1, "eos_token_id": 2, "decoder_start_token_id": 2}
_ACTIVATIONS = {"relu": "relu", "swish": "swish", "silu": "swish"}


def check_config(config):
  """InputError naming the first config.json key whose value does not map."""
  for key, wanted in _IDS.items():
    if config.get(key) != wanted:
      raise InputError(f"config.json: {key}: {config.get(key)!r} is not supported "
                       f"(M2M-100's is {wanted})")
  if not config.get("scale_embedding", True):
    raise InputError("config.json: scale_embedding: false is not supported (M2M-100 "
                     "scales its embeddings by sqrt(d_model))")
  activation = config.get("activation_function", "relu")
  if activation not in _ACTIVATIONS:
    raise InputError(f"config.json: activation_function: {activation!r} is not supported "
                     f"(supported: {', '.join(_ACTIVATIONS)})")
  for a, b in (("encoder_attention_heads", "decoder_attention_heads"),
               ("encoder_ffn_dim", "decoder_ffn_dim")):
    if config.get(a) != config.get(b):
      raise InputError(f"config.json: {a}: {config.get(a)} differs from {b}: "
                       f"{config.get(b)} (one value for both stacks)")
  if not config.get("tie_word_embeddings", True):
    raise InputError("config.json: tie_word_embeddings: false is not supported (M2M-100 "
                     "ties its output to its embeddings)")


def to_hparams(config, overrides=None):
  """config.json -> our HParams (transformer_base's training settings, M2M-100's model)."""
  check_config(config)
  d, heads = int(config["d_model"]), int(config["encoder_attention_heads"])
  if d % heads or d % 2:
    raise InputError(f"config.json: d_model: {d} is not an even multiple of "
                     f"encoder_attention_heads: {heads}")
  hparams = registry.hparams("transformer_base").replace(
      hidden_size=d, num_heads=heads, filter_size=int(config["encoder_ffn_dim"]),
      num_encoder_layers=int(config["encoder_layers"]),
      num_decoder_layers=int(config["decoder_layers"]), norm_type="pre", norm_epsilon=1e-5,
      pos="timing_t2t", position_offset=config["pad_token_id"] + 1,
      decoder_start_id=EOS_ID, attention_bias=True,
      ffn_activation=_ACTIVATIONS[config.get("activation_function", "relu")],
      layer_prepostprocess_dropout=float(config.get("dropout", 0.1)),
      attention_dropout=float(config.get("attention_dropout", 0.0)),
      relu_dropout=float(config.get("activation_dropout", 0.0)),
      max_length=int(config.get("max_position_embeddings", 1024)))
  return hparams.override(overrides) if overrides else hparams


def language_tokens(hf_dir):
  """The language tokens in id order: the first of TOKENIZER_FILES that lists
  `additional_special_tokens` (strings, or added-token objects with "content")."""
  for name in TOKENIZER_FILES:
    value = hf_files.read_json(hf_dir, name, required=False) or {}
    tokens = value.get("additional_special_tokens")
    if tokens:
      return [t["content"] if isinstance(t, dict) else str(t) for t in tokens]
  raise InputError(f"{hf_dir}: no language tokens (additional_special_tokens in "
                   f"{' or '.join(TOKENIZER_FILES)})")


def pieces_by_id(hf_dir, config):
  """(every id's piece: vocab.json's (NLLB: `nllb_pieces`), the language tokens, then
  `madeupword`s up to vocab_size; the language tokens). InputError where vocab.json is not
  fairseq's dictionary or the counts do not add up to config.json's vocab_size."""
  if not fileio.exists(os.path.join(hf_dir, "vocab.json")):
    return nllb_pieces(hf_dir, config)
  entries = hf_files.read_json(hf_dir, "vocab.json")
  path = os.path.join(hf_dir, "vocab.json")
  for piece, wanted in _SPECIAL.items():
    if entries.get(piece) != wanted:
      raise InputError(f"{path}: {piece!r} has id {entries.get(piece)!r}, not fairseq's "
                       f"{wanted}")
  pieces = [None] * len(entries)
  for piece, i in entries.items():
    if not isinstance(i, int) or not 0 <= i < len(entries) or pieces[i] is not None:
      raise InputError(f"{path}: {piece!r} has id {i!r}; the {len(entries)} entries must "
                       f"have the ids 0 .. {len(entries) - 1}, each once")
    pieces[i] = piece
  languages = language_tokens(hf_dir)
  unused = int(config["vocab_size"]) - len(pieces) - len(languages)
  if unused < 0 or set(languages) & set(entries):
    raise InputError(f"{path} has {len(pieces)} entries and the tokenizer "
                     f"{len(languages)} language tokens; config.json's vocab_size is "
                     f"{config['vocab_size']}")
  return pieces + languages + [f"madeupword{i:04d}" for i in range(unused)], languages


def _spm_pieces(hf_dir):
  """The pieces of hf_dir's sentencepiece model, by its ids; InputError where it is missing."""
  path = os.path.join(hf_dir, SPM)
  if not fileio.exists(path):
    raise InputError(f"{path}: no such file (the model's segmentation)")
  processor = sentencepiece.SentencePieceProcessor(model_proto=fileio.read_bytes(path))
  return [processor.id_to_piece(i) for i in range(processor.get_piece_size())]


def nllb_pieces(hf_dir, config):
  """`pieces_by_id` for NLLB (no vocab.json): <s> <pad> </s> <unk>, the sentencepiece
  model's pieces after its first three (id = spm id + 1), then tokenizer_config.json's
  added tokens above them in id order, then `madeupword`s up to vocab_size. InputError
  for a tokenizer this does not read: legacy_behaviour (`words </s> lang`), no
  added_tokens_decoder, or ids that do not follow one another."""
  tokenizer = hf_files.read_json(hf_dir, "tokenizer_config.json", required=False) or {}
  path = os.path.join(hf_dir, "tokenizer_config.json")
  if tokenizer.get("legacy_behaviour"):
    raise InputError(f"{path}: legacy_behaviour: true frames a source `words </s> lang`; "
                     "only the default framing (false: `lang words </s>`) is supported")
  spm = _spm_pieces(hf_dir)
  if spm[:3] != ["<unk>", "<s>", "</s>"]:
    raise InputError(f"{os.path.join(hf_dir, SPM)}: its first pieces are {spm[:3]}, not "
                     "<unk> <s> </s> (the ids NllbTokenizer shifts by one)")
  pieces = list(_SPECIAL) + spm[3:]
  added = tokenizer.get("added_tokens_decoder")
  if not isinstance(added, dict):
    raise InputError(f"{path} has no added_tokens_decoder (the language tokens' ids); save "
                     "the tokenizer again with transformers >= 4.34 (AutoTokenizer."
                     "from_pretrained(DIR).save_pretrained(DIR))")
  extra = {}
  for key, token in added.items():
    i, content = int(key), token.get("content") if isinstance(token, dict) else token
    if i < len(_SPECIAL) and content != pieces[i]:
      raise InputError(f"{path}: added token {i} is {content!r}, not {pieces[i]!r}")
    if i >= len(pieces):
      extra[i] = content
  if sorted(extra) != list(range(len(pieces), len(pieces) + len(extra))):
    raise InputError(f"{path}: the added tokens' ids {min(extra, default=None)} .. "
                     f"{max(extra, default=None)} do not follow the sentencepiece model's "
                     f"{len(pieces)} ids one by one")
  pieces += [extra[i] for i in sorted(extra)]
  languages = language_tokens(hf_dir)
  missing = [t for t in languages if t not in extra.values()]
  unused = int(config["vocab_size"]) - len(pieces)
  if missing or unused < 0:
    raise InputError(f"{path}: {len(pieces)} ids with the added tokens ({len(missing)} "
                     f"language token(s) not among them); config.json's vocab_size is "
                     f"{config['vocab_size']}")
  return pieces + [f"madeupword{i:04d}" for i in range(unused)], languages


def load_weights(model, tensors, marian_ids):
  """Assigns every tensor to `model` (built from `to_hparams`), embedding rows in our id
  order (`marian_ids`: each of our ids' Hugging Face id). InputError naming a missing
  tensor, one of another shape, or those left over."""
  used = set()
  take = hf_marian.taker(tensors, used)
  table = hf_marian.shared_table(tensors, len(marian_ids), used)
  hf_marian.assign(model.embedding.embeddings, marian.reorder_rows(table, marian_ids),
                   "model.shared.weight")
  hf_marian.check_tied_head(tensors, table, take)
  for name in ("model.encoder.embed_positions.weights",
               "model.decoder.embed_positions.weights"):
    if name in tensors:  # a buffer older files saved: recomputed (docs/migrating.md)
      used.add(name)
  pairs = hf_marian.variable_map(model) + [
      (f"model.{side}.layer_norm.{p}", getattr(getattr(model, f"{side}_norm"), attr), False)
      for side in ("encoder", "decoder") for p, attr in (("weight", "gamma"), ("bias", "beta"))]
  hf_marian.assign_all(pairs, tensors, take, used)


def import_run(hf_dir, output_dir, config, *, problem="translate_parallel_text",
               overrides=None, log=print):
  """Writes output_dir as a t2t-keras run of the M2M-100 model in hf_dir (`config`: its
  config.json). Returns the checkpoint prefix. Nothing is written before every check
  has passed."""
  hparams = to_hparams(config, overrides)
  pieces, languages = pieces_by_id(hf_dir, config)
  spm_path = os.path.join(hf_dir, SPM)
  if not fileio.exists(spm_path):
    raise InputError(f"{spm_path}: no such file (the model's segmentation)")
  spm = fileio.read_bytes(spm_path)
  vocab_data = yaml.safe_dump({p: i for i, p in enumerate(pieces)}, allow_unicode=True,
                              sort_keys=False).encode("utf-8")
  tensors, weights = hf_files.read_weights(hf_dir)
  dropped = {k: config[k] for k in ("encoder_layerdrop", "decoder_layerdrop")
             if config.get(k)}
  if dropped:  # a training setting: decoding never drops layers
    log(f"config.json: {', '.join(f'{k} {v}' for k, v in dropped.items())} ignored: "
        "t2t-keras has no layer drop, so fine-tuning trains every layer at every step")
  return hf_marian.write_run(
      output_dir, hparams, (spm, spm, vocab_data, languages),
      lambda model, vocab: load_weights(model, tensors, vocab.marian_ids),
      imported_from={"dir": hf_dir, "weights": weights, "model_type": "m2m_100"},
      vocab_name=os.path.join(hf_dir, "vocab.json" if fileio.exists(
          os.path.join(hf_dir, "vocab.json")) else SPM), problem=problem, log=log)
