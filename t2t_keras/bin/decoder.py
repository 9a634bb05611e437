"""t2t-decoder: translate with a trained run (beam search over the cached decoder).

    # a file (outputs in input order), BLEU against a reference
    t2t-decoder --output_dir=runs/tiny --decode_from_file=in.en \\
        --decode_to_file=out.de --decode_reference=ref.de
    # a problem's test split, BLEU against its references
    t2t-decoder --output_dir=runs/tiny --data_dir=data --decode_split=test
    # interactive: one sentence per line on stdin
    t2t-decoder --output_dir=runs/tiny --decode_interactive
    # t2t's scoring: "source<TAB>target" lines -> log p(target | source) per line
    t2t-decoder --output_dir=runs/tiny --score_file=pairs.tsv --decode_to_file=scores.txt
    # options: --decode_hparams="beam_size=4,alpha=0.6,extra_length=50,batch_size=32"
    #          --checkpoint_path=runs/tiny/averaged/ckpt-2000 --attention_plot_dir=plots
    # a multilingual run (translate_en_multi30k): the output language for every line
    t2t-decoder --output_dir=runs/multi --decode_from_file=in.en --target_language=fr
    # the same decoding on CTranslate2 (t2t-exporter --format=ctranslate2 first)
    t2t-decoder --output_dir=runs/tiny --engine=ctranslate2 --decode_from_file=in.en
    # on LiteRT (t2t-exporter --format=litert first: the search is inside the model)
    t2t-decoder --output_dir=runs/tiny --engine=litert --decode_from_file=in.en

Problems that post-process outputs (parsing_english_ptb8k: linearized trees
to well-formed trees over the input words) have it applied to every output; a
problem that folds the first letter (translate_ende_multi30k_folded, `data/casing.py`)
has each source folded before the model reads it and its capital restored on the
outputs; --score_file folds both sides of its pairs (it writes no text to restore).

The model, its hparams, problem and vocabulary come from output_dir (what the
trainer wrote there, or a t2t-avg-all output_dir), loaded as `t2t_keras.load`
loads it: a tensor2tensor output_dir, a Marian / OPUS-MT release or a Hugging
Face directory is imported into a temporary run first, which is said (t2t-import
keeps one; such a model decodes with --engine=tensorflow and without t2t's run
flags); --checkpoint_path picks another checkpoint. Several runs,
--output_dir=runs/a,runs/b (and optionally --checkpoint_path=a/ckpt-1,b/ckpt-2),
decode as one ensemble: the mean of their probabilities at each step
(`models/ensemble.py`), one shared vocabulary. t2t's --problem, --model,
--hparams_set, --hparams and --data_dir are accepted as t2t scripts pass them:
each given one must agree with the run. Without --checkpoint_path the newest
readable checkpoint is used (a truncated newer one is skipped with a warning).

--engine=ctranslate2 translates with the CTranslate2 model in --ct2_model_dir
(default output_dir/ctranslate2) instead of TensorFlow: the same decode hparams,
files, BLEU and output format, t2t's beam search ranked over CTranslate2's
hypotheses (`exporting/ct2_translate.py`); not for --score_file, attention plots
or problems with an output constraint. --engine=litert runs the LiteRT model in
--litert_model_dir (default output_dir/litert), whose search was fixed when it was
converted: the decode hparams must be the ones it was converted with (it says which
differ); not for --score_file, attention plots or terminology constraints.
"""


import t2t_keras.bin  # noqa: F401  (first: quiet TensorFlow start-up)

from absl import app, flags

from t2t_keras import fileio, library
from t2t_keras.bin import run_flags  # --output_dir --problem --model --hparams_set ...
from t2t_keras.decoding import files, scoring
from t2t_keras.errors import InputError

NAME = "t2t-decoder"
FLAGS = flags.FLAGS


_define = t2t_keras.bin.define_flag
_define("string", "checkpoint_path", None, "A checkpoint prefix (default: output_dir's latest).")
_define("string", "decode_from_file", None, "Translate this text file, one sentence per line.")
_define("string", "decode_prefix_file", None,
        "With --decode_from_file: target prefixes, line-aligned with it (an empty line: "
        "none); each output starts with its prefix, scored with it.")
_define("string", "decode_terms_file", None,
        "With --decode_from_file: terminology constraints, a JSON list of target phrases "
        "per input line (e.g. [\"Hund\", \"roter Ball\"]; [] or an empty line: none); "
        "each output contains every phrase of its line (lexically constrained beam search).")
t2t_keras.bin.define_renamed_flag("decode_constraints_file", "decode_terms_file")
_define("string", "target_language", None,
        "A multilingual run's output language for every line of --decode_from_file, "
        "--decode_interactive or --score_file (its tag, e.g. <2fr>, goes in front); without "
        "it each line starts with its own tag.")
_define("string", "source_language", None,
        "A language-token model's (M2M-100's) source language for every line, e.g. en "
        "(its token, __en__, goes in front; --score_file's targets are scored after the "
        "target language's token); without it each line starts with its own.")
_define("string", "decode_to_file", None,
        "Where translations (or --score_file scores) go (default for translations: "
        "<decode_from_file>.beam<k>.alpha<a>.decodes).")
_define("string", "decode_reference", None, "Reference translations: print BLEU.")
_define("bool", "decode_interactive", False, "Translate lines read from stdin.")
_define("string", "decode_hparams", "", 'Decoding overrides, e.g. "beam_size=4,alpha=0.6".')
_define("string", "score_file", None,
        "t2t's scoring: a file of 'source<TAB>target' lines; writes log p(target|source) "
        "per line to --decode_to_file.")
_define("string", "attention_plot_dir", None, "Write an encoder-decoder attention PNG per sentence.")
_define("string", "tmp_dir", None, "Raw data of downloaded problems (for raw references).")
_define("string", "decode_split", None, "Translate this split (test/dev) of the problem, with BLEU.")
_define("enum", "engine", "tensorflow",
        "Who runs the search: tensorflow (the checkpoint), ctranslate2 (--ct2_model_dir) or "
        "litert (--litert_model_dir).",
        enum_values=["tensorflow", "ctranslate2", "litert"])
_define("string", "ct2_model_dir", None,
        "With --engine=ctranslate2: the converted model (default output_dir/ctranslate2).")
_define("string", "litert_model_dir", None,
        "With --engine=litert: the converted model (default output_dir/litert).")


def main(argv):
  del argv
  _check_flags()
  run_flags.import_usr_dir()
  run_flags.check_model_dir(FLAGS.output_dir, FLAGS.engine)
  # What t2t_keras.load reads: a run, "a,b" runs (an ensemble), or a tensor2tensor, Marian
  # or Hugging Face directory imported into a temporary run on the fly (it says so); the
  # decoding is resolved from the run's files before the model loads.
  translator = library.load(FLAGS.output_dir, checkpoint_path=FLAGS.checkpoint_path,
                            decode_hparams=FLAGS.decode_hparams, log=print)
  (model, vocab, _, info, checkpoint_path), decoding = translator.run, translator.decoding
  settings = decoding.settings
  print(f"loaded {checkpoint_path} ({info['problem']}, vocab {vocab.vocab_size})")
  if decoding.defaults:
    print(f"decoding with {info['problem']}'s defaults {decoding.defaults}, then "
          f"--decode_hparams={FLAGS.decode_hparams!r}")
  outputs = files.Outputs(FLAGS.decode_to_file or None, FLAGS.attention_plot_dir or None)
  search_fn = None if FLAGS.score_file else _search_fn(model, vocab, decoding, info["problem"])
  if FLAGS.decode_interactive:
    print("type a sentence per line; Ctrl-D ends")
    files.decode_interactive(model, vocab, decoding, search_fn=search_fn,
                             target_language=FLAGS.target_language,
                             source_language=FLAGS.source_language)
  elif FLAGS.score_file:
    scoring.score_file(model, vocab, FLAGS.score_file, FLAGS.decode_to_file, decoding,
                       source_language=FLAGS.source_language,
                       target_language=FLAGS.target_language)
  elif FLAGS.decode_from_file:
    inputs = files.InputFiles(FLAGS.decode_from_file, FLAGS.decode_reference,
                              FLAGS.decode_prefix_file, FLAGS.decode_terms_file,
                              FLAGS.target_language, FLAGS.source_language)
    files.decode_file(model, vocab, inputs, settings, outputs, search_fn, decoding.hooks)
  else:
    split = files.Split(info["problem"], FLAGS.decode_split, FLAGS.data_dir, FLAGS.tmp_dir)
    files.decode_split(model, vocab, split, settings, outputs, search_fn, decoding.hooks)


def _check_flags():
  """UsageError / InputError for flags that do not go together or name missing files."""
  if not FLAGS.output_dir:
    raise app.UsageError("--output_dir is required")
  modes = {"--decode_from_file": FLAGS.decode_from_file, "--decode_split": FLAGS.decode_split,
           "--decode_interactive": FLAGS.decode_interactive, "--score_file": FLAGS.score_file}
  if sum(bool(v) for v in modes.values()) != 1:
    raise app.UsageError(f"give exactly one of {', '.join(modes)}")
  for flag, value in (("--decode_prefix_file", FLAGS.decode_prefix_file),
                      ("--decode_terms_file", FLAGS.decode_terms_file)):
    if value and not FLAGS.decode_from_file:
      raise app.UsageError(f"{flag} goes with --decode_from_file")
  for flag, value in (("--target_language", FLAGS.target_language),
                      ("--source_language", FLAGS.source_language)):
    if value and FLAGS.decode_split:
      raise app.UsageError(f"{flag} goes with --decode_from_file, --decode_interactive or "
                           "--score_file (a split's sources carry their tags)")
  if FLAGS.decode_prefix_file and FLAGS.decode_terms_file:
    raise app.UsageError("--decode_prefix_file and --decode_terms_file do not combine "
                         "yet: give one")
  for flag, path in (("--decode_from_file", FLAGS.decode_from_file),
                     ("--decode_prefix_file", FLAGS.decode_prefix_file),
                     ("--decode_terms_file", FLAGS.decode_terms_file),
                     ("--decode_reference", FLAGS.decode_reference),
                     ("--score_file", FLAGS.score_file)):
    if path and not fileio.isfile(path):
      raise InputError(f"{flag}={path}: no such file")
  if FLAGS.score_file and not FLAGS.decode_to_file:
    raise InputError("--score_file needs --decode_to_file for the scores")
  if FLAGS.engine != "tensorflow" and FLAGS.decode_terms_file:
    raise InputError(f"--engine={FLAGS.engine} has no terminology constraints; use "
                     "--engine=tensorflow")
  if FLAGS.engine != "tensorflow" and (FLAGS.score_file or FLAGS.attention_plot_dir):
    raise InputError(f"--engine={FLAGS.engine} translates; --score_file and "
                     "--attention_plot_dir need --engine=tensorflow")
  if FLAGS.decode_to_file:  # refused now, not after the decoding
    fileio.check_writable(FLAGS.decode_to_file)


def _search_fn(model, vocab, decoding, problem):
  """The search the flags ask for (the spec's, or an engine's), or None where translate_ids
  asks a spec itself (terminology constraints; no prefix file and no output constraint)."""
  constraint = decoding.constraint(vocab)
  if FLAGS.engine != "tensorflow":
    from t2t_keras.exporting import ct2_engine  # pylint: disable=import-outside-toplevel
    search_ids, what = ct2_engine.load_engine(
        FLAGS.engine, FLAGS.output_dir, decoding.settings.search, constraint,
        FLAGS.ct2_model_dir if FLAGS.engine == "ctranslate2" else FLAGS.litert_model_dir,
        prefixes=bool(FLAGS.decode_prefix_file))
    print(f"decoding with {what}")
    return search_ids
  if FLAGS.decode_terms_file and constraint is not None:
    raise InputError(f"terminology constraints cannot be combined with {problem}'s output "
                     "constraint yet; pass --decode_hparams=constrain=false to decode without it")
  if constraint is not None:
    print(f"decoding with {problem}'s output constraint {type(constraint).__name__} "
          "(constrain=false turns it off)")
  if FLAGS.decode_prefix_file or constraint is not None:
    return decoding.search_fn(model, vocab, "prefix" if FLAGS.decode_prefix_file else "ids")
  return None


def run():
  t2t_keras.bin.app_run(main, NAME)


if __name__ == "__main__":
  run()
