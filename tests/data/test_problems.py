import collections
import itertools

import pytest
from num2words import num2words

from t2t_keras import registry
from t2t_keras.data import datagen
from t2t_keras.data import problem as problem_lib
from t2t_keras.problems import algorithmic, numbers, parallel_text, wmt  # noqa: F401

SMALL = dict(num_train=2000, num_dev=100, num_test=100)


def _pairs(p, split):
  return [(s["inputs"], s["targets"]) for s in p.generate_samples(split)]


def test_builtin_problems_registered():
  names = registry.list_problems()
  for name in ("translate_ende_numbers", "algorithmic_copy", "algorithmic_reverse",
               "translate_parallel_text", "translate_ende_multi30k",
               "translate_ende_multi30k_tok",
               "translate_ende_wmt32k", "translate_enfr_wmt32k"):
    assert name in names
  assert isinstance(registry.problem("translate_ende_numbers"), problem_lib.Text2TextProblem)


def test_names_and_vocab_sizes():
  p = registry.problem("translate_ende_numbers")
  r = registry.problem("translate_ende_numbers_rev")
  assert (p.name, r.name) == ("translate_ende_numbers", "translate_ende_numbers_rev")
  assert not p.was_reversed and r.was_reversed
  assert p.vocab_filename == r.vocab_filename == "vocab.translate_ende_numbers.model"
  assert p.filepattern("/d", "train") == r.filepattern("/d", "train")
  assert registry.problem("translate_ende_wmt32k").vocab_size == 37000
  assert registry.problem("translate_enfr_wmt32k").vocab_size == 32000
  assert registry.problem("translate_ende_multi30k").vocab_size == 8000
  assert registry.problem("translate_ende_multi30k_tok").vocab_size == 10000
  assert p.vocab_size <= 1000


def test_numbers_deterministic_disjoint_and_real_num2words():
  p = numbers.TranslateEndeNumbers(**SMALL)
  q = numbers.TranslateEndeNumbers(**SMALL)
  splits = {s: _pairs(p, s) for s in problem_lib.SPLITS}
  assert splits == {s: _pairs(q, s) for s in problem_lib.SPLITS}
  assert [len(splits[s]) for s in problem_lib.SPLITS] == [2000, 100, 100]
  sets = {s: {en for en, _ in v} for s, v in splits.items()}
  for a, b in itertools.combinations(problem_lib.SPLITS, 2):
    assert not sets[a] & sets[b], (a, b)
  for s in ("dev", "test"):
    assert len(sets[s]) == len(splits[s])  # no repeats
  # The strings are num2words' own.
  nums = numbers.sample_numbers("dev", 100, 1234)
  assert splits["dev"] == [(num2words(n, lang="en"), num2words(n, lang="de")) for n in nums]
  assert ("twenty-one", "einundzwanzig") in splits["train"]
  assert all(0 <= n <= numbers.MAX_NUMBER for n in nums)
  # Only numbers below 1,000 repeat in train; they are all there, and test and dev hold none.
  train = numbers.sample_numbers("train", 2000, 1234)
  big = [n for n in train if n >= 1000]
  assert len(set(big)) == len(big) and max(train) >= 99_999
  assert set(range(1000)) <= set(train)
  assert min(nums) >= 1000 and min(numbers.sample_numbers("test", 100, 1234)) >= 1000
  # A different seed gives different data.
  other = numbers.TranslateEndeNumbers(seed=7, **SMALL)
  assert _pairs(other, "dev") != splits["dev"]


def test_numbers_train_weights_small_ranges():
  """Each of 0-99 appears many times in the default 40,000 train pairs, each of 100-999 at
  least once, and numbers >= 1,000 keep most of the data."""
  train = numbers.sample_numbers("train", 40000, 1234)
  counts = collections.Counter(train)
  assert min(counts[n] for n in range(100)) >= 10
  assert min(counts[n] for n in range(100, 1000)) >= 1
  assert sum(1 for n in train if n >= 1000) > 0.75 * len(train)


def test_numbers_independent_sample_is_outside_the_data():
  sample = numbers.independent_sample(50, sample_seed=3)
  assert [len(v) for v in sample.values()] == [50, 50, 50]
  train = set(numbers.sample_numbers("train", 40000, 1234))
  held_out = [n for v in sample.values() for n in v if n >= 1000]
  assert held_out and not set(held_out) & train
  assert all(numbers.number_split(n, 1234) == "train" for n in held_out)  # not dev/test
  assert all(lo <= n < hi for (lo, hi), v in zip([(0, 100), (100, 10_000), (10_000, 100_000)],
                                                  sample.values()) for n in v)
  assert sample != numbers.independent_sample(50, sample_seed=4)


def test_rev_swaps_inputs_and_targets():
  fwd = _pairs(registry.problem("algorithmic_reverse"), "dev")
  rev = _pairs(registry.problem("algorithmic_reverse_rev"), "dev")
  assert rev == [(t, i) for i, t in fwd]


@pytest.mark.parametrize("name,fn", [("algorithmic_copy", lambda s: s),
                                     ("algorithmic_reverse", lambda s: s[::-1])])
def test_algorithmic(name, fn):
  p = registry.problem(name)
  p2 = type(p)(num_train=300, num_dev=30, num_test=30)
  splits = {s: _pairs(p2, s) for s in problem_lib.SPLITS}
  for s, pairs in splits.items():
    for i, t in pairs:
      assert t.split() == fn(i.split())
      assert 1 <= len(i.split()) <= 20 and set(i.split()) <= set("abcdefghij")
  for a, b in itertools.combinations(problem_lib.SPLITS, 2):
    assert not {i for i, _ in splits[a]} & {i for i, _ in splits[b]}
  assert splits == {s: _pairs(type(p)(num_train=300, num_dev=30, num_test=30), s)
                    for s in problem_lib.SPLITS}


def test_max_pairs_caps_every_split():
  p = numbers.TranslateEndeNumbers(max_pairs=7, **SMALL)
  assert [len(_pairs(p, s)) for s in problem_lib.SPLITS] == [7, 7, 7]


def test_unknown_split():
  with pytest.raises(ValueError, match="unknown split 'valid'"):
    list(registry.problem("algorithmic_copy").generate_samples("valid"))


def _write_gz(path, lines):
  import gzip
  path.parent.mkdir(parents=True, exist_ok=True)
  with gzip.open(path, "wt", encoding="utf-8") as f:
    f.write("".join(line + "\n" for line in lines))


def test_moses_detokenize_undoes_tokenization_and_xml_escaping():
  from t2t_keras.problems import wmt14_sample
  assert wmt14_sample.moses_detokenize(
      "Parliament &apos;s right , they said &quot; no &quot; .", "en") == \
      "Parliament's right, they said \"no\"."
  assert wmt14_sample.moses_detokenize("Das ist ( leider ) 5 % teurer !", "de") == \
      "Das ist (leider) 5% teurer!"


def test_wmt14_sample_detokenizes_train_only(tmp_path, monkeypatch):
  """Train (Moses-tokenized) comes back raw; dev/test (raw) pass through unchanged."""
  _write_gz(tmp_path / "train_sample_opennmt_10k_tok" / "train.tok.en.gz",
            ["It &apos;s a test .", "", "Two , three ."])
  _write_gz(tmp_path / "train_sample_opennmt_10k_tok" / "train.tok.de.gz",
            ["Es ist ein Test .", "Leer .", "Zwei , drei ."])
  for name in ("newstest2013", "newstest2014-deen"):
    _write_gz(tmp_path / f"{name}.en.gz", ["It's raw , really."])
    _write_gz(tmp_path / f"{name}.de.gz", ["Es ist roh , wirklich."])
  p = datagen.make_problem("translate_ende_wmt14_sample", raw_dir=str(tmp_path))
  # The empty source line stays in place here; datagen skips and counts it.
  assert _pairs(p, "train") == [("It's a test.", "Es ist ein Test."), ("", "Leer."),
                                ("Two, three.", "Zwei, drei.")]
  assert _pairs(p, "test") == [("It's raw , really.", "Es ist roh , wirklich.")]
  assert [s["targets"] for s in datagen.make_problem("translate_ende_wmt14_sample_rev",
                                                     raw_dir=str(tmp_path))
          .generate_samples("train")] == ["It's a test.", "", "Two, three."]


def test_hooks_are_the_problems_own_or_the_defaults():
  """A registered problem's hooks; the base class's for its reverse, an unknown name or none."""
  parsing = problem_lib.hooks("parsing_english_ptb8k")
  assert parsing.decode_defaults == "extra_length=300,beam_size=21,alpha=0.3"
  assert parsing.postprocess("a b", "(S (NP XX XX )NP )S") == "(S (NP (XX a) (XX b)))"
  for name in ("parsing_english_ptb8k_rev", "no_such_problem", None, "translate_ende_numbers"):
    hooks = problem_lib.hooks(name)
    assert hooks.decode_defaults == "" and hooks.postprocess("src", "out") == "out"
    assert hooks.decode_constraint(vocab=None) is None and hooks.serving_postprocess() is None
    assert hooks.dev_score().key == "bleu"
  tok = problem_lib.hooks("translate_ende_multi30k_tok")  # scored on its tokens as they are
  assert tok.postprocess("src", "ein &quot; hund &quot; .") == "ein &quot; hund &quot; ."
  assert tok.dev_score().key == "tok_bleu" and tok.decode_constraint(vocab=None) is None
  line = "ein &quot; hund &quot; läuft ."
  assert tok.dev_score().score(["s"], [line.upper()], [line])["tok_bleu"] == pytest.approx(100)
