"""DecodingSpec: a run's decoding from the problem's defaults and the user's overrides."""

import pytest

from t2t_keras import registry
from t2t_keras.decoding.spec import DecodingSpec, input_limit
from t2t_keras.decoding.settings import parse_decode_hparams
from t2t_keras.errors import InputError


def test_the_problems_defaults_then_the_overrides():
  spec = DecodingSpec.for_run("parsing_english_ptb8k", "beam_size=4")
  assert spec.defaults == "extra_length=300,beam_size=21,alpha=0.3"
  search = spec.settings.search
  assert (search.beam_size, search.alpha, search.extra_length) == (4, 0.3, 300)
  plain = DecodingSpec.for_run("translate_ende_numbers", "alpha=1.0")
  assert plain.defaults == "" and plain.settings == parse_decode_hparams("alpha=1.0")
  given = parse_decode_hparams("beam_size=2")  # DecodeSettings are taken as they are
  assert DecodingSpec.for_run("parsing_english_ptb8k", given).settings is given
  assert DecodingSpec.for_run("parsing_english_ptb8k_rev").defaults == ""
  assert DecodingSpec.for_run(None).input_limit is None


def test_the_input_limit_is_the_training_max_length_capped_by_learned_positions():
  hp = registry.hparams("transformer_tiny")  # max_length 64, sinusoids
  assert input_limit(hp) == 64 == DecodingSpec.for_run(None, "", hp).input_limit
  assert input_limit(hp.replace(pos="emb", max_positions=32)) == 32
  assert input_limit(hp.replace(max_length=0)) == 256
  assert input_limit(hp, 10) == 10
  with pytest.raises(InputError, match=r"max_input_length must be >= 2 \(a token and EOS\), got 1"):
    input_limit(hp, 1)
