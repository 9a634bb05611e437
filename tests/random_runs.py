"""Run directories whose weights come from a seeded NumPy generator: the same on every CPU.

    run_dir = random_run(str(tmp), vocab_path, vocab_size, dict(norm_type="post"), 8.0, 0.5, 2.0)

Built, not trained (tests of the CTranslate2 and LiteRT exports): the weights are scaled so
that outputs depend on the input and end in EOS at varied lengths; EOS's embedding row
points along the positional signal of step 16 minus step 0, so it becomes likelier as the
output grows.
"""

import numpy as np
import tensorflow as tf

from t2t_keras import registry, runs
from t2t_keras.data import datagen
from t2t_keras.errors import InputError
from t2t_keras.ids import EOS_ID, PAD_ID
from t2t_keras.models.transformer import Transformer

SMALL = dict(num_encoder_layers=2, num_decoder_layers=2, hidden_size=32, filter_size=64,
             num_heads=4, max_length=40)


def sinusoids(length, width):
  """The paper's position table, float64 [length, width], sin and cos interleaved."""
  angles = np.arange(length)[:, None] / np.power(10000.0, np.arange(0, width, 2) / width)
  return np.stack([np.sin(angles), np.cos(angles)], -1).reshape(length, width)


def random_weight(path, shape, rng, eos_norm, gain, encdec_gain):
  """One weight of `random_run`'s model, float64, from `rng` alone."""
  if path.endswith("gamma"):
    return 1 + 0.1 * rng.standard_normal(shape)
  if path.endswith(("beta", "bias")):
    return 0.1 * rng.standard_normal(shape)
  if path.endswith("position_embeddings"):
    return sinusoids(*shape) + 0.1 * rng.standard_normal(shape)
  if len(shape) == 2 and path.endswith("embeddings"):  # the shared token embedding
    table = rng.standard_normal(shape) * shape[1] ** -0.5
    table[PAD_ID] = 0.0
    steps = sinusoids(17, shape[1])
    table[EOS_ID] = eos_norm * (steps[16] - steps[0]) / np.linalg.norm(steps[16] - steps[0])
    return table
  scale = encdec_gain if "encdec" in path else gain
  return scale * rng.standard_normal(shape) / np.sqrt(np.prod(shape[:-1]))


def random_run(out, vocab_path, vocab_size, hparams, eos_norm, gain, encdec_gain, seed=1):
  """A run directory whose checkpoint holds weights drawn from a seeded NumPy generator
  (the same on every CPU): `hparams` over SMALL, the numbers problem's vocabulary."""
  hp = registry.hparams("transformer_tiny").replace(**SMALL).replace(**hparams)
  model = Transformer(vocab_size, hp)
  model.build_for_ids()
  rng = np.random.default_rng(seed)
  for weight in model.weights:
    value = random_weight(weight.path, tuple(weight.shape), rng, eos_norm, gain, encdec_gain)
    weight.assign(value.astype(np.float32))
  tf.train.CheckpointManager(tf.train.Checkpoint(model=model), out, 1).save(checkpoint_number=1)
  runs.save_run_info(out, hp, "translate_ende_numbers", vocab_size, vocab_path)
  return out


def numbers_vocab(data_dir):
  """(path, size) of the numbers problem's sentencepiece vocabulary, generated in data_dir."""
  summary = datagen.generate("translate_ende_numbers", data_dir, log=None, num_train=10000)
  return summary["vocab_file"], summary["vocab_size"]


# name: (hparams, EOS row norm, kernel gain, encoder-decoder attention gain): the gains were
# chosen (on the dev inputs) so that the outputs vary with the input and end. The models of
# test_ctranslate2.py and test_litert.py, built once a session (`shared_models`).
NUMBERS_MODELS = {
    "post_norm_sinusoids": (dict(norm_type="post", pos="timing"), 8.0, 0.5, 2.0),
    "pre_norm_learned_small_heads": (dict(norm_type="pre", pos="emb", max_positions=96,
                                          attention_key_channels=4,
                                          attention_value_channels=4), 6.0, 1.0, 3.0),
}
DEV_INPUTS = 300  # the dev sources `shared_decodings` translates


def shared_models(tmp_path_factory):
  """{name: run_dir} of NUMBERS_MODELS over the numbers vocabulary, each with its float32
  CTranslate2 conversion in run_dir/ctranslate2 (where t2t-decoder --engine=ctranslate2
  looks), made once a session (tests/session_shared.py): read-only, other conversions go to
  a directory of the test's."""
  import session_shared  # pylint: disable=import-outside-toplevel

  def build(path):
    vocab = numbers_vocab(str(path / "numbers"))
    for name, (hparams, *scales) in NUMBERS_MODELS.items():
      (path / name).mkdir()
      random_run(str(path / name), *vocab, hparams, *scales)
      try:
        from t2t_keras.exporting import ct2_convert  # pylint: disable=import-outside-toplevel
        ct2_convert.convert_run(str(path / name), log=None)
      except InputError:  # no ctranslate2: test_ctranslate2.py skips
        pass

  base = session_shared.directory("numbers_random_runs", build, tmp_path_factory)
  return {name: str(base / name) for name in NUMBERS_MODELS}


def dev_inputs(count=DEV_INPUTS):
  """The first `count` sources of the numbers problem's dev split."""
  from t2t_keras.decoding import files  # pylint: disable=import-outside-toplevel
  return files.split_pairs("translate_ende_numbers", split="dev")[0][:count]


def shared_decodings(tmp_path_factory, name, decode):
  """[(best ids, score)] of our search (translate_lines, `decode` with jit=false) over the
  first DEV_INPUTS dev sources with NUMBERS_MODELS[name], computed once a session: the
  reference both the CTranslate2 and the LiteRT comparisons hold their engine to."""
  import json  # pylint: disable=import-outside-toplevel
  import session_shared  # pylint: disable=import-outside-toplevel
  from t2t_keras.decoding import translate  # pylint: disable=import-outside-toplevel
  from t2t_keras.decoding.settings import parse_decode_hparams  # pylint: disable=import-outside-toplevel
  run_dir = shared_models(tmp_path_factory)[name]

  def build(path):
    run = runs.load(run_dir)
    nbest = translate.translate_lines(run.model, run.vocab, dev_inputs(),
                                      parse_decode_hparams(decode + ",jit=false"))
    rows = [[[int(i) for i in hyps[0].ids], float(hyps[0].score)] for hyps in nbest]
    (path / "best.json").write_text(json.dumps(rows))

  key = f"numbers_decodings_{name}_{decode.replace('=', '-').replace(',', '_')}"
  path = session_shared.directory(key, build, tmp_path_factory) / "best.json"
  return [(ids, score) for ids, score in json.loads(path.read_text())]
