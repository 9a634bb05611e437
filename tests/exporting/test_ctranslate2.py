"""CTranslate2 export: the converted model decodes as our TensorFlow search does.

The two models compared are built, not trained: their weights come from a seeded NumPy
generator (`random_run`), so they are the same on every CPU, and every verdict below is
a rule that holds for any model rather than a rate measured on one. They cover what the
converter maps: post-norm with sinusoids and the paper's head size, pre-norm with learned
positions and Table 3's smaller heads (d_k = d_v != d_model / h, CTranslate2's head_dim).
Their weights are scaled so that outputs depend on the input and end in EOS at varied
lengths (checked by `test_the_models_vary_and_end`); EOS's embedding row points along
the positional signal of step 16 minus step 0, so it becomes likelier as the output grows.

The tolerance TOL = 1e-4 on log probs: both engines compute each step's log-softmax in
float32 over logits below about 30 in magnitude, so one log prob carries an error of a
few 2^-24 * 30 ~ 2e-6, and a score sums at most 60 of them (up to 1.2e-5 measured on
these models, Intel Xeon family 6 model 85). Two searches
may take different paths only where two candidates lie within that of each other: the
tests accept a difference only where the decision that made it was such a near-tie.
"""

import json
import os
import platform
import subprocess
import sys
import sysconfig

import numpy as np
import pytest

ctranslate2 = pytest.importorskip(
    "ctranslate2", reason="ctranslate2 is not installed (pip install 't2t-keras[ctranslate2]')")

import ct2_search_reference  # noqa: E402
import random_runs  # noqa: E402
from binaries import run_binary  # noqa: E402
from conftest import make_tiny_run  # noqa: E402
from t2t_keras.bin import decoder as decoder_bin  # noqa: E402
from t2t_keras.bin import exporter as exporter_bin  # noqa: E402
from t2t_keras import registry, runs  # noqa: E402
from t2t_keras.decoding import translate  # noqa: E402
from t2t_keras.decoding.settings import parse_decode_hparams  # noqa: E402
from t2t_keras.errors import InputError  # noqa: E402
from t2t_keras.ids import EOS_ID  # noqa: E402
from t2t_keras.exporting import ct2_convert, ct2_translate  # noqa: E402

# The full suite only (T2T_QUICK=1 leaves it out): see conftest.py.
pytestmark = pytest.mark.heavy

TOL = 1e-4
INPUTS = random_runs.DEV_INPUTS
# The models (random_runs.NUMBERS_MODELS): their gains make outputs vary and end.
MODELS = random_runs.NUMBERS_MODELS
SCRIPT = ct2_translate.__file__


@pytest.fixture(scope="module")
def dev_inputs():
  return random_runs.dev_inputs(INPUTS)


@pytest.fixture(scope="module")
def built(tmp_path_factory):
  """{name: (run_dir, ct2_dir)} of each model in MODELS, converted (float32): the session's
  shared runs (random_runs.shared_models)."""
  return {name: (run_dir, os.path.join(run_dir, "ctranslate2"))
          for name, run_dir in random_runs.shared_models(tmp_path_factory).items()}


class Comparison:
  """Ours against CTranslate2's best output for each input, with one decoding.

  `same`: [(index, |score difference|)] where the ids are equal; `differ`: [(index, our
  ids, our score, their ids, their score)] elsewhere; `ours`: our best ids of each input.
  """

  def __init__(self, run_dir, ct2_dir, inputs, decode, ours):
    """`ours`: [(best ids, score)] of our search over `inputs` (translate_lines with
    `decode`, random_runs.shared_decodings)."""
    self.run = runs.load(run_dir)
    self.settings = parse_decode_hparams(decode + ",jit=false")  # no compiles: 3x faster
    self.ours = [list(ids) for ids, _ in ours]
    search = self.settings.search
    self.translator = ct2_translate.Ct2Translator(
        ct2_dir, beam_size=search.beam_size, alpha=search.alpha,
        extra_length=search.extra_length)
    vocab = self.run.vocab
    sources = [[vocab.id_to_piece(i) for i in vocab.encode(s)] for s in inputs]
    self.sources = [vocab.encode(s) + [EOS_ID] for s in inputs]
    self.same, self.differ = [], []
    for i, ((ids, score), t) in enumerate(zip(ours, self.translator.translate_pieces(sources))):
      theirs = [vocab.piece_to_id(p) for p in t[0][0]]
      if list(ids) == theirs:
        self.same.append((i, abs(score - t[0][1])))
      else:
        self.differ.append((i, list(ids), score, theirs, t[0][1]))


@pytest.fixture(scope="module")
def comparisons(built, dev_inputs, tmp_path_factory):
  """{(name, decoding): Comparison} of each model with greedy and beam search."""
  return {(name, decode): Comparison(*built[name], dev_inputs, decode,
                                     random_runs.shared_decodings(tmp_path_factory, name, decode))
          for name in MODELS for decode in ("beam_size=1", "beam_size=4,alpha=0.6")}


@pytest.mark.heavy
@pytest.mark.parametrize("name", sorted(MODELS))
def test_the_models_vary_and_end(comparisons, name):
  """What makes the comparison worth having: most greedy outputs are distinct and end in
  EOS well before the length limit (input + 50), at lengths that vary."""
  c = comparisons[name, "beam_size=1"]
  outputs = c.ours[:60]
  lengths = [len(ids) for ids in outputs]
  assert len({tuple(ids) for ids in outputs}) >= 15, lengths
  assert np.mean([n < 40 for n in lengths]) >= 0.7, lengths
  assert len(set(lengths)) >= 5, lengths


def first_divergence(a, b):
  return next((t for t, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))


@pytest.mark.parametrize("name", sorted(MODELS))
def test_greedy_agrees_except_at_near_ties(comparisons, name):
  """Equal outputs have equal scores; an output differs only where, at the first step the
  two differ, our model gives the two tokens log probs within TOL (ours masks PAD, so
  PAD is never our pick)."""
  c = comparisons[name, "beam_size=1"]
  assert max((d for _, d in c.same), default=0.0) < TOL
  for i, ours, _, theirs, _ in c.differ:
    t = first_divergence(ours + [EOS_ID], theirs + [EOS_ID])
    log_probs = ct2_search_reference.next_log_probs(c.run.model, c.sources[i])([ours[:t]])[0]
    gap = log_probs[(ours + [EOS_ID])[t]] - log_probs[(theirs + [EOS_ID])[t]]
    assert abs(gap) < TOL, (i, ours, theirs, gap)


@pytest.mark.heavy
@pytest.mark.parametrize("name", sorted(MODELS))
def test_beam_search_differs_only_where_ours_found_better(comparisons, name):
  """Equal outputs have equal scores (log p / ((5 + len) / 6) ** alpha); where outputs
  differ, ours scores at least as high, and CTranslate2's rule (tests/
  ct2_search_reference.py: EOS taken only from the best beam_size of a step's 2 *
  beam_size candidates, early exit once its best candidate ended) run over *our* model's
  log probs returns CTranslate2's output and score, so the two engines computed the same
  model and differed only in the search; or the replay met a near-tie."""
  c = comparisons[name, "beam_size=4,alpha=0.6"]
  assert max((d for _, d in c.same), default=0.0) < TOL
  beam = c.settings.search.beam_size
  replayed = 0
  for i, ours, our_score, theirs, their_score in c.differ:
    assert our_score >= their_score - TOL, (i, ours, our_score, theirs, their_score)
    source = c.sources[i]
    limit = c.translator.limit(len(source) - 1)
    hyps, gap = ct2_search_reference.beam_search(
        ct2_search_reference.next_log_probs(c.run.model, source), beam, limit, beam, EOS_ID)
    pieces = lambda ids: [c.run.vocab.id_to_piece(t) for t in ids]
    best = c.translator._rank([(pieces(h), s) for h, s in hyps], limit)[0]  # pylint: disable=protected-access
    if gap >= TOL:
      assert best[0] == pieces(theirs), (i, best, theirs, their_score)
      assert abs(best[1] - their_score) < TOL, (i, best, their_score)
      replayed += 1
  print(f"{name}: {len(c.differ)} of {INPUTS} differ, {replayed} replayed exactly")
  assert replayed >= 1, "no difference was replayed: the rule went untested"


@pytest.mark.parametrize("decode", ["beam_size=1", "beam_size=4,alpha=0.6"])
def test_target_prefixes_agree_with_ours(built, comparisons, decode):
  """With target prefixes (CTranslate2's target_prefix), each output starts with its
  prefix and is scored as ours: the log prob of the whole output, prefix included (the
  prefix's part from score_batch). Prefixes are the first 1-3 ids of *another* input's
  greedy output, so they are forced against the model's own choice; every third input
  has none. Greedy outputs agree but at near-ties, as without prefixes; beam outputs that
  differ are ones where ours scores at least as high (12 of 60 on these models)."""
  c = comparisons["post_norm_sinusoids", decode]
  sources = c.sources[:60]
  free = c.ours[:60]
  prefixes = [[] if i % 3 == 2 else free[(i + 7) % 60][:1 + i % 3]
              for i in range(len(sources))]
  assert sum(p != free[i][:len(p)] for i, p in enumerate(prefixes)) >= 20
  ours = translate.translate_ids(c.run.model, sources, c.settings, prefixes=prefixes)
  pieces = lambda ids: [c.run.vocab.id_to_piece(t) for t in ids]  # noqa: E731
  theirs = c.translator.translate_pieces([pieces(s[:-1]) for s in sources],
                                         [pieces(p) for p in prefixes])
  differ = 0
  for i, (o, t) in enumerate(zip(ours, theirs)):
    their_ids = [c.run.vocab.piece_to_id(p) for p in t[0][0]]
    assert their_ids[:len(prefixes[i])] == prefixes[i] == o[0][0][:len(prefixes[i])]
    if their_ids == o[0][0]:
      assert abs(o[0][1] - t[0][1]) < TOL, (i, o[0], t[0])
      continue
    differ += 1
    if c.settings.search.beam_size == 1:
      step = first_divergence(o[0][0] + [EOS_ID], their_ids + [EOS_ID])
      log_probs = ct2_search_reference.next_log_probs(c.run.model, sources[i])([o[0][0][:step]])[0]
      gap = log_probs[(o[0][0] + [EOS_ID])[step]] - log_probs[(their_ids + [EOS_ID])[step]]
      assert abs(gap) < TOL, (i, o[0], t[0], gap)
    else:
      assert o[0][1] >= t[0][1] - TOL, (i, o[0], t[0])
  print(f"{decode}: {differ} of 60 prefixed outputs differ")
  assert differ <= 30, "most outputs must agree, or their scores went untested"


def test_the_length_penalty_kind_reaches_ctranslate2(built, dev_inputs):
  """length_penalty_kind=length (log p / length ** alpha, EOS counted) decodes through
  CTranslate2 as through our search: equal outputs have equal scores; where the searches
  part, CTranslate2's score is still its output's log prob under our model (`scoring`)
  over length ** alpha, so both engines rank by the same number and differ only in the
  search. The kind changes outputs against GNMT's penalty at the same alpha, so the option
  is not lost on the way. Patience 4, the kind's default, agreed on 55 of these 60
  (patience 1: 26; docs/ctranslate2.md)."""
  from t2t_keras.decoding import scoring  # pylint: disable=import-outside-toplevel
  run_dir, ct2_dir = built["post_norm_sinusoids"]
  run = runs.load(run_dir)
  sources = [run.vocab.encode(s) + [EOS_ID] for s in dev_inputs[:60]]
  decode = "beam_size=4,alpha=1.0,jit=false,length_penalty_kind="
  ours = {kind: [hyps[0] for hyps in translate.translate_ids(
              run.model, sources, parse_decode_hparams(decode + kind))]
          for kind in ("gnmt", "length")}
  assert sum(a[0] != b[0] for a, b in zip(ours["gnmt"], ours["length"])) >= 3
  translator = ct2_translate.Ct2Translator(ct2_dir, beam_size=4, alpha=1.0,
                                           length_penalty_kind="length")
  assert translator.patience == 4.0
  pieces = [[run.vocab.id_to_piece(t) for t in s[:-1]] for s in sources]
  best = [hyps[0] for hyps in translator.translate_pieces(pieces)]
  theirs = [[run.vocab.piece_to_id(p) for p in b[0]] for b in best]
  their_scores = [b[1] for b in best]
  same = [i for i, (o, t) in enumerate(zip(ours["length"], theirs)) if o[0] == t]
  assert len(same) >= 50, f"only {len(same)} of 60 outputs agree"
  for i in same:
    assert abs(ours["length"][i][1] - their_scores[i]) < TOL, i
  differ = [i for i in range(60) if i not in same]
  log_probs = scoring.score_ids(run.model, [sources[i] for i in differ],
                                [theirs[i] + [EOS_ID] for i in differ])
  for i, log_prob in zip(differ, log_probs):
    assert abs(their_scores[i] - log_prob / (len(theirs[i]) + 1)) < TOL, i


def test_gnmt_ranking_of_hand_made_hypotheses(tmp_path):
  """`_rank` orders by log p / ((5 + len) / 6) ** alpha, EOS counted, finished ones first."""
  translator = ct2_translate.Ct2Translator.__new__(ct2_translate.Ct2Translator)
  translator.settings = {"alpha": 1.0, "beam_size": 2, "length_penalty_kind": "gnmt"}
  translator.eos, translator.pad = "</s>", "<pad>"
  hyps = [(["a", "</s>"], -1.4), (["a", "b", "c", "d", "</s>"], -1.9), (["x", "y"], -0.1),
          (["<pad>", "</s>"], -0.2)]
  # scores: -1.4 / (7/6) = -1.2; -1.9 / (10/6) = -1.14; the live ["x", "y"] and the
  # hypothesis holding PAD are dropped because others finished.
  ranked = translator._rank(hyps, limit=9)  # pylint: disable=protected-access
  assert [p for p, _ in ranked] == [["a", "b", "c", "d"], ["a"]]
  np.testing.assert_allclose([s for _, s in ranked], [-1.9 / (10 / 6), -1.4 / (7 / 6)])
  live = translator._rank([(["x", "y"], -0.6), (["z"], -0.3)], limit=7)  # pylint: disable=protected-access
  assert [p for p, _ in live] == [["z"], ["x", "y"]]  # none finished: all by log p / lp(limit)
  np.testing.assert_allclose([s for _, s in live], [-0.3 / 2, -0.6 / 2])
  # length_penalty_kind=length: log p / length ** alpha, EOS counted; at alpha 1 the longer
  # output wins where GNMT's penalty keeps the shorter.
  two = [(["a", "</s>"], -1.0), (["a", "b", "c", "</s>"], -1.6)]
  assert [p for p, _ in translator._rank(two, limit=9)] == [["a"], ["a", "b", "c"]]  # pylint: disable=protected-access
  translator.settings["length_penalty_kind"] = "length"
  ranked = translator._rank(two, limit=9)  # pylint: disable=protected-access
  assert [p for p, _ in ranked] == [["a", "b", "c"], ["a"]]
  np.testing.assert_allclose([s for _, s in ranked], [-1.6 / 4, -1.0 / 2])


def test_a_conversion_removes_what_a_killed_one_left(tmp_path):
  """A SIGKILLed conversion leaves its .<name>-<host>-<pid>-* directory beside the model
  directory; the next conversion into that directory removes the dead process's (and
  keeps a live one's and another directory's). LiteRT's conversion writes the same way."""
  proc = subprocess.Popen([sys.executable, "-c", ""])
  proc.wait()  # its pid is a dead process's
  host = platform.node()
  kept = [f".ctranslate2-{host}-{os.getpid()}-abc", f".ctranslate2_int8-{host}-{proc.pid}-de"]
  for name in kept + [f".ctranslate2-{host}-{proc.pid}-fgh"]:
    os.makedirs(tmp_path / name)

  def write(directory):
    with open(os.path.join(directory, "model.bin"), "w") as f:
      f.write("a model")

  ct2_convert.write_model_dir(str(tmp_path / "ctranslate2"), write)
  assert sorted(os.listdir(tmp_path)) == sorted(kept + ["ctranslate2"])
  assert os.listdir(tmp_path / "ctranslate2") == ["model.bin"]


def test_without_ctranslate2_the_export_says_how_to_install_it(tmp_path, monkeypatch):
  monkeypatch.setitem(sys.modules, "ctranslate2", None)  # import ctranslate2 -> ImportError
  with pytest.raises(InputError, match=r"^CTranslate2 is not installed: pip install "
                                       r"'t2t-keras\[ctranslate2\]'"):
    ct2_convert.convert_run(make_tiny_run(tmp_path))


def test_unsupported_settings_are_refused_with_one_line(tmp_path):
  hp = registry.hparams("transformer_tiny").replace(attention_key_channels=16,
                                                    attention_value_channels=32)
  with pytest.raises(ct2_convert.UnsupportedError,
                     match=r"^CTranslate2 cannot express d_k != d_v \(attention_key_channels="
                           r"16, attention_value_channels=32\)"):
    ct2_convert.check_supported(hp)
  with pytest.raises(ct2_convert.UnsupportedError, match="supports the 'transformer' model"):
    ct2_convert.check_supported(registry.hparams("transformer_tiny"), "lstm_seq2seq")
  with pytest.raises(InputError, match="--quantization='int4': expected one of none, float32"):
    ct2_convert.convert_run(make_tiny_run(tmp_path), quantization="int4")


@pytest.mark.heavy
def test_exporter_and_decoder_binaries(built, comparisons, dev_inputs, tmp_path, capsys):
  """t2t-decoder --engine=ctranslate2 and --engine=tensorflow write the same lines (greedy
  and beam search) but where the engines' outputs differ for the reasons the tests above
  check; t2t-exporter --format=ctranslate2 --quantization=int8 gives an int8 model that
  carries the decoding it was exported with."""
  run_dir, ct2_dir = built["post_norm_sinusoids"]
  source = tmp_path / "in.txt"
  source.write_text("\n".join(dev_inputs[:60]) + "\n")
  for decode in ("beam_size=1", "beam_size=4,alpha=0.6"):
    lines = {}
    for engine in ("tensorflow", "ctranslate2"):
      output = tmp_path / f"{engine}.txt"
      code, _, err = run_binary(capsys, decoder_bin, f"--output_dir={run_dir}",
                                f"--engine={engine}", f"--decode_from_file={source}",
                                f"--decode_to_file={output}",
                                f"--decode_hparams={decode},jit=false")
      assert code == 0, err
      lines[engine] = output.read_text().splitlines()
    differ = {i for i, *_ in comparisons["post_norm_sinusoids", decode].differ}
    assert len(lines["tensorflow"]) == len(lines["ctranslate2"]) == 60
    assert all(ours == theirs for i, (ours, theirs) in enumerate(
        zip(lines["tensorflow"], lines["ctranslate2"])) if i not in differ), decode
  int8_dir = tmp_path / "int8"
  code, out, err = run_binary(capsys, exporter_bin, f"--output_dir={run_dir}",
                              "--format=ctranslate2", "--quantization=int8",
                              f"--export_dir={int8_dir}", "--decode_hparams=beam_size=3,alpha=1.0")
  assert code == 0, err
  assert out.strip().endswith(str(int8_dir))
  settings = json.loads((int8_dir / "t2t_decoding.json").read_text())
  assert (settings["beam_size"], settings["alpha"], settings["quantization"]) == (3, 1.0, "int8")
  assert "beam 3, alpha 1.0" in (int8_dir / "README.md").read_text()
  translator = ct2_translate.Ct2Translator(str(int8_dir))
  assert translator.compute_type.startswith("int8")
  assert all(score <= 0 for _, score in translator.translate(dev_inputs[:20]))
  # Each weight matrix element (embedding counted once) takes 1 byte instead of 4, and
  # each row of d_model (32) or more elements gains a 4-byte scale: >= 3 - 4 / 32 bytes
  # saved an element, less the file's headers (2.86 measured).
  elements = sum(int(np.prod(w.shape)) for w in runs.load(run_dir).model.weights
                 if len(w.shape) >= 2)
  saved = os.path.getsize(os.path.join(ct2_dir, "model.bin")) - os.path.getsize(
      int8_dir / "model.bin")
  assert saved >= 2.8 * elements, (saved, elements)
  # --decode_prefix_file with --engine=ctranslate2: every output starts with its prefix.
  prefixes = ["", "drei", "neun und", "", "sieben"] * 12
  prefix_file, output = tmp_path / "prefix.txt", tmp_path / "ct2_prefixed.txt"
  prefix_file.write_text("\n".join(prefixes) + "\n")
  code, _, err = run_binary(capsys, decoder_bin, f"--output_dir={run_dir}",
                            "--engine=ctranslate2", f"--decode_from_file={source}",
                            f"--decode_prefix_file={prefix_file}", f"--decode_to_file={output}",
                            "--decode_hparams=beam_size=4,alpha=0.6,jit=false")
  assert code == 0, err
  lines = output.read_text().splitlines()
  assert len(lines) == 60 and all(line.startswith(p) for line, p in zip(lines, prefixes))


@pytest.mark.parametrize("binary, args, message", [
    ("exporter", ["--quantization=int8"], "--quantization is for --format=ctranslate2"),
    ("exporter", ["--format=ctranslate2"], "ctranslate2 exists: pass --overwrite"),
    ("decoder", ["--engine=ctranslate2", "--ct2_model_dir=TMP", "--decode_from_file=IN"],
     "no CTranslate2 model in TMP: convert the run first"),
    ("decoder", ["--engine=ctranslate2", "--score_file=IN", "--decode_to_file=TMP/x"],
     "--score_file and --attention_plot_dir need --engine=tensorflow"),
    ("decoder", ["--engine=ctranslate2", "--decode_from_file=IN",
                 "--decode_hparams=stop_early=false"],
     "--engine=ctranslate2 cannot run stop_early=false"),
    ("decoder", ["--engine=ctranslate2", "--decode_from_file=IN",
                 "--decode_hparams=sampling_method=random"],
     "--engine=ctranslate2 runs beam and greedy search only; sample with --engine=tensorflow"),
])
def test_binaries_refuse_what_they_cannot_do(built, tmp_path, capsys, binary, args, message):
  run_dir, _ = built["post_norm_sinusoids"]
  source = tmp_path / "in.txt"
  source.write_text("one\n")
  fill = lambda text: text.replace("TMP", str(tmp_path)).replace("IN", str(source))
  code, _, err = run_binary(capsys, {"exporter": exporter_bin, "decoder": decoder_bin}[binary],
                            f"--output_dir={run_dir}", *map(fill, args))
  assert code != 0
  assert fill(message) in err
  assert len(err.strip().splitlines()) == 1, err


def test_the_script_runs_without_tensorflow_or_this_package(built, dev_inputs):
  """ct2_translate.py needs ctranslate2 and sentencepiece only: TensorFlow and t2t_keras
  are made unimportable, and it prints what Ct2Translator gives."""
  _, ct2_dir = built["pre_norm_learned_small_heads"]
  lines = dev_inputs[:5]
  expected = ct2_translate.Ct2Translator(ct2_dir).translate(lines)
  site = sysconfig.get_paths()["purelib"]
  code = (f"import sys, runpy; sys.path.append({site!r})\n"
          "sys.modules['tensorflow'] = sys.modules['t2t_keras'] = None\n"
          f"sys.argv = [{SCRIPT!r}] + sys.argv[1:]\n"
          f"runpy.run_path({SCRIPT!r}, run_name='__main__')\n")
  result = subprocess.run([sys.executable, "-I", "-S", "-c", code, ct2_dir, *lines],
                          capture_output=True, text=True, cwd="/", timeout=300,
                          env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"))
  assert result.returncode == 0, result.stderr[-3000:]
  printed = [line.split("\t") for line in result.stdout.splitlines()]
  assert [t for _, t in printed] == [t for t, _ in expected]
  np.testing.assert_allclose([float(s) for s, _ in printed], [s for _, s in expected],
                             atol=1e-4)


def test_the_script_takes_a_prefix_file(built, dev_inputs, tmp_path):
  """ct2_translate.py --prefix_file: line-aligned target prefixes, as Ct2Translator's."""
  _, ct2_dir = built["post_norm_sinusoids"]
  lines, prefixes = dev_inputs[:4], ["drei", "", "neun und", "sieben"]
  expected = ct2_translate.Ct2Translator(ct2_dir).translate(lines, prefixes=prefixes)
  assert all(t.startswith(p) for (t, _), p in zip(expected, prefixes))
  prefix_file = tmp_path / "prefix.txt"
  prefix_file.write_text("\n".join(prefixes) + "\n")
  run = lambda *args: subprocess.run(  # noqa: E731
      [sys.executable, SCRIPT, *args, ct2_dir], input="\n".join(lines) + "\n",
      capture_output=True, text=True, timeout=300,
      env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"))
  result = run(f"--prefix_file={prefix_file}")
  assert result.returncode == 0, result.stderr[-3000:]
  assert [line.split("\t")[1] for line in result.stdout.splitlines()] == [
      t for t, _ in expected]
  prefix_file.write_text("drei\n")
  result = run(f"--prefix_file={prefix_file}")
  assert result.returncode == 2 and f"4 inputs but 1 lines in {prefix_file}" in result.stderr
