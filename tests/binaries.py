"""A binary run in the test's own process, with its flags as a user types them."""

from t2t_keras import bin as t2t_bin


def run_binary(capsys, module, *args):
  """(exit code, stdout, stderr) of the binary `module` (a t2t_keras.bin module, named by
  its NAME) with `args`."""
  capsys.readouterr()
  code = t2t_bin.run_in_process(module, [module.NAME, *args])
  out = capsys.readouterr()
  return code, out.out, out.err
