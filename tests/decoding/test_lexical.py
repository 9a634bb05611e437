"""Lexically constrained beam search (decoding/lexical.py): every finished output holds
its sentence's phrases, and with a beam wide enough to keep every hypothesis the search
returns the best-scoring output that holds them, as an exhaustive search finds it."""

import itertools

import numpy as np
import pytest
import tensorflow as tf

from conftest import tiny_model
from t2t_keras.decoding import lexical
from t2t_keras.decoding.search_common import SearchOptions
from t2t_keras.errors import InputError
from t2t_keras.models.transformer import shift_right

VOCAB = 6  # PAD 0, EOS 1, tokens 2..5
SRC = tf.constant([[3, 4, 1, 0], [5, 2, 3, 1], [2, 1, 0, 0]])


@pytest.fixture(scope="module")
def model():
  return tiny_model(VOCAB, seed=11)


def _contains(output, phrase):
  return any(output[i:i + len(phrase)] == phrase for i in range(len(output) - len(phrase) + 1))


def test_the_matcher_finds_phrases_wherever_they_occur():
  """advance() over every sequence of 6 tokens from {2, 3} equals a brute-force search,
  for self-overlapping phrases too (KMP's failure links)."""
  phrases = [[2, 2, 3], [3, 2, 3, 2], [2]]
  c = lexical.term_tensors([phrases])
  seqs = list(itertools.product([2, 3], repeat=6))
  rows = lambda x: tf.repeat(x, len(seqs), axis=0)  # noqa: E731
  cs = lexical.Terms(*map(rows, c))
  met = tf.zeros([len(seqs), 3], tf.bool)
  progress = tf.zeros([len(seqs), 3], tf.int32)
  for t in range(6):
    met, progress = lexical.advance(cs, met, progress, tf.constant([s[t] for s in seqs]))
    want = [[_contains(list(s[:t + 1]), p) for p in phrases] for s in seqs]
    np.testing.assert_array_equal(met.numpy(), want)


def _log_probs(model, src, outputs):
  """The model's log prob of each output (ids ending in EOS) given source row src [1, S]."""
  width = max(len(o) for o in outputs)
  targets = np.zeros([len(outputs), width], np.int32)
  for i, o in enumerate(outputs):
    targets[i, :len(o)] = o
  memory, mask = model.encode(tf.repeat(src, len(outputs), axis=0))
  logits, _ = model.decode(shift_right(tf.constant(targets)), memory, mask)
  lp = tf.nn.log_softmax(logits).numpy()
  return [float(sum(lp[i, t, tok] for t, tok in enumerate(o))) for i, o in enumerate(outputs)]


@pytest.mark.heavy
@pytest.mark.parametrize("phrases", [[[4, 2]], [[5], [3, 3]], [[2, 2, 3]]])
def test_a_wide_beam_returns_the_best_output_holding_every_phrase(model, phrases):
  """Exhaustive over outputs of at most 5 tokens (4 tokens, then EOS; alpha 0, so the
  score is the log prob): a beam of 256 keeps every hypothesis, and the best output and
  its score are the exhaustive search's best among outputs holding every phrase."""
  for row in range(3):
    src = SRC[row:row + 1]
    outputs = [list(p) + [1] for n in range(5) for p in itertools.product(range(2, VOCAB),
                                                                          repeat=n)]
    holding = [o for o in outputs if all(_contains(o[:-1], p) for p in phrases)]
    scores = _log_probs(model, src, holding)
    best = max(range(len(holding)), key=lambda i: scores[i])
    ids, found, met = lexical.constrained_beam_search(
        model, src, lexical.term_tensors([phrases]),
        SearchOptions(beam_size=256, alpha=0.0, max_decode_length=5, stop_early=True))
    output = [int(x) for x in ids.numpy()[0, 0]]
    output = output[:output.index(1) + 1]
    assert bool(met.numpy()[0])
    assert output == holding[best], (row, output, holding[best])
    assert float(found.numpy()[0, 0]) == pytest.approx(scores[best], abs=1e-4)


@pytest.mark.heavy
def test_every_output_holds_its_phrases_at_a_small_beam(model):
  """Beam 4, three sentences with different phrase sets (one with none): every returned
  hypothesis holds all of its sentence's phrases, and an unconstrained sentence decodes
  as plain beam search."""
  from t2t_keras.decoding import beam_search
  phrases = [[[4, 2], [5]], [], [[3, 3, 3]]]
  ids, scores, met = lexical.constrained_beam_search(
      model, SRC, lexical.term_tensors(phrases),
      SearchOptions(beam_size=4, alpha=0.6, extra_length=8))
  assert met.numpy().tolist() == [True, True, True]
  for b, sentence in enumerate(phrases):
    for k in range(4):
      if scores.numpy()[b, k] < -1e6:
        continue
      output = [int(x) for x in ids.numpy()[b, k]]
      output = output[:output.index(1)] if 1 in output else output
      assert all(_contains(output, p) for p in sentence), (b, k, output)
  free_ids, free_scores = beam_search.beam_search(
      model, SRC[1:2], SearchOptions(beam_size=4, alpha=0.6, extra_length=8))
  np.testing.assert_array_equal(ids.numpy()[1, 0], free_ids.numpy()[0, 0])


def test_phrases_that_cannot_fit_are_reported_per_sentence(model):
  """A phrase longer than the sentence's length limit: met False for that sentence only."""
  phrases = [[[2, 3, 4, 5, 2, 3]], [[4]], []]
  _, _, met = lexical.constrained_beam_search(
      model, SRC, lexical.term_tensors(phrases),
      SearchOptions(beam_size=3, extra_length=2, max_decode_length=6))
  assert met.numpy().tolist() == [False, True, True]


@pytest.mark.heavy
def test_xla_and_graph_give_the_same_outputs(model):
  c = lexical.term_tensors([[[4, 2], [5]], [], [[3, 3]]])
  run = lambda jit: tf.function(  # noqa: E731
      lambda: lexical.constrained_beam_search(model, SRC, c,
                                              SearchOptions(beam_size=3, extra_length=6)),
      jit_compile=jit, autograph=False)()
  (ids, scores, met), (xla_ids, xla_scores, xla_met) = run(False), run(True)
  np.testing.assert_array_equal(ids.numpy(), xla_ids.numpy())
  np.testing.assert_allclose(scores.numpy(), xla_scores.numpy(), atol=1e-4)
  np.testing.assert_array_equal(met.numpy(), xla_met.numpy())


def test_bad_phrases_are_refused():
  with pytest.raises(InputError, match="sentence 1: a constraint must be a non-empty phrase"):
    lexical.term_tensors([[[3]], [[4, 1]]])
  with pytest.raises(InputError, match="non-empty"):
    lexical.term_tensors([[[]]])
  # A search takes prefixes or terms: both are refused, neither is dropped.
  from t2t_keras.decoding import translate  # pylint: disable=import-outside-toplevel
  from t2t_keras.decoding.settings import parse_decode_hparams  # pylint: disable=import-outside-toplevel
  with pytest.raises(InputError, match="cannot be combined with target prefixes yet"):
    translate.translate_ids(None, [[5, 1]], parse_decode_hparams(), prefixes=[[4]],
                            phrases=[[[6]]])


@pytest.mark.heavy
def test_translate_lines_and_the_decoder_take_terminology_constraints(tmp_path, capsys):
  """translate_lines(constraints=...) over batches and two search shards: every output of
  a constrained line holds its phrases, unconstrained lines decode as without the
  argument; t2t-decoder --decode_terms_file writes such outputs and names the
  lines it cannot satisfy; bad constraint files are one line naming file and line."""
  from conftest import make_tiny_run
  from t2t_keras import bin as t2t_bin
  from t2t_keras import runs
  from t2t_keras.bin import decoder as decoder_bin
  from t2t_keras.decoding import translate
  from t2t_keras.decoding.settings import parse_decode_hparams
  run = make_tiny_run(tmp_path)
  model, vocab, *_ = runs.load(run)
  lines = ["one hundred and five", "nine", "twenty three", "one"]
  constraints = [["drei"], [], ["neun", "sieben und"], []]
  settings = parse_decode_hparams(
      "beam_size=3,batch_size=2,search_shards=2,extra_length=12,jit=false")
  steered = translate.translate_lines(model, vocab, lines, settings, constraints=constraints)
  free = translate.translate_lines(model, vocab, lines, settings)
  assert steered.unmet == []
  for phrases, hyps, free_hyps in zip(constraints, steered, free):
    for h in hyps:
      assert all(_contains(h.ids, vocab.encode(p)) for p in phrases), (phrases, h)
    if not phrases:
      assert [h.ids for h in hyps] == [h.ids for h in free_hyps]
  # Two phrases, each within the line's output limit but not both: that line is named.
  a, b, n = (len(vocab.encode(t)) for t in ("sieben und", "drei und", "nine"))
  extra = max(a, b) + 1 - (n + 1)  # the limit before EOS: the longer phrase's length
  tight = translate.translate_lines(
      model, vocab, ["nine", "nine"],
      parse_decode_hparams(f"beam_size=2,extra_length={extra},jit=false"),
      constraints=[["sieben und", "drei und"], ["drei"]])
  assert tight.unmet == [0]
  with pytest.raises(InputError, match="a terminology constraint of .* ids is longer than"):
    translate.translate_lines(
        model, vocab, ["nine"], parse_decode_hparams("beam_size=2,max_decode_length=4,jit=false"),
        constraints=[["sieben und zwanzig tausend"]])

  source, cfile, out = tmp_path / "in.en", tmp_path / "terms.jsonl", tmp_path / "out.de"
  source.write_text("\n".join(lines) + "\n")
  cfile.write_text('["drei"]\n\n["neun", "sieben und"]\n[]\n')
  argv = ["t2t-decoder", f"--output_dir={run}", f"--decode_from_file={source}",
          f"--decode_terms_file={cfile}", f"--decode_to_file={out}",
          "--decode_hparams=beam_size=3,batch_size=2,search_shards=2,extra_length=12,jit=false"]
  assert t2t_bin.run_in_process(decoder_bin, argv) == 0
  assert out.read_text().splitlines() == [hyps[0].text for hyps in steered]
  for text, bad in (('["drei"]\n[\n[]\n[]\n', f"{cfile}:2: not JSON"),
                    ('["drei"]\n[3]\n[]\n[]\n', f"{cfile}:2: a constraints line must be a "
                                                "JSON list of non-empty strings"),
                    ('["drei"]\n', f"{source} has 4 lines but the constraints file")):
    cfile.write_text(text)
    capsys.readouterr()
    assert t2t_bin.run_in_process(decoder_bin, argv) == 1
    err = capsys.readouterr().err
    assert bad in err and len(err.strip().splitlines()) == 1, err


def test_failure_links_in_tf_equal_the_python_ones():
  """failure_links (TF ops, for the SavedModel) against term_tensors' KMP tables:
  phrases by hand, and 200 random ones over 2 or 3 tokens (many repeats), eagerly and
  XLA-compiled."""
  rng = np.random.RandomState(0)
  random = [[list(rng.randint(2, 2 + rng.randint(2, 4), size=rng.randint(1, 17)))
             for _ in range(8)] for _ in range(25)]
  for phrases in ([[[2, 2, 3, 2, 2, 2], [3, 2, 3, 2]], [[5, 5, 5, 5, 5, 5, 5]], [[2, 3, 4]]],
                  random):
    c = lexical.term_tensors(phrases)
    for fn in (lexical.failure_links,
               tf.function(lexical.failure_links, jit_compile=True, autograph=False)):
      np.testing.assert_array_equal(fn(c.tokens, c.lengths).numpy(), c.fail.numpy())


def test_multi30k_terms_dictionary_and_terms_by_hand():
  """recipes/multi30k_terms.py: Dice co-occurrence pairs a word with its translation; a
  term is a reference word the output lacks that the dictionary pairs with a source word."""
  from conftest import load_benchmark
  recipe = load_benchmark("multi30k_terms", folder="recipes")
  sources = ["a dog runs", "a red dog", "a cat sleeps", "the red ball", "a man", "a boy",
             "a woman"] * 3
  targets = ["ein Hund rennt", "ein roter Hund", "eine Katze schläft", "der rote Ball",
             "ein Mann", "ein Junge", "eine Frau"] * 3
  table = recipe.dictionary(sources, targets, min_count=3, min_dice=0.5, stop_words=1)
  assert table["dog"][0] == ("hund", 1.0) and table["cat"][0][0] == "katze"
  assert recipe.terms_for("a dog and a cat", "Ein Hund und eine Katze .",
                          "ein Hund und ein Tier", table, max_terms=1) == ["Katze"]
  assert recipe.terms_for("a cat", "Eine Katze", "eine Katze", table) == []
