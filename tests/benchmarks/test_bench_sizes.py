"""benchmarks/bench_sizes.py and step_bench.py's sized vocabulary: the shapes the side-by-side
benchmarks measure, and the peer built from the same hparams."""

import pytest

from conftest import load_benchmark

sizes = load_benchmark("bench_sizes")
step_bench = load_benchmark("step_bench")


def test_base_and_big_are_the_papers_models_on_4096_token_batches():
  base, big = sizes.get("base"), sizes.get("big")
  hp = sizes.hparams(base)
  assert (hp.num_encoder_layers, hp.hidden_size, hp.filter_size, hp.num_heads,
          hp.norm_type, hp.layer_prepostprocess_dropout) == (6, 512, 2048, 8, "post", 0.1)
  hp = sizes.hparams(big)
  assert (hp.hidden_size, hp.filter_size, hp.num_heads, hp.layer_prepostprocess_dropout) == (
      1024, 4096, 16, 0.3)
  assert base.vocab_size == big.vocab_size == 37000
  assert base.tokens() == big.tokens() == 4096 and base.tokens(256) == 16384
  small = sizes.hparams(sizes.get("small"))
  assert (small.hidden_size, small.attention_dropout, small.relu_dropout) == (256, 0.1, 0.1)


def test_unknown_size_lists_the_known_ones():
  with pytest.raises(ValueError, match="unknown size 'huge'; known: tiny, small, base, big"):
    sizes.get("huge")


def test_peer_flags_follow_overrides_and_refuse_what_the_peer_cannot_build():
  base = sizes.get("base")
  flags = sizes.peer_flags(sizes.hparams(base, "norm_type=pre,relu_dropout=0.2"), base, 128)
  assert "--norm_first=1" in flags and "--relu_dropout=0.2" in flags and "--batch=128" in flags
  with pytest.raises(ValueError, match="one layer count for both stacks; got 6\\+4"):
    sizes.peer_flags(sizes.hparams(base, "num_decoder_layers=4"), base)


def test_fixed_batch_and_decode_inputs_have_the_sizes_shapes_and_ranges():
  base = sizes.get("base")
  src, tgt = step_bench.fixed_batch(base)
  assert src.shape == tgt.shape == (64, 64)
  assert src.min() >= 2 and max(src.max(), tgt.max()) < 37000 and tgt.max() > 8000
  src2, _ = step_bench.fixed_batch(base, batch=8)
  assert src2.shape == (8, 64)
  inputs = step_bench.decode_inputs(37000)
  assert inputs.shape == (32, 30) and (inputs[:, -1] == 1).all() and inputs[:, :-1].min() >= 3


def test_sized_vocabulary_reports_the_size_and_pieces_past_the_end():
  class Vocab:
    vocab_size = 3
    pieces = ["<pad>", "<EOS>", "a"]

    def id_to_piece(self, i):
      return self.pieces[i]

    def encode(self, text):
      return [2]

  sized = step_bench.SizedVocabulary(Vocab(), 37000)
  assert sized.vocab_size == 37000
  assert [sized.id_to_piece(i) for i in (2, 3, 36999)] == ["a", "<extra 3>", "<extra 36999>"]
  assert sized.encode("a") == [2]  # everything else is the wrapped vocabulary's


def test_step_flops_are_flops_py_on_the_sizes_batch():
  import flops  # on the path: step_bench put benchmarks/ there
  base = sizes.get("base")
  hp = sizes.hparams(base)
  assert base.sentences() == 64 and base.sentences(256) == 256
  assert sizes.step_flops(hp, base) == flops.train_step_flops(hp, 37000, [(64, 64, 64)])
  assert sizes.step_flops(hp, base, 256) == 4 * sizes.step_flops(hp, base)
