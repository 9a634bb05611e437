"""A random OPUS-MT, M2M-100 or NLLB-200 model at a real size, in Hugging Face's layout,
imported as a run: what ct2_compare.py times when no downloaded model is at hand (no
weights are downloaded here).

    python benchmarks/hf_random_model.py --size opus-mt --work_dir /tmp/opus_bench
    python benchmarks/ct2_compare.py --run /tmp/opus_bench/run \\
        --source ../shared/data/multi30k/val.en.gz --peak_rss
    python benchmarks/hf_random_model.py --size m2m100-418m --work_dir /tmp/m2m_bench
    python benchmarks/ct2_compare.py --run /tmp/m2m_bench/run --source_language=en \\
        --target_language=de --source ../shared/data/multi30k/val.en.gz --peak_rss

OPUS-MT: writes WORK_DIR/hf (config.json, model.safetensors, vocab.json, source.spm,
target.spm: sentencepiece models trained on --corpus's English and German, the joint
vocabulary filled with unused pieces to the size's vocab_size, `<pad>` last). M2M-100
and NLLB-200 shapes: M2M100ForConditionalGeneration's layout (config.json,
model.safetensors, vocab.json: fairseq's dictionary over one sentencepiece model trained
on both languages, the tokenizer files with three language tokens `__en__`, `__de__`,
`__fr__`, then `madeupword`s up to the size's vocab_size; NLLB-200 is the same
architecture, so its shape is written in this layout too). Then t2t-import --from=hf into
WORK_DIR/run. The weights are random (std 1/sqrt(fan_in); the queries' and keys' 3 times
that, as the test fixtures' sharpness 3), so outputs are not translations: speed
comparisons between engines on it hold, BLEU does not.
"""

import argparse
import gzip
import json
import os
import sys

import numpy as np

# name -> (d_model, layers per stack, heads, ffn, vocab_size), as the hub's configs have them
SIZES = {
    "opus-mt": (512, 6, 8, 2048, 58101),  # Helsinki-NLP/opus-mt-en-de
    "tc-big": (1024, 6, 16, 4096, 58101),  # Helsinki-NLP/opus-mt-tc-big-*; 12 + 6 in some
}
# The same for M2M100ForConditionalGeneration's layout (language tokens, fairseq's ids).
LANGUAGE_TOKEN_SIZES = {
    "m2m100-418m": (1024, 12, 16, 4096, 128112),  # facebook/m2m100_418M
    "nllb-600m": (1024, 12, 16, 4096, 256206),  # facebook/nllb-200-distilled-600M
}
M2M_LANGUAGES = ["__en__", "__de__", "__fr__"]


def corpus_lines(path, count):
  opener = gzip.open if path.endswith(".gz") else open
  with opener(path, "rt", encoding="utf-8") as f:
    return [line.strip() for _, line in zip(range(count), f)]


def train_spm(lines, vocab_size, fairseq=False):
  """A sentencepiece model's bytes: Marian's ids (</s> 0, <unk> 1), or with fairseq
  fairseq's BPE model (<unk> 0, <s> 1, </s> 2) as M2M-100's sentencepiece.bpe.model."""
  import io  # pylint: disable=import-outside-toplevel
  import sentencepiece as spm  # pylint: disable=import-outside-toplevel
  out = io.BytesIO()
  ids = (dict(model_type="bpe", unk_id=0, bos_id=1, eos_id=2) if fairseq
         else dict(eos_id=0, unk_id=1, bos_id=-1))
  spm.SentencePieceTrainer.train(
      sentence_iterator=iter(lines), model_writer=out, vocab_size=vocab_size, pad_id=-1,
      hard_vocab_limit=False, minloglevel=2, num_threads=os.cpu_count(), **ids)
  return out.getvalue()


def pieces_of(proto):
  import sentencepiece as spm  # pylint: disable=import-outside-toplevel
  sp = spm.SentencePieceProcessor(model_proto=proto)
  return [sp.id_to_piece(i) for i in range(sp.get_piece_size())]


def state_dict(d, layers, ffn, vocab_size, pad, eos, seed=1):
  """{PyTorch name: float32 array} of a random MarianMTModel."""
  rng = np.random.RandomState(seed)
  normal = lambda shape, std: rng.normal(0.0, std, shape).astype(np.float32)  # noqa: E731
  sd = {}

  def attention(name):
    for p, scale in (("q", 3), ("k", 3), ("v", 1), ("out", 1)):
      sd[f"{name}.{p}_proj.weight"], sd[f"{name}.{p}_proj.bias"] = (
          normal((d, d), scale * d ** -0.5), normal(d, 0.1))
    sd[f"{name}_layer_norm.weight"] = np.ones(d, np.float32)
    sd[f"{name}_layer_norm.bias"] = normal(d, 0.1)

  for side in ("encoder", "decoder"):
    for i in range(layers):
      prefix = f"model.{side}.layers.{i}"
      attention(f"{prefix}.self_attn")
      if side == "decoder":
        attention(f"{prefix}.encoder_attn")
      sd[f"{prefix}.fc1.weight"] = normal((ffn, d), d ** -0.5)
      sd[f"{prefix}.fc1.bias"] = normal(ffn, 0.1)
      sd[f"{prefix}.fc2.weight"] = normal((d, ffn), ffn ** -0.5)
      sd[f"{prefix}.fc2.bias"] = normal(d, 0.1)
      sd[f"{prefix}.final_layer_norm.weight"] = np.ones(d, np.float32)
      sd[f"{prefix}.final_layer_norm.bias"] = normal(d, 0.1)
  sd["model.shared.weight"] = normal((vocab_size, d), d ** -0.5)
  sd["model.shared.weight"][pad] = 0.0
  bias = normal((1, vocab_size), 0.3)
  bias[0, eos], bias[0, pad] = 2.0, 0.0
  sd["final_logits_bias"] = bias
  return sd


def write_hf_dir(directory, size, corpus_dir, lines=29000):
  d, layers, heads, ffn, vocab_size = SIZES[size]
  os.makedirs(directory, exist_ok=True)
  source = train_spm(corpus_lines(os.path.join(corpus_dir, "train.en.gz"), lines), 8000)
  target = train_spm(corpus_lines(os.path.join(corpus_dir, "train.de.gz"), lines), 8000)
  pieces = ["</s>", "<unk>"] + [p for p in dict.fromkeys(pieces_of(source) + pieces_of(target))
                                if p not in ("</s>", "<unk>")]
  pieces += [f"▁unused{i}" for i in range(vocab_size - 1 - len(pieces))] + ["<pad>"]
  vocab = {p: i for i, p in enumerate(pieces)}
  config = {"model_type": "marian", "architectures": ["MarianMTModel"], "d_model": d,
            "encoder_layers": layers, "decoder_layers": layers,
            "encoder_attention_heads": heads, "decoder_attention_heads": heads,
            "encoder_ffn_dim": ffn, "decoder_ffn_dim": ffn, "activation_function": "swish",
            "vocab_size": vocab_size, "decoder_vocab_size": vocab_size,
            "max_position_embeddings": 512, "scale_embedding": True,
            "share_encoder_decoder_embeddings": True, "pad_token_id": vocab["<pad>"],
            "decoder_start_token_id": vocab["<pad>"], "eos_token_id": vocab["</s>"],
            "dropout": 0.1, "attention_dropout": 0.0, "activation_dropout": 0.0}
  from safetensors.numpy import save_file  # pylint: disable=import-outside-toplevel
  save_file(state_dict(d, layers, ffn, vocab_size, vocab["<pad>"], vocab["</s>"]),
            os.path.join(directory, "model.safetensors"), metadata={"format": "pt"})
  for name, value in (("config.json", config), ("vocab.json", vocab)):
    with open(os.path.join(directory, name), "w", encoding="utf-8") as f:
      json.dump(value, f, ensure_ascii=False)
  for name, proto in (("source.spm", source), ("target.spm", target)):
    with open(os.path.join(directory, name), "wb") as f:
      f.write(proto)


def write_m2m100_dir(directory, size, corpus_dir, lines=29000):
  """An M2M100ForConditionalGeneration repository of LANGUAGE_TOKEN_SIZES[size]: pre-norm,
  relu, each stack's final LayerNorm, the shared table tied to the logits (no bias)."""
  d, layers, heads, ffn, vocab_size = LANGUAGE_TOKEN_SIZES[size]
  os.makedirs(directory, exist_ok=True)
  proto = train_spm(corpus_lines(os.path.join(corpus_dir, "train.en.gz"), lines) +
                    corpus_lines(os.path.join(corpus_dir, "train.de.gz"), lines), 8000,
                    fairseq=True)
  vocab = {"<s>": 0, "<pad>": 1, "</s>": 2, "<unk>": 3}
  vocab.update({p: 4 + i for i, p in enumerate(pieces_of(proto)[3:])})
  config = {"model_type": "m2m_100", "architectures": ["M2M100ForConditionalGeneration"],
            "d_model": d, "encoder_layers": layers, "decoder_layers": layers,
            "encoder_attention_heads": heads, "decoder_attention_heads": heads,
            "encoder_ffn_dim": ffn, "decoder_ffn_dim": ffn, "activation_function": "relu",
            "vocab_size": vocab_size, "max_position_embeddings": 1024,
            "scale_embedding": True, "pad_token_id": 1, "bos_token_id": 0,
            "eos_token_id": 2, "decoder_start_token_id": 2, "dropout": 0.1,
            "attention_dropout": 0.1, "activation_dropout": 0.0, "encoder_layerdrop": 0.0,
            "decoder_layerdrop": 0.0, "is_encoder_decoder": True}
  sd = state_dict(d, layers, ffn, vocab_size, pad=1, eos=2)
  del sd["final_logits_bias"]
  for side in ("encoder", "decoder"):
    sd[f"model.{side}.layer_norm.weight"] = np.ones(d, np.float32)
    sd[f"model.{side}.layer_norm.bias"] = np.zeros(d, np.float32)
  from safetensors.numpy import save_file  # pylint: disable=import-outside-toplevel
  save_file(sd, os.path.join(directory, "model.safetensors"), metadata={"format": "pt"})
  del sd
  files = {"config.json": config, "vocab.json": vocab,
           "generation_config.json": {"bos_token_id": 0, "decoder_start_token_id": 2,
                                      "eos_token_id": 2, "pad_token_id": 1},
           "tokenizer_config.json": {"tokenizer_class": "M2M100Tokenizer",
                                     "language_codes": "m2m100", "num_madeup_words": 8,
                                     "src_lang": "en", "tgt_lang": "de"},
           "special_tokens_map.json": {"additional_special_tokens": M2M_LANGUAGES,
                                       "bos_token": "<s>", "eos_token": "</s>",
                                       "pad_token": "<pad>", "unk_token": "<unk>"}}
  for name, value in files.items():
    with open(os.path.join(directory, name), "w", encoding="utf-8") as f:
      json.dump(value, f, ensure_ascii=False)
  with open(os.path.join(directory, "sentencepiece.bpe.model"), "wb") as f:
    f.write(proto)


def main():
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--size", choices=sorted(SIZES) + sorted(LANGUAGE_TOKEN_SIZES),
                      default="opus-mt")
  parser.add_argument("--work_dir", required=True)
  parser.add_argument("--corpus", default=os.path.join(
      os.path.dirname(__file__), "..", "..", "shared", "data", "multi30k"),
                      help="a directory with train.en.gz and train.de.gz")
  args = parser.parse_args()
  hf_dir, run_dir = (os.path.join(args.work_dir, name) for name in ("hf", "run"))
  if args.size in LANGUAGE_TOKEN_SIZES:
    write_m2m100_dir(hf_dir, args.size, args.corpus)
  else:
    write_hf_dir(hf_dir, args.size, args.corpus)
  from t2t_keras.importing import hf  # pylint: disable=import-outside-toplevel
  hf.import_run(hf_dir, run_dir)
  print(f"{args.size}: {run_dir}", file=sys.stderr)


if __name__ == "__main__":
  main()
