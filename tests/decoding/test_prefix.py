"""Target prefixes in the compiled searches: each output starts with its prefix, and its
score is the model's log prob of the whole output, prefix included."""

import itertools

import numpy as np
import pytest
import tensorflow as tf

from conftest import tiny_model
from t2t_keras.decoding import beam_search as bs
from t2t_keras.decoding import search
from t2t_keras.decoding.search import Sampling, SearchOptions
from t2t_keras.models.transformer import shift_right

SRC = tf.constant([[3, 4, 5, 1, 0, 0], [6, 7, 8, 9, 10, 1], [11, 1, 0, 0, 0, 0]])
PREFIXES = [[7, 7, 9], [], [12]]  # a mixed batch: the second sentence has none


@pytest.fixture(scope="module")
def model():
  return tiny_model(23, seed=5)


def _padded(prefixes, width=None):
  width = width or max(1, max(len(p) for p in prefixes))
  rows = np.zeros([len(prefixes), width], np.int32)
  for r, p in enumerate(prefixes):
    rows[r, :len(p)] = p
  return tf.constant(rows)


def _output(row):
  """The ids of an output row up to and including EOS (or all of them)."""
  row = [int(x) for x in row]
  return row[:row.index(1) + 1] if 1 in row else [x for x in row if x]


def _log_prob(model, src, output):
  """The model's log prob of `output` (ids) given one source row [1, S], by teacher forcing."""
  logits, _ = model.decode(shift_right(tf.constant([output])), *model.encode(src))
  log_probs = tf.nn.log_softmax(logits)[0].numpy()
  return float(sum(log_probs[t, token] for t, token in enumerate(output)))


def _search(model, beam, prefixes=None, **kw):
  kw = dict(dict(alpha=0.0, extra_length=6), **kw)
  prefix = None if prefixes is None else _padded(prefixes)
  ids, scores = search.search(model, SRC, SearchOptions(beam_size=beam, **kw), prefix=prefix)
  return ids.numpy(), scores.numpy()


@pytest.mark.parametrize("beam,sampling", [(1, None), (3, None), (2, Sampling(1.0, 0, 1.0, 3))],
                         ids=["greedy", "beam", "sampling"])
def test_every_output_starts_with_its_prefix_and_is_scored_by_the_model(model, beam, sampling):
  ids, scores = _search(model, beam, PREFIXES, sampling=sampling)
  for r, prefix in enumerate(PREFIXES):
    for k in range(beam):
      output = _output(ids[r, k])
      assert output[:len(prefix)] == prefix, (r, k, output)
      # alpha 0: the score is the log prob, the prefix's tokens included
      assert scores[r, k] == pytest.approx(_log_prob(model, SRC[r:r + 1], output), abs=1e-4)


@pytest.mark.parametrize("beam", [1, 3])
def test_a_sentence_without_prefix_decodes_as_without_the_argument(model, beam):
  free_ids, free_scores = _search(model, beam)
  ids, scores = _search(model, beam, PREFIXES)
  np.testing.assert_array_equal(ids[1], free_ids[1])
  np.testing.assert_allclose(scores[1], free_scores[1], atol=1e-5)


def test_the_outputs_own_start_as_prefix_changes_nothing_in_greedy_search(model):
  """Greedy search takes the argmax at every step, so forcing the tokens it would pick
  anyway cannot change its output. (Beam search keeps no such promise: with a prefix every
  beam extends it, which can find a better completion than the free search did.)"""
  beam = 1
  free_ids, free_scores = _search(model, beam)
  starts = [_output(free_ids[r, 0])[:2] for r in range(len(SRC))]
  ids, scores = _search(model, beam, starts)
  np.testing.assert_array_equal(ids[:, 0], free_ids[:, 0])
  np.testing.assert_allclose(scores[:, 0], free_scores[:, 0], atol=1e-5)


@pytest.mark.parametrize("stop_early", [True, False])
def test_beam_search_finds_the_best_completion_of_the_prefix(stop_early):
  """A beam as wide as every completion finds the best output that starts with the
  prefix, of an exhaustive search (vocabulary 5 less PAD, outputs up to 4 ids, length
  penalty 0.6); run to the end, it returns every finished completion in exhaustive order."""
  m = tiny_model(5, seed=4)
  src, prefix, alpha, tokens = tf.constant([[3, 1]]), [4, 2], 0.6, [2, 3, 4]
  max_len = 4  # 2 non-pad source ids + extra_length 2
  candidates = [prefix + list(p) + [1] for n in range(max_len - len(prefix))
                for p in itertools.product(tokens, repeat=n)]
  exhaustive = sorted(((_log_prob(m, src, c) / ((5 + len(c)) / 6) ** alpha, c)
                       for c in candidates), key=lambda x: -x[0])
  options = SearchOptions(beam_size=len(tokens) ** 2, alpha=alpha, extra_length=2, eos_id=1,
                          stop_early=stop_early)
  ids, scores, _ = search.search_with_steps(m, src, options, prefix=_padded([prefix]))
  found = [(float(s), _output(row)) for s, row in zip(scores[0].numpy(), ids[0].numpy())
           if s > -bs.INF / 2]
  assert found[0][1] == exhaustive[0][1]
  assert found[0][0] == pytest.approx(exhaustive[0][0], abs=1e-4)
  if not stop_early:
    assert [c for _, c in found] == [c for _, c in exhaustive]
    np.testing.assert_allclose([s for s, _ in found], [s for s, _ in exhaustive], atol=1e-4)


def test_a_prefix_longer_than_the_default_output_limit_is_kept_whole(model):
  """The output limit (source length + extra_length) grows to the prefix's length + 1."""
  src, prefix = SRC[2:3], [5, 6, 7, 8, 9, 10]  # 2 source ids + extra_length 1: 3 at most
  for beam in (1, 3):
    ids, _ = search.search(model, src, SearchOptions(beam_size=beam, extra_length=1,
                                                     max_decode_length=9),
                           prefix=_padded([prefix]))
    output = _output(ids.numpy()[0, 0])
    assert output[:len(prefix)] == prefix and len(output) <= len(prefix) + 1


def test_a_prefix_longer_than_the_output_buffer_is_refused(model):
  with pytest.raises(ValueError, match="prefix of 6 ids.*output buffer of 4"):
    search.search(model, SRC[2:3], SearchOptions(beam_size=2, max_decode_length=4),
                  prefix=_padded([[5, 6, 7, 8, 9, 10]]))


@pytest.mark.heavy
@pytest.mark.parametrize("beam", [1, 3])
def test_xla_and_graph_give_the_same_outputs(model, beam):
  prefix = _padded(PREFIXES)
  run = lambda jit: tf.function(
      lambda: search.search(model, SRC, SearchOptions(beam_size=beam, extra_length=6),
                            prefix=prefix),
      jit_compile=jit, autograph=False)()
  (ids, scores), (xla_ids, xla_scores) = run(False), run(True)
  np.testing.assert_array_equal(ids.numpy(), xla_ids.numpy())
  np.testing.assert_allclose(scores.numpy(), xla_scores.numpy(), atol=1e-4)


@pytest.mark.heavy
def test_translate_lines_with_prefixes_in_input_order_across_batches_and_shards(tmp_path):
  """The Python API: text prefixes ("" for none) line by line, sorted and batched with
  their sources (batch 2, two search shards), every output starting with its prefix. In
  graph mode: XLA with prefixes is test_xla_and_graph_give_the_same_outputs', and with
  shards test_export.py's test_prefix_signature_equals_the_decoders_prefixed_outputs."""
  from conftest import make_tiny_run
  from t2t_keras import runs
  from t2t_keras.decoding import translate
  from t2t_keras.decoding.settings import parse_decode_hparams
  model, vocab, *_ = runs.load(make_tiny_run(tmp_path))
  lines = ["one hundred and five", "nine", "twenty three", "one"]
  prefixes = ["drei", "", "neun und", ""]
  settings = parse_decode_hparams(
      "beam_size=2,batch_size=2,search_shards=2,extra_length=12,jit=false")
  steered = translate.translate_lines(model, vocab, lines, settings, prefixes=prefixes)
  free = translate.translate_lines(model, vocab, lines, settings)
  for line, prefix, hyps, free_hyps in zip(lines, prefixes, steered, free):
    want = vocab.encode(prefix) if prefix else []
    assert all(h.ids[:len(want)] == want for h in hyps), (line, hyps)
    if not prefix:
      assert [h.ids for h in hyps] == [h.ids for h in free_hyps]
  with pytest.raises(ValueError, match="2 target prefixes for 4 sources"):
    translate.translate_lines(model, vocab, lines, settings, prefixes=prefixes[:2])
  # A prefix past source length + extra_length widens the batch's buffer; a fixed
  # max_decode_length cannot hold it and refuses it.
  long_prefix = "neun " * 20
  want = vocab.encode(long_prefix)
  long_hyps, _ = translate.translate_lines(model, vocab, lines[:2], parse_decode_hparams(
      "beam_size=2,extra_length=1,jit=false"), prefixes=[long_prefix, ""])
  assert len(want) > len(vocab.encode(lines[0])) + 2
  assert all(h.ids[:len(want)] == want and len(h.ids) <= len(want) + 1 for h in long_hyps)
  with pytest.raises(ValueError, match="longer than the output limit of 8 ids "
                                       r"\(max_decode_length\)"):
    translate.translate_lines(model, vocab, lines[:1], parse_decode_hparams(
        "beam_size=2,max_decode_length=8,jit=false"), prefixes=[long_prefix])


@pytest.mark.heavy
def test_t2t_decoder_decode_prefix_file(tmp_path, capsys):
  """t2t-decoder --decode_prefix_file: outputs start with their line's prefix (n-best
  files too); a prefix file of the wrong length is one line naming both files."""
  from conftest import make_tiny_run
  from t2t_keras import bin as t2t_bin
  from t2t_keras.bin import decoder as decoder_bin
  run = make_tiny_run(tmp_path)
  source, prefixes, out = tmp_path / "in.en", tmp_path / "prefix.de", tmp_path / "out.de"
  source.write_text("one hundred and five\nnine\ntwenty three\n")
  prefixes.write_text("drei\n\nneun und\n")
  argv = ["t2t-decoder", f"--output_dir={run}", f"--decode_from_file={source}",
          f"--decode_prefix_file={prefixes}", f"--decode_to_file={out}",
          # the prefix search under XLA: test_xla_and_graph_give_the_same_outputs
          "--decode_hparams=beam_size=2,extra_length=12,return_beams=true,jit=false"]
  assert t2t_bin.run_in_process(decoder_bin, argv) == 0
  for prefix, line in zip(["drei", "", "neun und"], out.read_text().splitlines()):
    for hyp in line.split("\t")[::2]:  # hyp<TAB>score<TAB>hyp<TAB>score
      assert hyp.startswith(prefix), (prefix, hyp)
  prefixes.write_text("drei\n")
  capsys.readouterr()
  assert t2t_bin.run_in_process(decoder_bin, argv) == 1
  assert f"{source} has 3 lines but the prefix file {prefixes} has 1" in capsys.readouterr().err


def test_multi30k_prefixes_figures_by_hand():
  """recipes/multi30k_prefixes.py's figures: next word = word k + 1 equal, exact = whole
  line equal, continuation BLEU = BLEU after the first k words (100 when equal)."""
  from conftest import load_benchmark
  recipe = load_benchmark("multi30k_prefixes", folder="recipes")
  refs = ["Ein Mann fährt Rad .", "Zwei Hunde spielen im Schnee ."]
  outs = ["Ein Mann fährt Rad .", "Zwei Katzen spielen im Schnee ."]
  f = recipe.figures(outs, refs, 1)
  assert f["next_word"] == 50.0 and f["exact"] == 50.0
  assert recipe.figures(refs, refs, 2)["continuation_bleu"] == pytest.approx(100.0)
  assert recipe.figures(outs, refs, 0)["next_word"] == 100.0


@pytest.mark.heavy
def test_multi30k_prefixes_on_a_tiny_run(tmp_path):
  """evaluate_split: k = 0, then each k and the unprefixed outputs on the same sentences
  (those whose reference has more than k words); every prefixed output starts so."""
  from conftest import load_benchmark, make_tiny_run
  from t2t_keras import runs
  from t2t_keras.decoding.settings import parse_decode_hparams
  recipe = load_benchmark("multi30k_prefixes", folder="recipes")
  model, vocab, *_ = runs.load(make_tiny_run(tmp_path))
  sources = ["one hundred and five", "nine", "twenty three"]
  refs = ["einhundertfünf", "neun", "drei und zwanzig"]
  rows = recipe.evaluate_split(model, vocab,
                               parse_decode_hparams("beam_size=2,extra_length=8,jit=false"),
                               sources, refs, [1])
  assert [(k, n) for k, n, _ in rows] == [(0, 3), (1, 1), ("0 on k=1's", 1)]
  assert all(0 <= f["next_word"] <= 100 for _, _, f in rows)
