import textwrap

import pytest

from t2t_keras import registry
from t2t_keras.hparams_lib import HParams
from t2t_keras.usr_dir import import_usr_dir


def test_unknown_hparams_lists_known_and_closest():
  with pytest.raises(registry.RegistryError) as e:
    registry.hparams("transformer_bse")
  msg = str(e.value)
  assert "unknown hparams set 'transformer_bse'" in msg
  assert "Closest match: 'transformer_base'" in msg
  assert "transformer_big" in msg


def test_register_twice_is_an_error():
  with pytest.raises(registry.RegistryError, match="already registered"):
    @registry.register_hparams
    def transformer_base():
      return HParams()


def test_names_must_be_snake_case():
  with pytest.raises(registry.RegistryError, match="not snake_case"):
    registry.register_hparams(lambda: HParams(), name="Bad-Name")


def test_help_lists_everything():
  text = registry.help_string()
  assert "transformer_table3_c5" in text and "Problems:" in text and "Models:" in text


def test_usr_dir_registers_hparams(tmp_path):
  pkg = tmp_path / "my_usr_dir_pkg"
  pkg.mkdir()
  (pkg / "__init__.py").write_text("from . import my_sets\n")
  (pkg / "my_sets.py").write_text(textwrap.dedent("""
      from t2t_keras import registry

      @registry.register_hparams
      def my_usr_dir_tiny():
        return registry.hparams("transformer_tiny").replace(hidden_size=32)
  """))
  assert import_usr_dir(str(pkg)) == ["my_usr_dir_pkg"]
  assert registry.hparams("my_usr_dir_tiny").hidden_size == 32


def test_usr_dir_missing():
  with pytest.raises(FileNotFoundError, match="not a directory"):
    import_usr_dir("/nonexistent/usr/dir")


def test_problem_registered_under_another_name_uses_it():
  from t2t_keras.problems.algorithmic import AlgorithmicCopy

  @registry.register_problem("my_renamed_copy")
  class Renamed(AlgorithmicCopy):
    pass

  p = registry.problem("my_renamed_copy_rev")
  assert p.data_name == "my_renamed_copy" and p.name == "my_renamed_copy_rev"
