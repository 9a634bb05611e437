"""models/decode_cost.py: multiply-adds per output token of cached decoding, by hand."""

import pytest

from t2t_keras import registry
from t2t_keras.models.decode_cost import decode_cost_parts, decode_macs_per_token


def test_a_tiny_config_against_a_hand_count():
  # 2 decoder layers, d=4, h=2, d_k=3, d_v=1 (per head), d_ff=8, V=10; source 5, output 3
  # pieces: the average prefix a step attends to is (1 + 2 + 3) / 3 = 2.
  hp = registry.hparams("transformer_tiny").replace(
      num_encoder_layers=7, num_decoder_layers=2, hidden_size=4, num_heads=2, filter_size=8,
      attention_key_channels=3, attention_value_channels=1)
  self_attention = (4 * 6 + 4 * 6 + 4 * 2 + 2 * 4  # Q, K, V of the new position; W^O
                    + 2 * 2 * 3 + 2 * 2 * 1)        # scores and values over 2 positions
  cross_attention = (4 * 6 + 2 * 4                  # Q, W^O (the source's K, V: per sentence)
                     + 2 * 5 * 3 + 2 * 5 * 1)       # over the 5 source positions
  ffn = 4 * 8 + 8 * 4
  output = 4 * 10
  assert (self_attention, cross_attention, ffn, output) == (80, 72, 64, 40)
  parts = decode_cost_parts(hp, 10, source_length=5, target_length=3)
  assert parts == {"self_attention": 160, "cross_attention": 144, "ffn": 128, "output": 40,
                   "total": 472}
  assert decode_macs_per_token(hp, 10, 5, 3) == 472  # the encoder's 7 layers: not per token


def test_the_student_costs_at_most_half_the_teacher():
  """transformer_multi30k_student against transformer_multi30k_tiny, the 8k vocabulary."""
  teacher = decode_macs_per_token(registry.hparams("transformer_multi30k_tiny"), 8000)
  student = decode_macs_per_token(registry.hparams("transformer_multi30k_student"), 8000)
  assert (teacher, student) == (1_704_448, 632_960)
  assert student <= teacher / 2


def test_flops_py_is_twice_it():
  from conftest import load_benchmark  # pylint: disable=import-outside-toplevel
  flops = load_benchmark("flops")
  hp = registry.hparams("transformer_multi30k_tiny")
  assert flops.decode_token_flops(hp, 8000, 12, 14) == pytest.approx(
      2 * decode_macs_per_token(hp, 8000, 12, 14))
