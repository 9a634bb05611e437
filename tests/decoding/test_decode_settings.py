"""DecodeSettings: t2t's flat --decode_hparams string routed to groups by concern, checked."""

import dataclasses

import pytest

from t2t_keras.decoding.settings import (DEFAULTS, GROUPS, DecodeSettings,
                                         parse_decode_hparams)
from t2t_keras.hparams_lib import HParams, HParamsError

# A value other than the default for every key, and the group it must land in.
CHANGED = {
    "search": {"beam_size": 8, "alpha": 1.5, "length_penalty_kind": "length",
               "extra_length": 7, "max_decode_length": 30,
               "jit": False, "search_shards": 3, "constrain": False, "stop_early": False,
               "sampling_method": "random", "sampling_temp": 0.5, "sampling_keep_top_k": 5,
               "sampling_keep_top_p": 0.9, "sampling_seed": 11},
    "batching": {"batch_size": 4, "length_bucket": 2, "max_input_size": 9},
    "output": {"return_beams": True, "return_alignment": True, "alignment_layer": 0,
               "num_samples": 3, "max_attention_plots": 2},
    "evaluation": {"bleu_lang": "en"},
}


def _text(values):
  return ",".join(f"{k}={str(v).lower() if isinstance(v, bool) else v}"
                  for k, v in values.items())


def test_the_groups_hold_every_key_once():
  keys = [k for keys in GROUPS.values() for k in keys]
  assert sorted(keys) == sorted(DEFAULTS.values()) and len(keys) == len(set(keys))
  assert {g: set(v) for g, v in CHANGED.items()} == {g: set(v) for g, v in GROUPS.items()}


def test_each_flat_key_is_routed_to_its_group():
  flat = {k: v for group in CHANGED.values() for k, v in group.items()}
  settings = parse_decode_hparams(_text(flat))
  for group, values in CHANGED.items():
    assert getattr(settings, group) == HParams(**values), group
  assert settings == DecodeSettings.from_flat(flat)
  assert settings.replace(beam_size=2).search.beam_size == 2
  assert settings.override("batch_size=9").batching.batch_size == 9


def test_defaults_then_overrides_and_the_flat_values_in_t2ts_order():
  settings = parse_decode_hparams("beam_size=2", defaults="beam_size=21,alpha=0.3")
  assert (settings.search.beam_size, settings.search.alpha) == (2, 0.3)
  # export_info.json's "decode_hparams": the flat dict, keys in the order they always had
  assert list(parse_decode_hparams().values()) == list(DEFAULTS.values())
  assert parse_decode_hparams().values() == DEFAULTS.values()
  assert settings.flat() == DEFAULTS.replace(beam_size=2, alpha=0.3)


def test_the_settings_are_frozen_and_hashable():
  settings = parse_decode_hparams()
  with pytest.raises(dataclasses.FrozenInstanceError):
    settings.search = settings.batching
  with pytest.raises(AttributeError):
    settings.beam_size  # pylint: disable=pointless-statement
  assert len({settings, parse_decode_hparams(), parse_decode_hparams("alpha=1.0")}) == 2


def test_an_unknown_key_is_refused_listing_the_known_ones():
  with pytest.raises(HParamsError, match="unknown hparam 'beam_sze'. Did you mean "
                                         "'beam_size'[?] Valid keys: alignment_layer, alpha, "
                                         "batch_size, beam_size, bleu_lang"):
    parse_decode_hparams("beam_sze=2")
  with pytest.raises(HParamsError, match="unknown hparam 'hidden_size'"):
    parse_decode_hparams().replace(hidden_size=8)
  with pytest.raises(HParamsError, match="search group must hold exactly beam_size, alpha"):
    DecodeSettings(HParams(beam_size=4), *(HParams(**{k: DEFAULTS.get(k) for k in GROUPS[g]})
                                           for g in ("batching", "output", "evaluation")))


@pytest.mark.parametrize("text, message", [
    ("beam_size=0", "beam_size=0: must be >= 1"),
    ("alpha=-1", "alpha=-1.0: must be >= 0"),
    ("extra_length=-1", "extra_length=-1: must be >= 0"),
    ("max_decode_length=-1", "max_decode_length=-1: must be >= 0"),
    ("batch_size=0", "batch_size=0: must be >= 1"),
    ("length_bucket=0", "length_bucket=0: must be >= 1"),
    ("max_input_size=-1", "max_input_size=-1: must be >= 0"),
    ("max_input_size=1", r"max_input_size=1: must be 0 \(the run's limit\) or >= 2"),
    ("num_samples=-2", "num_samples=-2: must be >= -1"),
    ("max_attention_plots=-1", "max_attention_plots=-1: must be >= 0"),
    ("search_shards=-1", "search_shards=-1: must be >= 0"),
    ("sampling_temp=-0.5", "sampling_temp=-0.5: must be >= 0"),
    ("sampling_keep_top_k=-2", "sampling_keep_top_k=-2: must be >= -1"),
    ("sampling_method=multinomial", "sampling_method='multinomial': must be one of argmax, "
                                    "random"),
    ("length_penalty_kind=avg", "length_penalty_kind='avg': must be one of gnmt, length"),
    ("sampling_keep_top_p=0", r"sampling_keep_top_p=0.0: must be in \(0, 1\]"),
    ("sampling_keep_top_p=1.5", r"sampling_keep_top_p=1.5: must be in \(0, 1\]"),
    ("beam_size=two", "hparam 'beam_size': cannot parse 'two' as int"),
    # Found by test_fuzz_inputs.py: accepted, then TensorFlow's int32 or NaN scores failed
    ("extra_length=" + "9" * 19, r"extra_length=9{19}: must be below 2\*\*31 in size"),
    ("sampling_seed=-2147483649", r"sampling_seed=-2147483649: must be below 2\*\*31"),
    ("beam_size=" + "9" * 40, r"beam_size=<40 digits>: must be below 2\*\*31"),
    ("alpha=nan", r"hparam 'alpha': cannot parse 'nan' as a finite float"),
    ("sampling_temp=inf", r"hparam 'sampling_temp': cannot parse 'inf' as a finite float"),
    ("batch_size=" + "9" * 5000, r"cannot parse '9{80}'\.\.\. \(5000 characters\) as int"),
])
def test_values_out_of_range_are_refused_naming_the_key(text, message):
  with pytest.raises(HParamsError, match=message):
    parse_decode_hparams(text)
  with pytest.raises(HParamsError, match=message):  # the defaults' string, and override
    parse_decode_hparams(defaults=text)
  with pytest.raises(HParamsError, match=message):
    parse_decode_hparams().override(text)


def test_the_search_described_names_the_length_kind_only_when_not_gnmt():
  from t2t_keras.decoding.settings import describe_search  # pylint: disable=import-outside-toplevel
  assert describe_search(parse_decode_hparams().search) == "beam 4, alpha 0.6"
  assert describe_search(parse_decode_hparams("alpha=1.0,length_penalty_kind=length").search) == (
      "beam 4, alpha 1.0, length ** alpha")
