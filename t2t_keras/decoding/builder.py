"""Where every search is built: a `DecodeSettings.search` and what the search takes -> the
callable or the compiled tf.function. `decoding/spec.py`'s `DecodingSpec` is the one caller
(test_house holds it): t2t-decoder, the library, training's dev BLEU, the SavedModel and
LiteRT all ask a spec, so a problem's output constraint and the settings apply alike.

    fn = compile_search(model, settings.search, constraint=None, takes="ids")
    ids, scores = fn(tf.constant([[5, 6, 1]]))    # [1, beam, len], [1, beam]

What a search takes (TAKES), after the source ids int32 [batch, len] (0-padded, EOS-ended):
  "ids":     nothing more; -> (ids [batch, beam, out], scores [batch, beam])
  "prefix":  target prefixes int32 [batch, P] 0-padded (`search_common.prefix_forcing`);
             -> as "ids"
  "phrases": terminology constraints (`lexical.py`): their pieces int32 [batch, C, T] and
             lengths int32 [batch, C] (KMP's failure links are computed in the graph);
             -> (ids, scores, met bool [batch])
  "seed":    int32 [] for sampling (`sampling_method=random`, beam 1 whatever the settings,
             their sampling_temp / _keep_top_k / _keep_top_p); -> as "ids"
"""

import tensorflow as tf

from t2t_keras.decoding import lexical
from t2t_keras.decoding import search as search_lib
from t2t_keras.decoding.sharding import shard_search_fn
from t2t_keras.errors import InputError

TAKES = ("ids", "prefix", "phrases", "seed")


def signature(takes="ids", phrase_shape=None):
  """The tf.TensorSpecs of a search taking `takes`; phrase_shape (C, T): the static most
  phrases and pieces of "phrases" (its candidates are counted in Python)."""
  ids = tf.TensorSpec([None, None], tf.int32)
  if takes == "prefix":
    return [ids, tf.TensorSpec([None, None], tf.int32)]
  if takes == "phrases":
    c, t = phrase_shape
    return [ids, tf.TensorSpec([None, c, t], tf.int32), tf.TensorSpec([None, c], tf.int32)]
  if takes == "seed":
    return [ids, tf.TensorSpec([], tf.int32)]
  return [ids]


def make_searcher(model, search_settings, constraint=None, takes="ids"):
  """The search as a Python callable of the inputs `takes` names (module docstring), not
  compiled (LiteRT compiles its own signatures). `constraint`: a problem's output constraint
  (`decoding/output_constraint.py`) or None; terminology constraints refuse one (InputError)."""
  if takes not in TAKES:
    raise ValueError(f"takes={takes!r}: one of {', '.join(TAKES)}")
  if takes == "phrases":
    if constraint is not None:
      raise InputError("terminology constraints cannot be combined with a problem's output "
                       "constraint yet")
    constrained = search_lib.constrained_from_settings(model, search_settings)
    return lambda ids, tokens, lengths: constrained(
        ids, tokens, lengths, lexical.failure_links(tokens, lengths))
  if takes == "seed":
    options = search_lib.SearchOptions.from_settings(
        search_settings.replace(sampling_method="random", beam_size=1))

    def sample(ids, seed):
      seeded = options.replace(sampling=options.sampling._replace(seed=seed))
      return search_lib.search(model, ids, seeded, constraint)

    return sample
  search = search_lib.from_settings(model, search_settings, constraint)
  if takes == "prefix":
    return lambda ids, prefix: search(ids, prefix=prefix)
  return search


def compile_search(model, search_settings, constraint=None, takes="ids", phrase_shape=None):
  """`make_searcher`'s search as one tf.function for every input shape (XLA still compiles one
  program per shape: `search_settings.jit`), run as `search_settings.search_shards`
  concurrent slices of the batch (`decoding/sharding.py`; not "seed", whose seed is no
  batch input)."""
  spec = signature(takes, phrase_shape)
  fn = tf.function(make_searcher(model, search_settings, constraint, takes),
                   jit_compile=bool(search_settings.jit), autograph=False, input_signature=spec)
  if takes == "seed":
    return fn
  return shard_search_fn(fn, search_settings.search_shards, spec)
