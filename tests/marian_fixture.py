"""Small random Marian transformers written as Marian writes them, for the import tests.

  write_release(directory, "post_swish_tied_all", seed=1)   # an unpacked OPUS-MT release

A release holds model.npz (every parameter under Marian's name, float32; biases and
LayerNorm parameters [1, n]; `special:model.yml` as int8 bytes ending in NUL, as
marian-dev's `common/io.cpp` stores it), the joint vocab.yml, source.spm / target.spm
(sentencepiece models trained here on English and German number words) and
decoder.yml, as OPUS-MT packages them.

Weights are scaled per tensor (a plain N(0, 0.1) gives a model that repeats one token
whatever the input). Standard deviations: projections 1/sqrt(fan_in), the queries' and
keys' `sharpness` times that (attention that picks positions) and the sublayers' output
projections three times (sublayers that move the residual stream); embeddings 0.5; the
output bias 0.3 with </s> raised by 3. At sharpness 3 outputs vary with the input and
some end before the length limit; at 1 float32 logits stay much closer to float64 ones
(the attention logits' scale grows with its square; figures: docs/notebook.md, "the
Marian fixture's scale").
"""

import io
import os
import random

import numpy as np
import sentencepiece as spm
import yaml
from num2words import num2words

# name -> (pre-norm, FFN activation, embedding tying)
VARIANTS = {
  "post_swish_tied_all": (False, "swish", "tied-embeddings-all"),
  "pre_relu_tied_all": (True, "relu", "tied-embeddings-all"),
  "post_relu_separate": (False, "relu", None),
  "pre_swish_tied_target": (True, "swish", "tied-embeddings"),
}
DIM, HEADS, FFN, DEPTH = 16, 2, 32, 2


def corpus(count=400, seed=0):
  """(English, German) number words, `count` numbers below 100,000."""
  rng = random.Random(seed)
  numbers = [rng.randrange(1, 100_000) for _ in range(count)]
  return ([num2words(n, lang="en") for n in numbers],
      [num2words(n, lang="de") for n in numbers])


def train_spm(lines, vocab_size):
  """A BPE sentencepiece model (bytes) with OPUS-MT's ids: </s> 0, <unk> 1, no <s>."""
  out = io.BytesIO()
  spm.SentencePieceTrainer.train(
    sentence_iterator=iter(lines), model_writer=out, model_type="bpe",
    vocab_size=vocab_size, eos_id=0, unk_id=1, bos_id=-1, pad_id=-1,
    hard_vocab_limit=False, minloglevel=2, num_threads=1)
  return out.getvalue()


def pieces_of(proto):
  sp = spm.SentencePieceProcessor(model_proto=proto)
  return [sp.id_to_piece(i) for i in range(sp.get_piece_size())]


def vocab_pieces(source_proto, target_proto, sorted_layout):
  """The joint vocabulary's pieces by Marian id: marian-vocab's layout (</s> 0, <unk> 1,
  then the pieces) or newer OPUS-MT's `sort -u` of both sides' pieces."""
  words = [p for p in pieces_of(source_proto) + pieces_of(target_proto)
             if p not in ("</s>", "<unk>")]
  words = list(dict.fromkeys(words + ["yes", "null", "1"]))  # YAML would misread these
  if sorted_layout:
    return sorted(set(words) | {"</s>", "<unk>"})
  return ["</s>", "<unk>"] + words


def model_config(variant, vocab_size):
  pre, activation, tying = VARIANTS[variant]
  return {
    "type": "transformer", "dim-vocabs": [vocab_size, vocab_size], "dim-emb": DIM,
    "enc-depth": DEPTH, "dec-depth": DEPTH, "transformer-heads": HEADS,
    "transformer-dim-ffn": FFN, "transformer-ffn-depth": 2,
    "transformer-ffn-activation": activation,
    "transformer-preprocess": "n" if pre else "",
    "transformer-postprocess": "da" if pre else "dan",
    "transformer-postprocess-emb": "d",
    "transformer-postprocess-top": "n" if pre else "",
    "transformer-decoder-autoreg": "self-attention",
    "tied-embeddings": tying == "tied-embeddings",
    "tied-embeddings-src": False,
    "tied-embeddings-all": tying == "tied-embeddings-all",
    "output-omit-bias": False, "right-left": False, "transformer-no-projection": False,
    "transformer-guided-alignment-layer": "last", "transformer-decoder-dim-ffn": 0,
    "transformer-decoder-ffn-depth": 0, "transformer-tied-layers": [],
    "transformer-train-position-embeddings": False, "layer-normalization": False,
    "skip": False, "version": "v1.12.0 (test fixture)",
  }


def random_params(config, vocab_size, eos, seed, sharpness=3):
  """{Marian name: float32 array} for `config`, scaled as the module docstring says."""
  rng = np.random.RandomState(seed)
  d, f = config["dim-emb"], config["transformer-dim-ffn"]
  pre = config["transformer-preprocess"] == "n"
  ln = "_pre" if pre else ""
  normal = lambda shape, std: rng.normal(0.0, std, shape).astype(np.float32)  # noqa: E731
  p = {}

  def norm(prefix):
    p[f"{prefix}_ln_scale{ln}"] = 1.0 + normal((1, d), 0.1)
    p[f"{prefix}_ln_bias{ln}"] = normal((1, d), 0.1)

  def block(prefix):
    for x, scale in (("q", sharpness), ("k", sharpness), ("v", 1), ("o", 3)):
      p[f"{prefix}_W{x}"] = normal((d, d), scale * d ** -0.5)
      p[f"{prefix}_b{x}"] = normal((1, d), 0.1)
    norm(f"{prefix}_Wo")

  def ffn(prefix):
    p[f"{prefix}_W1"], p[f"{prefix}_b1"] = normal((d, f), d ** -0.5), normal((1, f), 0.1)
    p[f"{prefix}_W2"], p[f"{prefix}_b2"] = normal((f, d), 3 * f ** -0.5), normal((1, d), 0.1)
    norm(f"{prefix}_ffn")

  for i in range(1, config["enc-depth"] + 1):
    block(f"encoder_l{i}_self")
    ffn(f"encoder_l{i}_ffn")
  for i in range(1, config["dec-depth"] + 1):
    block(f"decoder_l{i}_self")
    block(f"decoder_l{i}_context")
    ffn(f"decoder_l{i}_ffn")
  if pre:
    for side in ("encoder", "decoder"):
      p[f"{side}_top_ln_scale"] = 1.0 + normal((1, d), 0.1)
      p[f"{side}_top_ln_bias"] = normal((1, d), 0.1)
  table = lambda: normal((vocab_size, d), 0.5)  # noqa: E731
  if config["tied-embeddings-all"]:
    p["Wemb"] = table()
  else:
    p["encoder_Wemb"], p["decoder_Wemb"] = table(), table()
    if not config["tied-embeddings"]:
      p["decoder_ff_logit_out_Wt"] = table()
  bias = normal((1, vocab_size), 0.3)
  bias[0, eos] += 3.0
  p["decoder_ff_logit_out_b"] = bias
  return p


def write_npz(path, params, config):
  meta = yaml.safe_dump(config, sort_keys=False).encode() + b"\0"
  np.savez(path, **params, **{"special:model.yml": np.frombuffer(meta, np.int8)})


def write_vocab_yml(path, pieces):
  with open(path, "w", encoding="utf-8") as f:
    yaml.safe_dump({p: i for i, p in enumerate(pieces)}, f, allow_unicode=True,
                       sort_keys=False)


def write_release(directory, variant, seed=1, sorted_layout=False, sharpness=3,
                  separate_vocabs=False):
  """Writes an unpacked OPUS-MT-style release of a random `variant` model; returns
  {"npz", "vocab", "source_spm", "target_spm", "pieces" (by Marian id)}. With
  `separate_vocabs` (a model trained with `tied-embeddings-src: false` and a vocabulary
  per side, as the Tatoeba-Challenge's *.src.vocab.yml / *.trg.vocab.yml): "vocab" is the
  source side's, "target_vocab" and "target_pieces" the target side's, filled to the
  source side's size (Marian's `dim-vocabs` of one size), decoder.yml names both; the
  target side always sorted, so that its Marian ids of </s> and <unk> are not the source
  side's and a table read in the other side's ids is caught."""
  os.makedirs(directory, exist_ok=True)
  english, german = corpus()
  source, target = train_spm(english, 60), train_spm(german, 80)
  if separate_vocabs:
    sides = [vocab_pieces(source, source, sorted_layout), vocab_pieces(target, target, True)]
    size = max(map(len, sides))
    pieces, target_pieces = [side + [f"<filler{i}>" for i in range(size - len(side))]
                             for side in sides]
    names = ("opusTC.spm-spm.src.vocab.yml", "opusTC.spm-spm.trg.vocab.yml")
  else:
    pieces = target_pieces = vocab_pieces(source, target, sorted_layout)
    names = ("opus.spm-spm.vocab.yml",) * 2
  config = model_config(variant, len(pieces))
  params = random_params(config, len(pieces), target_pieces.index("</s>"), seed, sharpness)
  files = {"npz": os.path.join(directory, "opus.spm-spm.transformer.model1.npz"),
             "vocab": os.path.join(directory, names[0]),
             "source_spm": os.path.join(directory, "source.spm"),
             "target_spm": os.path.join(directory, "target.spm")}
  write_npz(files["npz"], params, config)
  write_vocab_yml(files["vocab"], pieces)
  extra = {}
  if separate_vocabs:
    extra = {"target_vocab": os.path.join(directory, names[1]), "target_pieces": target_pieces}
    write_vocab_yml(extra["target_vocab"], target_pieces)
  for key, proto in (("source_spm", source), ("target_spm", target)):
    with open(files[key], "wb") as f:
      f.write(proto)
  with open(os.path.join(directory, "decoder.yml"), "w") as f:
    yaml.safe_dump({"relative-paths": True, "models": [os.path.basename(files["npz"])],
            "vocabs": list(names), "beam-size": 4,
            "normalize": 1, "word-penalty": 0, "mini-batch": 1, "maxi-batch": 1},
                       f, sort_keys=False)
  return dict(files, pieces=pieces, **extra)
