"""transformers' own Marian code, run as a reference for tests/importing/test_hf_marian_import.py.

Runs with transformers 4.57 and tf-keras on the path (setup_venv.sh installs them,
test-only, in .venv/hf_reference; never imported by the package) and prints one JSON
line.

  hf_transformers_reference.py logits FIXTURE_DIR WRITTEN_DIR PAIRS_JSON
      TFMarianMTModel.from_pretrained(FIXTURE_DIR) (its loading info, and its logits for
      each [source ids, target ids] pair, the decoder fed decoder_start_token_id then the
      target shifted right); then a random TFMarianMTModel of the same config (init_std
      0.5, <pad>'s embedding row zeroed as the converter leaves it) saved with
      save_pretrained to WRITTEN_DIR, and its logits for the same pairs.
  hf_transformers_reference.py tokenize DIR LINES_JSON
      MarianTokenizer.from_pretrained(DIR): the ids of LINES_JSON["source"] and of
      LINES_JSON["target"] (text_target), </s> appended as it does; the text of each id
      list in LINES_JSON["decode"] (batch_decode, skip_special_tokens).
  hf_transformers_reference.py nllb_tokenize DIR LINES_JSON
      NllbTokenizer.from_pretrained(DIR): the ids of LINES_JSON["source"] with src_lang and
      of LINES_JSON["target"] (text_target) with tgt_lang, framed as it frames them; the
      ids of LINES_JSON["languages"] and <mask>; its length.
  hf_transformers_reference.py m2m100_tokenize DIR LINES_JSON
      M2M100Tokenizer.from_pretrained(DIR): the same for M2M-100 (src_lang and tgt_lang
      codes such as "en"), and its lang_token_to_id.
"""

import json
import os
import subprocess
import sys

import numpy as np

# Where setup_venv.sh installs transformers 4.57 and tf-keras, test-only.
INSTALLED = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".venv",
                         "hf_reference")


def run(command, *args):
  """This script's `command` in a process with transformers on its path: the JSON answer.
  Skips the calling test where the reference is not installed."""
  import pytest  # pylint: disable=import-outside-toplevel
  if not os.path.isdir(os.path.join(INSTALLED, "transformers")):
    pytest.skip("transformers 4.57 (the test-only reference) is not in .venv/hf_reference; "
                "setup_venv.sh installs it")
  env = dict(os.environ, PYTHONPATH=os.path.abspath(INSTALLED), TF_CPP_MIN_LOG_LEVEL="3",
             TRANSFORMERS_OFFLINE="1", HF_HUB_OFFLINE="1")
  done = subprocess.run([sys.executable, os.path.abspath(__file__), command, *map(str, args)],
                        env=env, capture_output=True, text=True, check=False)
  assert done.returncode == 0, done.stderr[-3000:]
  return json.loads(done.stdout.strip().splitlines()[-1])


def _logits(model, config, pairs):
  out = []
  for src, tgt in pairs:
    decoder = [config.decoder_start_token_id] + list(tgt[:-1])
    logits = model(input_ids=np.array([src]), decoder_input_ids=np.array([decoder])).logits
    out.append(np.asarray(logits[0], np.float64).tolist())
  return out


def logits(fixture_dir, written_dir, pairs_json):
  from transformers import MarianConfig, TFMarianMTModel  # pylint: disable=import-outside-toplevel
  pairs = json.loads(pairs_json)
  model, info = TFMarianMTModel.from_pretrained(fixture_dir, output_loading_info=True)
  answer = {"missing": sorted(info["missing_keys"]),
            "unexpected": sorted(info["unexpected_keys"]),
            "fixture_logits": _logits(model, model.config, pairs)}
  config = MarianConfig.from_pretrained(fixture_dir, init_std=0.5)
  written = TFMarianMTModel(config)
  written(input_ids=np.array([pairs[0][0]]), decoder_input_ids=np.array([[0]]))  # builds
  table = written.get_input_embeddings()
  weights = table.get_weights()
  weights[0][config.pad_token_id] = 0.0
  table.set_weights(weights)
  written.save_pretrained(written_dir)
  answer["written_logits"] = _logits(written, config, pairs)
  return answer


def tokenize(directory, lines_json):
  from transformers import MarianTokenizer  # pylint: disable=import-outside-toplevel
  lines = json.loads(lines_json)
  tokenizer = MarianTokenizer.from_pretrained(directory)
  return {"source": tokenizer(lines["source"])["input_ids"],
          "target": tokenizer(text_target=lines["target"])["input_ids"],
          "decoded": tokenizer.batch_decode(lines["decode"], skip_special_tokens=True)}


def _framed(tokenizer_class, directory, lines):
  """The tokenizer from `directory` with lines' src_lang and tgt_lang, and its ids of the
  source lines and of the target lines (text_target)."""
  tokenizer = tokenizer_class.from_pretrained(directory, src_lang=lines["src_lang"],
                                              tgt_lang=lines["tgt_lang"])
  return tokenizer, {"source": tokenizer(lines["source"])["input_ids"],
                     "target": tokenizer(text_target=lines["target"])["input_ids"]}


def nllb_tokenize(directory, lines_json):
  from transformers import NllbTokenizer  # pylint: disable=import-outside-toplevel
  lines = json.loads(lines_json)
  tokenizer, ids = _framed(NllbTokenizer, directory, lines)
  return dict(ids, languages=tokenizer.convert_tokens_to_ids(lines["languages"]),
              mask=tokenizer.mask_token_id, size=len(tokenizer))


def m2m100_tokenize(directory, lines_json):
  from transformers import M2M100Tokenizer  # pylint: disable=import-outside-toplevel
  tokenizer, ids = _framed(M2M100Tokenizer, directory, json.loads(lines_json))
  return dict(ids, languages=tokenizer.lang_token_to_id)


if __name__ == "__main__":
  command, *args = sys.argv[1:]
  print(json.dumps({"logits": logits, "tokenize": tokenize,
                    "nllb_tokenize": nllb_tokenize,
                    "m2m100_tokenize": m2m100_tokenize}[command](*args)))
