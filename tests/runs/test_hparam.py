import json

import pytest

from t2t_keras import registry
from t2t_keras.hparams_lib import HParams, HParamsError


def _hp():
  return HParams(a=1, b=2.5, c=False, d="name")


def test_override_parses_each_type():
  hp = _hp().override("a=3,b=0.5,c=true,d=other")
  assert (hp.a, hp.b, hp.c, hp.d) == (3, 0.5, True, "other")
  assert _hp().override("b=2").b == 2.0 and isinstance(_hp().override("b=2").b, float)


def test_override_empty_changes_nothing():
  assert _hp().override("") == _hp()
  assert _hp().override(" , ") == _hp()


def test_unknown_key_lists_valid_keys():
  with pytest.raises(HParamsError, match=r"unknown hparam 'aa'.*Did you mean 'a'.*Valid keys: a, b, c, d"):
    _hp().override("aa=1")


def test_wrong_type_names_key_value_and_type():
  with pytest.raises(HParamsError, match=r"hparam 'a': cannot parse '2.5' as int"):
    _hp().override("a=2.5")
  with pytest.raises(HParamsError, match=r"hparam 'c': cannot parse 'maybe' as bool"):
    _hp().override("c=maybe")
  with pytest.raises(HParamsError, match=r"expected key=value"):
    _hp().override("a")


def test_values_and_keys_are_quoted_shortened_and_floats_finite():
  """A NaN or infinite float is refused (never a learning rate, a dropout or an alpha), and
  a long value or key is quoted to 80 characters with its length (int() refuses over
  4,300 digits: that, too, is the one-line error)."""
  for text in ("nan", "inf", "-inf", "1e400"):
    with pytest.raises(HParamsError, match=r"hparam 'b': cannot parse .* as a finite float"):
      _hp().override(f"b={text}")
  with pytest.raises(HParamsError) as e:
    _hp().override("a=" + "9" * 5000)
  assert str(e.value) == (f"hparam 'a': cannot parse '{'9' * 80}'... (5000 characters) as "
                          f"int (default is 1)")
  with pytest.raises(HParamsError, match=r"unknown hparam 'xxxx.*'\.\.\. \(300 characters\)"):
    _hp().override("x" * 300 + "=1")


def test_frozen():
  hp = _hp()
  with pytest.raises(AttributeError, match="frozen"):
    hp.a = 2
  with pytest.raises(AttributeError, match="unknown hparam 'zz'"):
    _ = hp.zz


def test_json_round_trip_and_diff(tmp_path):
  hp = _hp().override("a=7")
  path = str(tmp_path / "hparams.json")
  hp.save(path)
  assert HParams.load(path) == hp
  assert json.load(open(path))["a"] == 7
  assert hp.diff(_hp()) == ["a"]


def test_registered_sets_override():
  hp = registry.hparams("transformer_base").override("hidden_size=256,norm_type=pre")
  assert hp.hidden_size == 256 and hp.norm_type == "pre"


def test_paper_base_and_big_values():
  base = registry.hparams("transformer_base")
  assert (base.num_encoder_layers, base.hidden_size, base.filter_size, base.num_heads) == (6, 512, 2048, 8)
  assert (base.optimizer_adam_beta1, base.optimizer_adam_beta2, base.optimizer_adam_epsilon) == (0.9, 0.98, 1e-9)
  assert (base.label_smoothing, base.layer_prepostprocess_dropout, base.learning_rate_warmup_steps) == (0.1, 0.1, 4000)
  assert base.norm_type == "post" and base.pos == "timing"
  big = registry.hparams("transformer_big")
  assert (big.hidden_size, big.filter_size, big.num_heads, big.layer_prepostprocess_dropout) == (1024, 4096, 16, 0.3)
  assert registry.hparams("transformer_big_enfr").layer_prepostprocess_dropout == 0.1
  assert registry.hparams("transformer_table3_e").pos == "emb"


def test_the_old_module_name_imports_the_same_classes_with_a_deprecation_warning():
  """t2t_keras.hparam (users' --t2t_usr_dir code) is hparams_lib under its old name."""
  import importlib
  import sys
  sys.modules.pop("t2t_keras.hparam", None)
  with pytest.warns(DeprecationWarning, match="t2t_keras.hparams_lib"):
    old = importlib.import_module("t2t_keras.hparam")
  assert old.HParams is HParams and old.HParamsError is HParamsError
