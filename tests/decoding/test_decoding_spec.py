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


def test_the_spec_resolves_max_input_size_from_the_run():
  hp = registry.hparams("transformer_tiny")  # max_length 64
  spec = DecodingSpec.for_run("translate_ende_numbers", "beam_size=2", hp)
  assert spec.settings.batching.max_input_size == 64 == spec.input_limit
  assert spec.settings == parse_decode_hparams("beam_size=2,max_input_size=64")
  # the user's max_input_size, then the exporter's flag, win over the training max_length
  assert DecodingSpec.for_run(None, "max_input_size=9", hp).input_limit == 9
  assert DecodingSpec.for_run(None, "max_input_size=9", hp, 5).input_limit == 5
  learned = hp.replace(pos="emb", max_positions=32)
  assert DecodingSpec.for_run(None, "", learned).input_limit == 32
  # without the run's hparams only a given limit applies (as before: no limit)
  assert DecodingSpec.for_run(None, "").settings == parse_decode_hparams()
  assert DecodingSpec.for_run(None, "max_input_size=9").input_limit == 9
  with pytest.raises(InputError, match="max_input_length must be >= 2"):
    DecodingSpec.for_run(None, "", hp, 1)
