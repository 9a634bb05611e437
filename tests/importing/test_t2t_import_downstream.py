"""An imported tensor2tensor checkpoint through every binary a user runs next.

The shared checkpoint (../shared/data/t2t, tensor2tensor's own) is imported with
t2t-import; then t2t-decoder (beam search with every beam, --score_file, an
ensemble), t2t-exporter (SavedModel; CTranslate2's refusal) and t2t-trainer
--warm_start_from on a data_dir in tensor2tensor's own file layout.
Scores are checked against the float64 reference written from t2t's source
(`t2t_numpy_reference.py`), not against the package's own numbers.
"""

import gzip
import json
import os
import shutil

import numpy as np
import pytest
import tensorflow as tf

import t2t_checkpoint_writer as writer
import t2t_numpy_reference as reference
from conftest import SHARED_DATA
from t2t_keras import bin as t2t_bin, runs
from t2t_keras.bin import avg_all as avg_all_bin
from t2t_keras.bin import decoder as decoder_bin
from t2t_keras.bin import exporter as exporter_bin
from t2t_keras.bin import t2t_import as import_bin
from t2t_keras.bin import trainer as trainer_bin
from t2t_keras.data.shards import example
from t2t_keras.decoding import translate
from t2t_keras.decoding.settings import parse_decode_hparams

T2T_CKPT = os.path.join(SHARED_DATA, "t2t", "transformer_test_ckpt")
VOCAB_8K = os.path.join(SHARED_DATA, "t2t", "vocab.translate_ende_wmt8k.8192.subwords.gz")
MULTI30K = os.path.join(SHARED_DATA, "multi30k", "{}.{}.gz")
DECODE = "beam_size=3,extra_length=6,batch_size=8,length_bucket=1,jit=false"
BINARIES = {"import": import_bin, "decoder": decoder_bin, "exporter": exporter_bin,
            "avg-all": avg_all_bin, "trainer": trainer_bin}


def run_binary(capsys, name, *args):
  """(exit code, stdout, stderr) of t2t-<name>, run in this process."""
  capsys.readouterr()
  code = t2t_bin.run_in_process(BINARIES[name], [f"t2t-{name}", *args])
  out = capsys.readouterr()
  return code, out.out, out.err


def lines(split, lang, n):
  path = MULTI30K.format(split, lang)
  if not os.path.exists(path):
    pytest.skip(f"{path} is absent (../shared/data)")
  with gzip.open(path, "rt", encoding="utf-8") as f:
    return [next(f).rstrip("\n") for _ in range(n)]


@pytest.fixture(scope="module")
def imported(tmp_path_factory):
  """(run dir, its t2t variables, t2t's hparams) of the shared checkpoint, imported."""
  for path in (T2T_CKPT, VOCAB_8K):
    if not os.path.exists(path):
      pytest.skip(f"{path} is absent (../shared/data)")
  base = tmp_path_factory.mktemp("imported")
  _import_shared(base / "run")
  reader = tf.train.load_checkpoint(os.path.join(T2T_CKPT, "model.ckpt-1"))
  variables = {n: reader.get_tensor(n) for n in reader.get_variable_to_shape_map()}
  with open(os.path.join(T2T_CKPT, "hparams.json")) as f:
    return str(base / "run"), variables, json.load(f)


def _import_shared(output_dir):
  assert t2t_bin.run_in_process(import_bin, [
      "t2t-import", f"--t2t_dir={T2T_CKPT}", f"--vocab={VOCAB_8K}",
      f"--output_dir={output_dir}"]) == 0


def reference_log_prob(variables, hparams, src_ids, tgt_ids):
  """Sum of the reference's log-softmax over tgt_ids (teacher forcing), float64."""
  logits = reference.forward_logits(variables, hparams, src_ids, tgt_ids, 8, version="1.4")
  logits = logits - logits.max(axis=1, keepdims=True)
  log_probs = logits - np.log(np.exp(logits).sum(axis=1, keepdims=True))
  return float(log_probs[np.arange(len(tgt_ids)), tgt_ids].sum())


@pytest.fixture(scope="module")
def decoded(imported, tmp_path_factory):
  """(5 Multi30k val sources, a file of them, t2t-decoder's beams of each: [text, score,
  ...] best first), decoded once for the tests below."""
  base = tmp_path_factory.mktemp("decoded")
  sources = lines("val", "en", 5)
  (base / "src.en").write_text("\n".join(sources) + "\n", encoding="utf-8")
  assert t2t_bin.run_in_process(decoder_bin, [
      "t2t-decoder", f"--output_dir={imported[0]}", f"--decode_from_file={base / 'src.en'}",
      f"--decode_to_file={base / 'beams'}", f"--decode_hparams={DECODE},return_beams=true"]) == 0
  rows = [l.split("\t") for l in (base / "beams").read_text(encoding="utf-8").splitlines()]
  return sources, base / "src.en", rows


@pytest.mark.heavy
def test_beams_and_score_file_match_the_reference(imported, decoded, tmp_path, capsys):
  run_dir, variables, t2t_hp = imported
  sources, _, rows = decoded
  targets = lines("val", "de", 5)
  run = runs.load(run_dir)
  expected = translate.translate_lines(run.model, run.vocab, sources,
                                     parse_decode_hparams(DECODE + ",return_beams=true"))
  for row, hyps, source in zip(rows, expected, sources):
    assert row[0::2] == [h.text for h in hyps] and len(hyps) == 3
    src_ids = run.vocab.encode(source) + [1]
    for text, score, hyp in zip(row[0::2], row[1::2], hyps):
      ids = [int(i) for i in hyp.ids]
      ids = ids + [1] if len(ids) < len(src_ids) + 6 else ids  # ended with EOS unless cut
      penalty = ((5.0 + len(ids)) / 6.0) ** 0.6
      theirs = reference_log_prob(variables, t2t_hp, src_ids, ids) / penalty
      assert abs(float(score) - theirs) < 1e-4, (text, score, theirs)
  # --score_file: log p(reference | source), t2t's scoring.
  (tmp_path / "pairs").write_text("".join(f"{s}\t{t}\n" for s, t in zip(sources, targets)),
                                  encoding="utf-8")
  code, _, err = run_binary(capsys, "decoder", f"--output_dir={run_dir}",
                            f"--score_file={tmp_path / 'pairs'}",
                            f"--decode_to_file={tmp_path / 'scores'}")
  assert code == 0, err
  scores = [float(s) for s in (tmp_path / "scores").read_text().split()]
  theirs = [reference_log_prob(variables, t2t_hp, run.vocab.encode(s) + [1],
                               run.vocab.encode(t) + [1]) for s, t in zip(sources, targets)]
  np.testing.assert_allclose(scores, theirs, atol=1e-4, rtol=0)


@pytest.mark.heavy
@pytest.mark.slow
def test_an_ensemble_of_two_copies_decodes_as_one(imported, tmp_path, capsys):
  """The ensemble's mean of two equal distributions is that distribution. Slow: covered by
  test_ensemble (a model with itself is that model; t2t-decoder over several runs) and by
  the imported run's own decoding tests here."""
  run_dir, _, _ = imported
  run2 = str(tmp_path / "run2")
  _import_shared(run2)
  (tmp_path / "src.en").write_text("\n".join(lines("val", "en", 4)) + "\n", encoding="utf-8")
  outputs = []
  for output_dir in (run_dir, f"{run_dir},{run2}"):
    out = tmp_path / f"out{len(outputs)}"
    code, _, err = run_binary(capsys, "decoder", f"--output_dir={output_dir}",
                              f"--decode_from_file={tmp_path / 'src.en'}",
                              f"--decode_to_file={out}", f"--decode_hparams={DECODE}")
    assert code == 0, err
    outputs.append(out.read_text(encoding="utf-8"))
  assert outputs[0] == outputs[1] and outputs[0].strip()


@pytest.mark.heavy
def test_savedmodel_translates_as_the_decoder(imported, decoded, tmp_path, capsys):
  """t2t-exporter's SavedModel of the imported run translates as t2t-decoder (its best
  beams), and so does its LiteRT model through t2t-decoder --engine=litert. (That the
  SavedModel loads with TensorFlow and TF Text only, t2t's subword tokenizer in its graph:
  test_t2t_subwords.py; t2t-serve answers as an export's signatures: test_server.py.)"""
  run_dir, _, _ = imported
  sources, source_file, rows = decoded
  expected = [row[0] for row in rows]
  export_dir = tmp_path / "export"
  code, _, err = run_binary(capsys, "exporter", f"--output_dir={run_dir}",
                            f"--export_dir={export_dir}", f"--decode_hparams={DECODE}",
                            "--export_version=3")
  assert code == 0, err
  served = tf.saved_model.load(str(export_dir / "3")).signatures["serving_default"](
      inputs=tf.constant(sources))["outputs"].numpy()
  assert [t.decode() for t in served] == expected
  # LiteRT: the model holds the search; t2t-decoder tokenizes with t2t's subwords for it.
  pytest.importorskip("ai_edge_litert")
  code, out, err = run_binary(capsys, "exporter", f"--output_dir={run_dir}", "--format=litert",
                              f"--export_dir={tmp_path / 'litert'}", f"--decode_hparams={DECODE}")
  assert code == 0 and "written without a tokenizer" in out, err
  code, _, err = run_binary(capsys, "decoder", f"--output_dir={run_dir}", "--engine=litert",
                            f"--litert_model_dir={tmp_path / 'litert'}",
                            f"--decode_from_file={source_file}",
                            f"--decode_to_file={tmp_path / 'lite'}", f"--decode_hparams={DECODE}")
  assert code == 0, err
  assert (tmp_path / "lite").read_text(encoding="utf-8").splitlines() == expected


def test_ctranslate2_export_is_refused_in_one_line(imported, tmp_path, capsys):
  pytest.importorskip("ctranslate2")
  code, _, err = run_binary(capsys, "exporter", f"--output_dir={imported[0]}",
                            "--format=ctranslate2", f"--export_dir={tmp_path / 'ct2'}")
  assert code == 1 and err.count("\n") == 1
  assert ("CTranslate2 export of tensor2tensor's target-space embedding "
          "(num_target_spaces=32) is not built") in err
  assert not (tmp_path / "ct2").exists()


def test_avg_all_averages_imported_checkpoints(tmp_path, capsys):
  """Three t2t checkpoints imported with --all_checkpoints, averaged by t2t-avg-all: the
  model of the mean of t2t's variables (checked against the reference)."""
  hp = dict(writer.BASE, hidden_size=16, filter_size=32, num_heads=2, num_hidden_layers=2,
            layer_preprocess_sequence="n", layer_postprocess_sequence="da")
  written = writer.write_t2t_dir(str(tmp_path / "t2t"), hp, np.random.default_rng(3),
                                 steps=(100, 200, 300))
  code, out, err = run_binary(capsys, "import", f"--t2t_dir={tmp_path / 't2t'}",
                              "--all_checkpoints", f"--output_dir={tmp_path / 'run'}")
  assert code == 0 and "3 checkpoint(s)" in out, err
  code, _, err = run_binary(capsys, "avg-all", f"--model_dir={tmp_path / 'run'}",
                            f"--output_dir={tmp_path / 'avg'}", "--n=3")
  assert code == 0, err
  run = runs.load(str(tmp_path / "avg"))
  assert run.checkpoint_path.endswith("ckpt-300")
  mean = {k: np.mean([w[k] for w in written.values()], axis=0) for k in written[100]}
  inputs, targets = [5, 9, 12, 30, 1], [7, 8, 22, 1]
  ours = run.model({"inputs": tf.constant([inputs]), "targets": tf.constant([targets])})[0]
  np.testing.assert_allclose(ours.numpy(), reference.forward_logits(mean, hp, inputs, targets, 8),
                             atol=1e-5, rtol=0)


def write_t2t_data_dir(path, vocab, n_train, n_dev):
  """A data_dir as tensor2tensor's t2t-datagen writes it: 5-digit shard names without a
  suffix, tf.train.Examples of int64 ids with EOS, vocab.<problem>.8192.subwords."""
  os.makedirs(path)
  with gzip.open(VOCAB_8K, "rb") as f, open(
      os.path.join(path, "vocab.translate_ende_wmt8k.8192.subwords"), "wb") as g:
    shutil.copyfileobj(f, g)
  for split, source, n in (("train", "train", n_train), ("dev", "val", n_dev)):
    pairs = zip(lines(source, "en", n), lines(source, "de", n))
    with tf.io.TFRecordWriter(os.path.join(
        path, f"translate_ende_wmt8k-{split}-00000-of-00001")) as w:
      for en, de in pairs:
        w.write(example(vocab.encode(en) + [1], vocab.encode(de) + [1]))


@pytest.mark.heavy
def test_finetune_on_a_t2t_data_dir(imported, tmp_path, capsys):
  """t2t-trainer --warm_start_from=<imported run> --problem=translate_ende_wmt8k on a data_dir
  in t2t's layout: it starts from the imported weights, trains and evaluates."""
  run_dir, _, _ = imported
  run = runs.load(run_dir)
  data_dir = str(tmp_path / "t2t_data")
  write_t2t_data_dir(data_dir, run.vocab, 64, 16)
  dev = [(run.vocab.encode(s) + [1], run.vocab.encode(t) + [1])
         for s, t in zip(lines("train", "en", 64), lines("train", "de", 64))]

  def loss(model):
    from t2t_keras.decoding.scoring import score_ids  # pylint: disable=import-outside-toplevel
    scores = score_ids(model, [s for s, _ in dev], [t for _, t in dev])
    return -sum(scores) / sum(len(t) for _, t in dev)

  before = loss(run.model)
  code, _, err = run_binary(
      capsys, "trainer", "--problem=translate_ende_wmt8k", f"--data_dir={data_dir}",
      f"--warm_start_from={run_dir}", f"--output_dir={tmp_path / 'ft'}", "--train_steps=30",
      "--hparams=batch_size=512,learning_rate_warmup_steps=10,layer_prepostprocess_dropout=0.0",
      "--eval_every=30", "--eval_steps=2", "--eval_bleu_sentences=0", "--seed=1")
  assert code == 0, err
  tuned = runs.load(str(tmp_path / "ft"))
  assert tuned.info["warm_start"]["from"].startswith(run_dir)
  assert tuned.hparams.target_space_id == 8 and tuned.hparams.pos == "timing_t2t"
  after = loss(tuned.model)
  # A model one step into training (about ln 8190 = 9.0 nats per token) fitted to 64 pairs
  # for 30 steps: the training pairs' loss drops by far more than one nat.
  print(f"loss per token before {before:.3f}, after {after:.3f}")
  assert before > 8.0 and after < before - 1.0, (before, after)


@pytest.mark.parametrize("name, vocab_name", [
    ("translate_ende_wmt8k", "vocab.translate_ende_wmt8k.8192.subwords"),
    ("translate_ende_wmt32k", "vocab.ende.32768"),  # tensor2tensor 1.4's name
    ("translate_enfr_wmt8k", "vocab.translate_enfr_wmt8k.8192.subwords"),
    ("translate_enfr_wmt32k", "vocab.translate_enfr_wmt32k.32768.subwords"),
    ("translate_encs_wmt32k", "vocab.translate_encs_wmt32k.32768.subwords"),
])
def test_t2t_problem_names_read_a_t2t_data_dir(name, vocab_name, tmp_path):
  """Each of t2t's WMT names finds t2t's shards and vocabulary; ids come back as written."""
  from t2t_keras import registry  # pylint: disable=import-outside-toplevel
  (tmp_path / vocab_name).write_text("".join(f"'{s}'\n" for s in writer.VOCAB), encoding="utf-8")
  records = {"train": [([5, 6, 1], [7, 1]), ([8, 1], [9, 10, 11, 1])], "dev": [([12, 1], [13, 1])]}
  for split, pairs in records.items():
    with tf.io.TFRecordWriter(str(tmp_path / f"{name}-{split}-00000-of-00001")) as w:
      for inputs, targets in pairs:
        w.write(example(inputs, targets))
  (tmp_path / f"{name}-train-00000-of-00001.stats.json").write_text("{}")  # not a shard
  problem = registry.problem(name)
  assert problem.vocab_path(str(tmp_path)) == str(tmp_path / vocab_name)
  assert problem.get_vocabulary(str(tmp_path)).vocab_size == len(writer.VOCAB)
  for split, pairs in records.items():
    got = [(list(f["inputs"].numpy()), list(f["targets"].numpy()))
           for f in problem.dataset(str(tmp_path), split)]
    assert got == pairs


def test_datagen_does_not_build_t2t_vocabularies(tmp_path):
  """translate_ende_wmt8k without t2t's vocabulary in data_dir: an InputError saying what to do."""
  from t2t_keras.errors import InputError  # pylint: disable=import-outside-toplevel
  from t2t_keras.registry import problem  # pylint: disable=import-outside-toplevel
  instance = problem("translate_ende_wmt8k")
  instance.generate_forward_samples = lambda split, tmp_dir=None: iter(
      [{"inputs": "a house", "targets": "ein Haus"}])  # no download in a test
  with pytest.raises(InputError, match="uses tensor2tensor's SubwordTextEncoder vocabulary, "
                                      "which t2t-keras does not build: put t2t's "
                                      r"vocab.translate_ende_wmt8k.<size>.subwords into "
                                      "--data_dir"):
    instance.generate_data(str(tmp_path / "data"), str(tmp_path / "tmp"))
