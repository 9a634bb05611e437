"""python -m t2t_keras.distill STEP ...: the distillation's steps from a shell (recipes/distill.sh).

    python -m t2t_keras.distill splits --problem=translate_ende_numbers --output_dir=D
    python -m t2t_keras.distill translate --teacher=RUN --input=train.en --work_dir=W \\
        [--decode_hparams="beam_size=4,alpha=0.6"] [--target_language=de] \\
        [--source_language=en] [--max_lines=N] [--piece_lines=500]
    python -m t2t_keras.distill filter --sources=train.en --work_dir=W --output_dir=F \\
        [--min_score=-1.5] [--max_ratio=2.0] [--vocab=RUN/vocab.model]
    python -m t2t_keras.distill datagen --data_dir=DATA --train=S,T --dev=S,T --test=S,T \\
        [--vocab_from=RUN | --vocab_size=8000]
    python -m t2t_keras.distill cost --run=RUN [--source_length=16 --target_length=16]

Each step is one call of the package's library (docs/recipes.md, "Distillation"); what a
step refuses is printed as one line (`python -m t2t_keras.distill: error: ...`) with exit
status 1.
"""

import argparse
import json
import sys

from t2t_keras import errors

NAME = "python -m t2t_keras.distill"


def _pair(text):
  parts = tuple(p.strip() for p in text.split(","))
  if len(parts) != 2 or not all(parts):
    raise argparse.ArgumentTypeError(f"expected SOURCE,TARGET files, got {text!r}")
  return parts


def _lines(text):
  """A number of lines: a whole number, at least 1."""
  try:
    value = int(text)
  except ValueError:
    value = 0
  if value < 1:
    raise argparse.ArgumentTypeError(f"expected a whole number of lines, at least 1, got "
                                     f"{text!r}")
  return value


def _parser():
  parser = argparse.ArgumentParser(prog="python -m t2t_keras.distill",
                                   description=__doc__.splitlines()[0])
  steps = parser.add_subparsers(dest="step", required=True)
  splits = steps.add_parser("splits", help="a registered problem's splits as text files")
  splits.add_argument("--problem", required=True)
  splits.add_argument("--output_dir", required=True)
  splits.add_argument("--max_lines", type=_lines, help="train's first N pairs only")
  splits.add_argument("--tmp_dir")
  splits.add_argument("--raw_dir", help="a corpus problem's raw files (a problem that "
                      "generates its data reads none and ignores it)")
  translate = steps.add_parser("translate", help="a source file through the teacher, resumably")
  translate.add_argument("--teacher", required=True, help="what t2t_keras.load takes")
  translate.add_argument("--checkpoint_path")
  translate.add_argument("--input", required=True, help="a sentence a line (plain or .gz)")
  translate.add_argument("--work_dir", required=True)
  translate.add_argument("--decode_hparams", default="")
  translate.add_argument("--target_language", help="a multilingual teacher's output language")
  translate.add_argument("--source_language",
                         help="a language-token teacher's (M2M-100's, NLLB's) source language")
  translate.add_argument("--max_lines", type=_lines, help="the input's first N lines only")
  translate.add_argument("--piece_lines", type=_lines, default=500,
                         help="lines translated and recorded together")
  filtering = steps.add_parser("filter", help="the teacher's pairs filtered by score and ratio")
  filtering.add_argument("--sources", required=True, help="the translated input file")
  filtering.add_argument("--work_dir", required=True, help="translate's --work_dir")
  filtering.add_argument("--output_dir", required=True)
  filtering.add_argument("--min_score", type=float, help="lowest length-normalised score kept")
  filtering.add_argument("--max_ratio", type=float, help="largest length ratio kept")
  filtering.add_argument("--vocab", help="lengths in this vocabulary's pieces (else words)")
  datagen = steps.add_parser("datagen", help="the distilled problem's data")
  datagen.add_argument("--data_dir", required=True)
  for split in ("train", "dev", "test"):
    datagen.add_argument(f"--{split}", type=_pair, required=True, help="SOURCE,TARGET files")
  datagen.add_argument("--vocab_from", help="a run whose vocabulary the student shares")
  datagen.add_argument("--vocab_size", type=int, default=8000, help="else, its own BPE size")
  cost = steps.add_parser("cost", help="multiply-adds per output token of a run's decoding")
  cost.add_argument("--run", required=True, help="a run directory, or an hparams set name")
  cost.add_argument("--vocab_size", type=int, help="with an hparams set: its vocabulary size")
  cost.add_argument("--source_length", type=float, default=16)
  cost.add_argument("--target_length", type=float, default=16)
  return parser


def _run(args):
  """The step's library call; returns what it prints (a JSON summary)."""
  if args.step == "splits":
    from t2t_keras.distill import distilled_data  # pylint: disable=import-outside-toplevel
    return distilled_data.write_splits(args.problem, args.output_dir, max_lines=args.max_lines,
                                       tmp_dir=args.tmp_dir, raw_dir=args.raw_dir)
  if args.step == "translate":
    from t2t_keras.distill import teacher  # pylint: disable=import-outside-toplevel
    return teacher.translate_file(
        args.teacher, args.input, args.work_dir, checkpoint_path=args.checkpoint_path,
        decode_hparams=args.decode_hparams, target_language=args.target_language,
        source_language=args.source_language, piece_lines=args.piece_lines,
        max_lines=args.max_lines)
  if args.step == "filter":
    from t2t_keras.distill import filtering, teacher  # pylint: disable=import-outside-toplevel
    outputs = teacher.finished_outputs(args.work_dir)
    max_lines = teacher.check_sources(args.work_dir, args.sources)
    return filtering.filter_pairs(args.sources, outputs["translations"], outputs["scores"],
                                  args.output_dir, min_score=args.min_score,
                                  max_ratio=args.max_ratio, vocab_path=args.vocab,
                                  truncated_path=outputs["truncated"], max_lines=max_lines)
  if args.step == "datagen":
    from t2t_keras.distill import distilled_data  # pylint: disable=import-outside-toplevel
    summary = distilled_data.generate(args.data_dir, train=args.train, dev=args.dev,
                                      test=args.test, vocab_from=args.vocab_from,
                                      vocab_size=args.vocab_size)
    return {k: v for k, v in summary.items() if k != "splits"}
  from t2t_keras.distill import cost  # pylint: disable=import-outside-toplevel
  return cost.model_cost(args.run, args.source_length, args.target_length, args.vocab_size)


def main(argv=None):
  args = _parser().parse_args(argv)
  from t2t_keras import tf_startup  # pylint: disable=import-outside-toplevel
  tf_startup.import_tensorflow_quietly()
  try:
    result = _run(args)
  except errors.user_errors() as e:
    print(f"{NAME}: error: {e}", file=sys.stderr)
    return 1
  print(json.dumps(result, default=str))
  return 0


if __name__ == "__main__":
  sys.exit(main())
