"""Small random M2M-100 and NLLB-200 models in Hugging Face's layout, for the import tests.

  model = write_hf_dir(directory, seed=1)                  # M2M-100
  model = write_hf_dir(directory, seed=1, flavour="nllb")  # NLLB-200

A directory holds what a `facebook/m2m100_*` repository serves: config.json,
generation_config.json, tokenizer_config.json and special_tokens_map.json (the language
tokens as `additional_special_tokens`), vocab.json (fairseq's dictionary: <s> 0, <pad> 1,
</s> 2, <unk> 3, then the pieces of the sentencepiece model but its last three, which the
dictionary lacks, as real dictionaries lack some of the model's pieces),
sentencepiece.bpe.model (trained here on English and German number words, fairseq's
layout: <unk> 0, <s> 1, </s> 2) and model.safetensors. Three language tokens (`__en__`,
`__de__`, `__fr__`) follow the dictionary's ids, then 8 unused rows (M2M100Tokenizer's
`num_madeup_words`).

An NLLB directory has no vocab.json: its ids are the sentencepiece model's plus one
(NllbTokenizer's fairseq_offset), <s> <pad> </s> <unk> pinned at 0-3; three language
codes (`eng_Latn`, `deu_Latn`, `fra_Latn`), then <mask>, follow the spm range, as the
hub's tokenizer numbers them, written in tokenizer_config.json's added_tokens_decoder as
transformers >= 4.34 saves it; then 2 unused rows (the hub's vocab_size 256206 is the
tokenizer's 256204 plus two).

The weights are random under PyTorch's names, scaled as `marian_fixture`'s (`sharpness` on
the queries and keys); <pad>'s embedding row is 0 (nn.Embedding's padding_idx).
"""

import io
import json
import os

import numpy as np
import sentencepiece as spm
from safetensors.numpy import save_file

import hf_marian_fixture
import marian_fixture

DIM, HEADS, FFN, DEPTH, MADEUP = 16, 2, 32, 2, 8
LANGUAGES = ["__en__", "__de__", "__fr__"]
NLLB_LANGUAGES = ["eng_Latn", "deu_Latn", "fra_Latn"]
NLLB_UNUSED = 2


def train_spm(lines, vocab_size):
  out = io.BytesIO()
  spm.SentencePieceTrainer.train(
      sentence_iterator=iter(lines), model_writer=out, model_type="bpe",
      vocab_size=vocab_size, unk_id=0, bos_id=1, eos_id=2, pad_id=-1,
      hard_vocab_limit=False, minloglevel=2, num_threads=1)
  return out.getvalue()


def random_state_dict(config, seed, sharpness=3):
  """{PyTorch name: float32 array} of M2M100ForConditionalGeneration: BART's layers
  (`hf_marian_fixture.random_layers`), each stack's final LayerNorm, the shared table."""
  sd, normal, norm = hf_marian_fixture.random_layers(config, seed, sharpness)
  d, v = config["d_model"], config["vocab_size"]
  norm("model.encoder.layer_norm")
  norm("model.decoder.layer_norm")
  sd["model.shared.weight"] = normal((v, d), 0.5)
  sd["model.shared.weight"][config["pad_token_id"]] = 0.0
  return sd


def _added_token(content, special=True):
  return {"content": content, "lstrip": content == "<mask>", "normalized": content == "<mask>",
          "rstrip": False, "single_word": False, "special": special}


def write_hf_dir(directory, seed=1, sharpness=3, flavour="m2m100", languages=None,
                 language_codes="m2m100"):
  """Writes an M2M-100 (or NLLB-200: flavour="nllb") repository of a random model;
  returns {"config", "sd" (float64), "vocab" (piece -> id, the language tokens included),
  "languages" ({"en": token, "de": token, ...}), "dir"}. M2M-100's `languages` (default
  LANGUAGES) are its tokens in id order, `language_codes` tokenizer_config.json's name for
  that list (M2M100Tokenizer's FAIRSEQ_LANGUAGE_CODES key: "m2m100", "wmt21")."""
  languages = list(languages or LANGUAGES)
  os.makedirs(directory, exist_ok=True)
  english, german = marian_fixture.corpus()
  proto = train_spm(english + german, 120)
  sp = spm.SentencePieceProcessor(model_proto=proto)
  vocab = {"<s>": 0, "<pad>": 1, "</s>": 2, "<unk>": 3}
  if flavour == "nllb":
    pieces = [sp.id_to_piece(i) for i in range(3, sp.get_piece_size())]
    vocab.update({p: 4 + i for i, p in enumerate(pieces)})
    languages = {t: len(vocab) + i for i, t in enumerate(NLLB_LANGUAGES)}
    mask = len(vocab) + len(languages)
    size = mask + 1 + NLLB_UNUSED
  else:
    pieces = [sp.id_to_piece(i) for i in range(3, sp.get_piece_size())][:-3]
    vocab.update({p: 4 + i for i, p in enumerate(pieces)})
    tokens = languages
    languages = {t: len(vocab) + i for i, t in enumerate(tokens)}
    size = len(vocab) + len(tokens) + MADEUP
  config = {
      "_name_or_path": "fixture/m2m100", "activation_dropout": 0.0,
      "activation_function": "relu", "architectures": ["M2M100ForConditionalGeneration"],
      "attention_dropout": 0.1, "bos_token_id": 0, "d_model": DIM,
      "decoder_attention_heads": HEADS, "decoder_ffn_dim": FFN, "decoder_layerdrop": 0.05,
      "decoder_layers": DEPTH, "decoder_start_token_id": 2, "dropout": 0.1,
      "encoder_attention_heads": HEADS, "encoder_ffn_dim": FFN, "encoder_layerdrop": 0.05,
      "encoder_layers": DEPTH, "eos_token_id": 2, "init_std": 0.02,
      "is_encoder_decoder": True, "max_position_embeddings": 64, "model_type": "m2m_100",
      "num_hidden_layers": DEPTH, "pad_token_id": 1, "scale_embedding": True,
      "transformers_version": "4.57.1", "use_cache": True, "vocab_size": size}
  sd = random_state_dict(config, seed, sharpness)
  save_file(sd, os.path.join(directory, "model.safetensors"), metadata={"format": "pt"})
  if flavour == "nllb":
    return _write_nllb_files(directory, config, sd, vocab, languages, mask, proto)
  files = {"config.json": config, "vocab.json": vocab,
           "generation_config.json": {"bos_token_id": 0, "decoder_start_token_id": 2,
                                      "eos_token_id": 2, "pad_token_id": 1,
                                      "max_length": 200},
           "tokenizer_config.json": {"tokenizer_class": "M2M100Tokenizer",
                                     "language_codes": language_codes,
                                     "num_madeup_words": MADEUP,
                                     "src_lang": "en", "tgt_lang": "de",
                                     "model_max_length": 1024},
           "special_tokens_map.json": {"additional_special_tokens": tokens,
                                       "bos_token": "<s>", "eos_token": "</s>",
                                       "pad_token": "<pad>", "unk_token": "<unk>"}}
  for name, value in files.items():
    with open(os.path.join(directory, name), "w", encoding="utf-8") as f:
      json.dump(value, f, ensure_ascii=False, indent=2)
  with open(os.path.join(directory, "sentencepiece.bpe.model"), "wb") as f:
    f.write(proto)
  return {"config": config, "vocab": {**vocab, **languages}, "dir": directory,
          "languages": {t[2:-2]: t for t in tokens},
          "sd": {k: v.astype(np.float64) for k, v in sd.items()}}


def _write_nllb_files(directory, config, sd, vocab, languages, mask, proto):
  config = dict(config, _name_or_path="fixture/nllb-200", tokenizer_class="NllbTokenizer")
  added = {str(i): _added_token(p) for p, i in vocab.items() if i < 4}
  added.update({str(i): _added_token(t) for t, i in languages.items()})
  added[str(mask)] = _added_token("<mask>")
  files = {"config.json": config,
           "generation_config.json": {"bos_token_id": 0, "decoder_start_token_id": 2,
                                      "eos_token_id": 2, "pad_token_id": 1,
                                      "max_length": 200},
           "tokenizer_config.json": {"tokenizer_class": "NllbTokenizer",
                                     "added_tokens_decoder": added,
                                     "additional_special_tokens": list(languages),
                                     "bos_token": "<s>", "cls_token": "<s>",
                                     "eos_token": "</s>", "mask_token": "<mask>",
                                     "pad_token": "<pad>", "sep_token": "</s>",
                                     "unk_token": "<unk>", "legacy_behaviour": False,
                                     "src_lang": "eng_Latn", "tgt_lang": "deu_Latn",
                                     "model_max_length": 1024, "sp_model_kwargs": {}},
           "special_tokens_map.json": {"additional_special_tokens": list(languages),
                                       "bos_token": "<s>", "cls_token": "<s>",
                                       "eos_token": "</s>", "mask_token": "<mask>",
                                       "pad_token": "<pad>", "sep_token": "</s>",
                                       "unk_token": "<unk>"}}
  for name, value in files.items():
    with open(os.path.join(directory, name), "w", encoding="utf-8") as f:
      json.dump(value, f, ensure_ascii=False, indent=2)
  with open(os.path.join(directory, "sentencepiece.bpe.model"), "wb") as f:
    f.write(proto)
  return {"config": config, "vocab": {**vocab, **languages, "<mask>": mask},
          "dir": directory, "languages": {t[:2]: t for t in languages},
          "sd": {k: v.astype(np.float64) for k, v in sd.items()}}
