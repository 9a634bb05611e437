"""A/B of the training step of two source trees in one process, on real batches.

    .venv/bin/python benchmarks/tree_ab.py --trees OLD_CHECKOUT,. [--rounds 6]
        [--batches 6] [--data_dir DIR] [--hparams_set transformer_multi30k]
        [--hparams attention_dropout=0.1,relu_dropout=0.1]

Each tree (a checkout of this repository, e.g. `git worktree add /tmp/old HEAD~1`) is
imported in turn into this one Python process and builds its own Trainer as
`t2t-trainer` does; the first tree's iterator supplies `--batches` real batches of
the problem (translate_ende_multi30k), which both trainers then cycle through, so both
see the same shapes, already compiled before timing starts. Rounds of
2 x batches steps alternate between the trees (the order reversed every other
round); printed: ms per step of every round, the medians and the ratio of the
medians. On a 2-core host whose speed drifts by several percent over minutes, A/Bs
in separate processes did not resolve 2% (docs/notebook.md); alternated rounds in one
process do.
"""

import argparse
import importlib.util
import itertools
import os
import statistics
import sys
import tempfile
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")


def import_tree(tree):
  """Imports t2t_keras from `tree`, with the tree's problems/ and hparams/ as
  t2t_keras.problems and t2t_keras.hparams (setup.py's mapping; an editable install
  would otherwise supply its own checkout's)."""
  sys.path.insert(0, tree)
  try:
    import t2t_keras  # noqa: F401
    for sub in ("problems", "hparams"):
      path = os.path.join(tree, sub)
      spec = importlib.util.spec_from_file_location(
          f"t2t_keras.{sub}", os.path.join(path, "__init__.py"),
          submodule_search_locations=[path])
      module = importlib.util.module_from_spec(spec)
      sys.modules[spec.name] = module
      spec.loader.exec_module(module)
    import t2t_keras.bin  # noqa: F401  (XLA cache)
  finally:
    sys.path.remove(tree)


def load_trainer(tree, args, batches):
  """A Trainer built from the code in `tree`; returns (trainer, batches)."""
  for name in [m for m in sys.modules if m.split(".")[0] == "t2t_keras"]:
    del sys.modules[name]
  import_tree(tree)
  from t2t_keras import registry
  from t2t_keras.training.trainer import Trainer
  hp = registry.hparams(args.hparams_set).override(args.hparams)
  settings = dict(eval_every=0, save_every=10**9, save_every_minutes=1e9)
  try:  # a tree with TrainerConfig (since issue 58), else one taking them as keywords
    from t2t_keras.training.config import TrainerConfig
    settings = {"config": TrainerConfig(**settings)}
  except ImportError:
    pass
  trainer = Trainer(registry.problem(args.problem), hp, args.data_dir, tempfile.mkdtemp(),
                    log=lambda *a, **k: None, **settings)
  print(f"{tree}: {sys.modules['t2t_keras.layers'].__file__}, "
        f"{sys.modules['t2t_keras.problems'].__file__}", flush=True)
  if batches is None:
    batches = [next(trainer.iterator) for _ in range(args.batches)]
  cycle = itertools.cycle(batches)
  trainer.iterator = None
  trainer._next_batches = lambda: next(cycle)
  return trainer, batches


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--trees", required=True, help="two source trees, comma-separated")
  parser.add_argument("--problem", default="translate_ende_multi30k")
  parser.add_argument("--data_dir", default=os.path.join("t2t_data", "translate_ende_multi30k"))
  parser.add_argument("--hparams_set", default="transformer_multi30k")
  parser.add_argument("--hparams", default="attention_dropout=0.1,relu_dropout=0.1")
  parser.add_argument("--batches", type=int, default=6)
  parser.add_argument("--rounds", type=int, default=6)
  args = parser.parse_args(argv)
  trees = [os.path.abspath(t) for t in args.trees.split(",")]
  if len(trees) != 2 or not all(os.path.isdir(os.path.join(t, "t2t_keras")) for t in trees):
    parser.error(f"--trees needs two checkouts of this repository, got {args.trees!r}")
  if not os.path.isdir(args.data_dir):
    parser.error(f"--data_dir {args.data_dir} does not exist (run t2t-datagen first)")

  trainers, batches = [], None
  for tree in trees:
    trainer, batches = load_trainer(tree, args, batches)
    for _ in range(2 * len(batches)):  # compile every shape
      trainer.step_fn.update(trainer._next_batches)
    trainers.append(trainer)
  shapes = [(tuple(b["inputs"].shape), tuple(b["targets"].shape)) for b in batches]
  print(f"batches (inputs, targets): {shapes}")

  steps = 2 * len(batches)
  times = [[], []]
  for r in range(args.rounds):
    for i in ((0, 1) if r % 2 == 0 else (1, 0)):
      start = time.perf_counter()
      for _ in range(steps):
        trainers[i].step_fn.update(trainers[i]._next_batches)
      times[i].append((time.perf_counter() - start) / steps * 1e3)
  medians = [statistics.median(t) for t in times]
  for tree, t, m in zip(trees, times, medians):
    print(f"{tree}: " + " ".join(f"{x:.0f}" for x in t) + f" ms a step; median {m:.1f}")
  print(f"RATIO step_ms second/first = {medians[1] / medians[0]:.4f}")


if __name__ == "__main__":
  main()
