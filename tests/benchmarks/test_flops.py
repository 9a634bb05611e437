"""benchmarks/flops.py: the analytic FLOP count behind train_bench.py's MFU."""

import importlib.util
import os

from t2t_keras import registry
from t2t_keras.models.params import analytic_param_count

_PATH = os.path.join(os.path.dirname(__file__), "..", "..", "benchmarks", "flops.py")
_spec = importlib.util.spec_from_file_location("bench_flops", _PATH)
flops = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(flops)


def _tiny(**changes):
  hp = registry.hparams("transformer_tiny").replace(
      num_encoder_layers=1, num_decoder_layers=1, hidden_size=4, num_heads=2,
      filter_size=8)
  return hp.replace(**changes)


def test_forward_matches_hand_count():
  # 1+1 layers, d=4, h=2, d_k=d_v=2, d_ff=8, V=10; batch 1, source 3, target 2.
  hp = _tiny()
  encoder = (96 + 96 + 96      # Q, K, V projections: 2*B*S*d*(h d_k) = 2*3*4*4
             + 72 + 72         # QK^T, AV: 2*B*h*S*S*d_k = 2*2*3*3*2
             + 96              # W^O
             + 192 + 192)      # FFN: 2*B*S*d*d_ff twice
  decoder_self = 64 + 64 + 64 + 32 + 32 + 64     # T=2 throughout
  decoder_encdec = 64 + 96 + 96 + 48 + 48 + 64   # Q over T=2; K, V over S=3; scores 2x3
  decoder_ffn = 128 + 128
  softmax = 2 * 2 * 4 * 10
  expected = encoder + decoder_self + decoder_encdec + decoder_ffn + softmax
  assert expected == 2064
  assert flops.forward_flops(hp, 10, 1, 3, 2) == expected
  assert flops.train_step_flops(hp, 10, [(1, 3, 2)]) == 3 * expected
  assert flops.train_step_flops(hp, 10, [(1, 3, 2), (2, 3, 2)]) == 9 * expected


def test_per_head_sizes_and_scaling():
  hp = _tiny(attention_key_channels=3, attention_value_channels=1)
  # Encoder: Q,K 2*3*4*6=144 each, V 2*3*4*2=48, QK^T 2*2*9*3=108, AV 2*2*9*1=36,
  # W^O 2*3*2*4=48, FFN 384.
  encoder = 144 + 144 + 48 + 108 + 36 + 48 + 384
  decoder = ((96 + 96 + 32 + 48 + 16 + 32)        # self, T=2
             + (96 + 144 + 48 + 72 + 24 + 32)     # enc-dec, T=2 over S=3
             + 256)
  assert flops.forward_flops(hp, 10, 1, 3, 2) == encoder + decoder + 160
  # Linear in the batch.
  assert flops.forward_flops(hp, 10, 5, 3, 2) == 5 * (encoder + decoder + 160)


def test_length_one_is_twice_the_matmul_weights_plus_scores():
  # At S = T = 1, every projection costs 2 FLOPs per weight; only the score
  # matmuls (2 h (d_k + d_v) per attention block) are not weights.
  hp = registry.hparams("transformer_base")
  vocab = 37000
  d, f = hp.hidden_size, hp.filter_size
  le, ld = hp.num_encoder_layers, hp.num_decoder_layers
  non_matmul = (le + ld) * (f + d) + le * 4 * d + ld * 6 * d  # FFN biases, LayerNorms
  matmul_weights = analytic_param_count(hp, vocab) - non_matmul
  scores = (le + 2 * ld) * 2 * hp.num_heads * (2 * d // hp.num_heads)
  assert flops.forward_flops(hp, vocab, 1, 1, 1) == 2 * matmul_weights + scores
