"""Automatic checkpoint selection: candidate windows, the choice by dev BLEU, the report."""

import json
import os

import pytest
import tensorflow as tf

from t2t_keras import bin as t2t_bin
from t2t_keras import registry
from t2t_keras.bin import avg_all as avg_all_bin
from t2t_keras.data import vocabulary
from t2t_keras.decoding import translate
from t2t_keras.decoding.settings import parse_decode_hparams
from t2t_keras.ids import EOS_ID, PAD_ID, UNK_ID
from t2t_keras.models.transformer import Transformer
from t2t_keras import runs
from t2t_keras.tuning import averaging, selection

SENTENCES = ["one hundred and five", "twenty-three", "seven thousand, four hundred",
             "nine", "eighty-eight thousand and one", "six hundred and twelve"]
DECODE = "beam_size=2,alpha=0.6,extra_length=10,batch_size=4,jit=false"
STEPS = [100, 200, 300, 400, 500, 600]


def test_end_checkpoints_spread_over_the_newer_half():
  paths = [f"ckpt-{s}" for s in range(1, 12)]  # 11 checkpoints: indices 0..10
  assert selection.end_checkpoints(paths, 1) == [10]
  assert selection.end_checkpoints(paths, 2) == [10, 5]
  assert selection.end_checkpoints(paths, 3) == [10, 8, 5]  # 10 - round(2.5) = 8 (banker's)
  assert selection.end_checkpoints(paths[:1], 3) == [0]
  assert selection.end_checkpoints(paths[:2], 3) == [1]  # half of one step back: no room


def test_candidate_windows_cover_every_size_and_end_once():
  paths = [f"ckpt-{s}" for s in STEPS]
  got = [(n, [p.split("-")[1] for p in w]) for n, w in
         selection.candidate_windows(paths, windows=[1, 2, 10], ends=2)]
  assert got == [
      (1, ["600"]), (2, ["500", "600"]), (6, ["100", "200", "300", "400", "500", "600"]),
      (1, ["400"]), (2, ["300", "400"]), (4, ["100", "200", "300", "400"])]


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
  """A 'run' of random-weight checkpoints at STEPS, with vocabulary and run info."""
  out = tmp_path_factory.mktemp("run")
  corpus = SENTENCES * 20 + ["einhundertfünf", "dreiundzwanzig", "neun"] * 20
  vocab = vocabulary.train_sentencepiece(corpus, str(out / "spm.model"), 60, num_threads=1)
  hp = registry.hparams("transformer_tiny").replace(
      hidden_size=16, filter_size=32, num_heads=2, num_encoder_layers=1, num_decoder_layers=1)
  model = Transformer(vocab.vocab_size, hp)
  model.build_for_ids()
  manager = tf.train.CheckpointManager(tf.train.Checkpoint(model=model), str(out), 100,
                                       checkpoint_name="ckpt")
  for i, step in enumerate(STEPS):
    for v in model.trainable_variables:
      value = tf.random.stateless_normal(v.shape, seed=[i, 7])
      if v.shape[0] == vocab.vocab_size:  # the shared embedding: PAD, EOS and UNK get
        value = tf.tensor_scatter_nd_update(  # logit 0, so outputs run long enough for
            value, [[PAD_ID], [EOS_ID], [UNK_ID]], tf.zeros([3, v.shape[1]]))  # 4-grams
      v.assign(value)
    manager.save(checkpoint_number=step)
  runs.save_run_info(str(out), hp, "translate_ende_numbers", vocab.vocab_size,
                         str(out / "spm.model"))
  return str(out)


def _translations_of(run_dir, window_steps, tmp_path):
  """What the average of the checkpoints at window_steps translates SENTENCES to."""
  prefix = str(tmp_path / "reference_avg" / "ckpt")
  averaging.average_checkpoint_files(
      [os.path.join(run_dir, f"ckpt-{s}") for s in window_steps], prefix)
  model, _, info, _ = runs.load_model(run_dir, prefix)
  vocab = vocabulary.SubwordVocabulary(info["vocab_path"])
  return translate.decode_lines(model, vocab, SENTENCES, parse_decode_hparams(DECODE))


@pytest.mark.heavy
def test_chooses_the_window_whose_translations_match_the_references(run_dir, tmp_path):
  # References = the outputs of the 2-checkpoint window ending at step 400 (the earlier
  # end), so that candidate scores 100 and every other one less. (Random weights give
  # one-word outputs, so word BLEU is 0 for all and the tie goes to chrF.)
  references = _translations_of(run_dir, [300, 400], tmp_path)
  out = str(tmp_path / "selected")
  result = selection.select_average(run_dir, out, SENTENCES, references, windows=[1, 2, 3],
                                    ends=2, decode_overrides=DECODE, log=lambda *a: None)
  chosen = result["chosen"]
  assert (chosen["n"], chosen["first_step"], chosen["last_step"]) == (2, 300, 400)
  assert chosen["chrf"] == 100.0
  assert len(result["candidates"]) == 6  # 3 sizes x 2 ends (600 and 400)
  assert max(c["chrf"] for c in result["candidates"]
             if (c["n"], c["last_step"]) != (2, 400)) < 100.0
  # The output directory is a run directory whose latest checkpoint is the choice.
  assert tf.train.latest_checkpoint(out) == os.path.join(out, "ckpt-400")
  model, _, info, _ = runs.load_model(out)
  vocab = vocabulary.SubwordVocabulary(info["vocab_path"])
  assert translate.decode_lines(model, vocab, SENTENCES,
                              parse_decode_hparams(DECODE)) == references
  # What was tried and why, on disk.
  with open(os.path.join(out, selection.SELECTION_JSON)) as f:
    saved = json.load(f)
  assert saved["candidates"] == result["candidates"] and "highest cased sacreBLEU" in saved["rule"]
  table = open(os.path.join(out, selection.SELECTION_MD)).read()
  assert "| 2 | 300-400 | **0.00** | 100.00 |" in table
  assert not os.path.exists(os.path.join(out, "candidates"))


def test_merge_overrides_lets_the_later_values_win():
  assert selection.merge_overrides("beam_size=4,alpha=0.6", "alpha=1.0,extra_length=9") == \
      "beam_size=4,alpha=1.0,extra_length=9"
  assert selection.merge_overrides("", "beam_size=8") == "beam_size=8"
  assert selection.merge_overrides("alpha=0.6", "") == "alpha=0.6"
  with pytest.raises(ValueError, match="bad hparams override 'beam_size': expected key=value"):
    selection.merge_overrides("alpha=0.6", "beam_size")


@pytest.mark.heavy
def test_decode_grid_keeps_the_decoding_that_matches_the_references(run_dir, tmp_path):
  # References = what the newest checkpoint outputs with at most 3 extra tokens; the
  # window stage (extra_length 10) cannot reach chrF 100 with any window, the grid can.
  prefix = os.path.join(run_dir, "ckpt-600")
  model, _, info, _ = runs.load_model(run_dir, prefix)
  vocab = vocabulary.SubwordVocabulary(info["vocab_path"])
  short = selection.merge_overrides(DECODE, "extra_length=3")
  references = translate.decode_lines(model, vocab, SENTENCES, parse_decode_hparams(short))
  out = str(tmp_path / "selected")
  result = selection.select_average(
      run_dir, out, SENTENCES, references, windows=[1], ends=1, decode_overrides=DECODE,
      decode_grid=["extra_length=5", "extra_length=3", "extra_length=10", "beam_size=2"],
      log=lambda *a: None)
  assert result["window_decode_hparams"] == DECODE
  assert result["decode_hparams"] == short
  # The window stage's decoding first, then the grid; entries that give the window
  # stage's decoding again (extra_length=10, beam_size=2 are DECODE's) are not redone.
  assert [d["decode_hparams"] for d in result["decodings"]] == [
      DECODE, selection.merge_overrides(DECODE, "extra_length=5"), short]
  scores = {d["decode_hparams"]: d["chrf"] for d in result["decodings"]}
  # (DECODE's chrF below 100: the references are not what the window stage outputs)
  assert scores[short] == 100.0 and max(v for k, v in scores.items() if k != short) < 100.0
  assert result["decodings"][0]["chrf"] == result["chosen"]["chrf"]
  table = open(os.path.join(out, selection.SELECTION_MD)).read()
  assert f"| {short} | **0.00** | 100.00 |" in table
  with open(os.path.join(out, selection.SELECTION_JSON)) as f:
    assert json.load(f)["decode_hparams"] == short


@pytest.mark.heavy
def test_decode_grid_ties_keep_the_window_stages_decoding(run_dir, tmp_path):
  references = _translations_of(run_dir, [600], tmp_path)
  result = selection.select_average(
      run_dir, str(tmp_path / "sel"), SENTENCES, references, windows=[1], ends=1,
      decode_overrides=DECODE, decode_grid=["bleu_lang=en", "extra_length=3"],
      log=lambda *a: None)
  # bleu_lang does not change the outputs: a tie at chrF 100, so DECODE stays.
  assert [d["chrf"] for d in result["decodings"]][:2] == [100.0, 100.0]
  assert result["decodings"][2]["chrf"] < 100.0
  assert result["decode_hparams"] == DECODE


def test_ties_go_to_chrf_then_the_wider_window_then_the_later_end():
  a = {"bleu": 30.0, "chrf": 60.0, "n": 5, "last_step": 600}
  assert selection._better({"bleu": 30.0, "chrf": 60.1, "n": 1, "last_step": 100}, a)
  assert selection._better({"bleu": 30.0, "chrf": 60.0, "n": 10, "last_step": 500}, a)
  assert selection._better({"bleu": 30.0, "chrf": 60.0, "n": 5, "last_step": 700}, a)
  assert not selection._better({"bleu": 29.9, "chrf": 70.0, "n": 20, "last_step": 900}, a)


def test_parsing_runs_are_compared_by_evalb_f1_then_complete_match():
  """A problem's dev_score hook: parsing ranks checkpoint averages by EVALB F1 of the
  rebuilt trees (ties: complete match); translation keeps sacreBLEU, then chrF."""
  assert selection.dev_score_of("translate_ende_numbers") is selection.SACREBLEU
  assert selection.dev_score_of(None) is selection.SACREBLEU
  score = selection.dev_score_of("parsing_english_ptb8k_words")
  assert (score.name, score.key, score.second_key) == ("EVALB F1", "f1", "complete_match")
  gold = ["(S (NP (DT the) (NN dog)) (VP (VBD saw) (NP (PRP it))) (. .))",
          "(S (NP (NNS stocks)) (VP (VBD fell)))"]
  sources = ["the dog saw it .", "stocks fell"]
  right = ["(S (NP the dog )NP (VP saw (NP it )NP )VP . )S", "(S (NP stocks )NP (VP fell )VP )S"]
  assert score.score(sources, right, gold)["f1"] == 100.0
  # Sentence 1 loses its object NP: 3 of 4 gold brackets, 3 test brackets.
  half = ["(S (NP the dog )NP (VP saw it )VP . )S", right[1]]
  got = score.score(sources, half, gold)
  recall, precision = 6 / 7, 1.0
  assert got["f1"] == pytest.approx(100 * 2 * precision * recall / (precision + recall))
  assert got["complete_match"] == 50.0
  # Outputs that are no tree at all still score (the flat fallback), never crash.
  assert score.score(sources, ["", ")NP ("], gold)["f1"] >= 0.0
  a = {"f1": 80.0, "complete_match": 10.0, "n": 5, "last_step": 600}
  assert selection._better({"f1": 80.0, "complete_match": 12.0, "n": 1, "last_step": 100},
                           a, score)
  assert not selection._better({"f1": 79.9, "complete_match": 90.0, "n": 20,
                                "last_step": 900}, a, score)


def test_max_step_ignores_newer_checkpoints(run_dir, tmp_path):
  result = selection.select_average(run_dir, str(tmp_path / "sel"), SENTENCES, SENTENCES,
                                    windows=[2], ends=1, decode_overrides=DECODE,
                                    max_step=400, log=lambda *a: None)
  assert [(c["first_step"], c["last_step"]) for c in result["candidates"]] == [(300, 400)]


def _avg_all(capsys, *args):
  capsys.readouterr()
  code = t2t_bin.run_in_process(avg_all_bin, ["t2t-avg-all", *args])
  out = capsys.readouterr()
  return code, out.out, out.err


@pytest.mark.heavy
def test_t2t_avg_all_selects_with_dev_files(capsys, run_dir, tmp_path):
  src, ref = tmp_path / "dev.en", tmp_path / "dev.de"
  src.write_text("\n".join(SENTENCES) + "\n")
  ref.write_text("\n".join(_translations_of(run_dir, [600], tmp_path)) + "\n")
  out = str(tmp_path / "sel")
  code, stdout, err = _avg_all(capsys, f"--model_dir={run_dir}", f"--output_dir={out}",
                               f"--select_from_file={src}", f"--select_reference={ref}",
                               "--select_windows=1,4", f"--select_decode_hparams={DECODE}")
  assert code == 0, err
  assert "chose the average of 1 checkpoint(s), steps 600-600" in stdout
  assert tf.train.latest_checkpoint(out) == os.path.join(out, "ckpt-600")
  # With a grid, the chosen decoding is what the printed command uses.
  code, stdout, err = _avg_all(capsys, f"--model_dir={run_dir}", f"--output_dir={out}",
                               f"--select_from_file={src}", f"--select_reference={ref}",
                               "--select_windows=1", f"--select_decode_hparams={DECODE}",
                               "--select_decode_grid=alpha=1.5; extra_length=2")
  assert code == 0, err
  with open(os.path.join(out, selection.SELECTION_JSON)) as f:
    saved = json.load(f)
  assert len(saved["decodings"]) == 3
  assert f"--decode_hparams={saved['decode_hparams']} ..." in stdout


@pytest.mark.parametrize("args,expected", [
    (["--select_from_file={src}"], "--select_from_file and --select_reference go together"),
    (["--select_from_file={src}", "--select_reference={short}"],
     "has 6 lines but {short} has 1"),
    (["--select_from_file={src}", "--select_reference={src}", "--select_windows=0,5"],
     "--select_windows=0,5: expected positive integers"),
    (["--select_from_file={src}", "--select_reference={tmp}/none.de"],
     "--select_reference={tmp}/none.de: no such file"),
    (["--select_from_file={src}", "--select_reference={src}",
      "--select_decode_hparams=beam_sise=4"], "beam_sise"),
    (["--select_from_file={src}", "--select_reference={src}",
      "--select_decode_grid=alpha=1.0;beam_sise=8"], "beam_sise"),
    (["--select_decode_grid=alpha=1.0"], "--select_decode_grid needs dev data"),
])
def test_bad_selection_input_is_one_clear_line(capsys, run_dir, tmp_path, args, expected):
  src, short = tmp_path / "dev.en", tmp_path / "short.de"
  src.write_text("\n".join(SENTENCES) + "\n")
  short.write_text("x\n")
  places = dict(src=src, short=short, tmp=tmp_path)
  code, _, err = _avg_all(capsys, f"--model_dir={run_dir}", f"--output_dir={tmp_path}/sel",
                          *[a.format(**places) for a in args])
  lines = [line for line in err.splitlines() if line.strip()]
  assert code == 1 and len(lines) == 1, err
  assert lines[0].startswith("t2t-avg-all: error: ") and expected.format(**places) in lines[0]
  assert not os.path.exists(tmp_path / "sel")  # nothing decoded, averaged or written
