"""Several trained models decoding as one: the mean of their probabilities at each step.

    ensemble = Ensemble([run_a.model, run_b.model])      # same vocabulary
    ids, scores = search.search(ensemble, inputs, SearchOptions(beam_size=4))  # any search

An `Ensemble` has the three methods a search calls on a Transformer (`encode`,
`init_cache`, `decode`), so greedy search, beam search, sampling, scoring, the
decoder and the SavedModel run it as they run one model, in one compiled
program. Each model keeps its own encoder output and its own k/v cache; a
beam-folded cache shares one "ancestry" (which beam slot each history holds is
the search's, not a model's). The step's output is

    log p(y | x, prefix) = log( (1/M) * sum_m p_m(y | x, prefix) )

as fairseq, Marian and Sockeye average (probabilities, equal weights), returned
as logits (normalized log probs: a softmax of them gives back the mean). The
models may differ in size and depth; they must share the vocabulary.
"""

import math

import tensorflow as tf

from t2t_keras.models.transformer import shift_right

ANCESTRY = "ancestry"


class Ensemble:
  """M models with one vocabulary, as one model for decoding (not for training).

  Args:
    models: Transformers (built, restored), all with the same vocab_size.
  """

  def __init__(self, models):
    models = list(models)
    if len(models) < 2:
      raise ValueError(f"an ensemble needs at least 2 models, got {len(models)}")
    sizes = {m.vocab_size for m in models}
    if len(sizes) != 1:
      raise ValueError(f"the models' vocabulary sizes differ: {sorted(sizes)}")
    self.models = models
    self.vocab_size = models[0].vocab_size
    self.hparams = _decoding_hparams([m.hparams for m in models])

  @property
  def variables(self):
    return [v for m in self.models for v in m.variables]

  def __call__(self, features, training=False):
    """Teacher forcing, {"inputs", "targets"} -> the mean's log probs [batch, tgt_len, vocab]
    (what `scoring` reads as logits; unpacked rows only)."""
    memory, mask = self.encode(features["inputs"], training=training)
    return self.decode(shift_right(features["targets"]), memory, mask, training=training)[0]

  def encode(self, inputs, training=False):
    """int32 [batch, src_len] -> (tuple of each model's memory, the source mask)."""
    encoded = [m.encode(inputs, training=training) for m in self.models]
    return tuple(memory for memory, _ in encoded), encoded[0][1]

  def init_cache(self, memory, max_decode_length, beam_size=None):
    """{"model_<m>": that model's cache, "ancestry": shared (beam-folded only)}."""
    cache = {}
    for i, (model, mem) in enumerate(zip(self.models, memory)):
      own = model.init_cache(mem, max_decode_length, beam_size=beam_size)
      if ANCESTRY in own:
        cache[ANCESTRY] = own.pop(ANCESTRY)
      cache[f"model_{i}"] = own
    return cache

  def decode(self, decoder_input, memory, memory_mask, cache=None, cache_index=None,
             training=False, return_attention=False):
    """The mean of the models' next-token distributions, as log probs [batch, tgt_len, vocab];
    with `return_attention`, the encoder-decoder attention of every member's decoder
    layers, the first member's layers first (the export's attention signature and the
    attention plots show each member's layers)."""
    memory = memory if memory is not None else (None,) * len(self.models)
    log_probs, new_cache, attentions = [], None if cache is None else {}, []
    for i, model in enumerate(self.models):
      own = None
      if cache is not None:
        own = dict(cache[f"model_{i}"])
        if ANCESTRY in cache:
          own[ANCESTRY] = cache[ANCESTRY]
      out = model.decode(decoder_input, memory[i], memory_mask, cache=own,
                         cache_index=cache_index, training=training,
                         return_attention=return_attention)
      log_probs.append(tf.nn.log_softmax(tf.cast(out[0], tf.float32)))
      if cache is not None:
        updated = dict(out[1])
        if ANCESTRY in updated:
          new_cache[ANCESTRY] = updated.pop(ANCESTRY)
        new_cache[f"model_{i}"] = updated
      if return_attention:
        attentions.append(out[2])
    mean = tf.reduce_logsumexp(tf.stack(log_probs), axis=0) - math.log(len(self.models))
    if not return_attention:
      return mean, new_cache
    return mean, new_cache, [layer for layers in attentions for layer in layers]


def _decoding_hparams(all_hparams):
  """The first model's hparams, with the smallest max_positions of any model with learned
  positions (the output buffer must fit every model)."""
  first = all_hparams[0]
  learned = [hp.max_positions for hp in all_hparams if hp.get("pos") == "emb"]
  if learned:
    return first.replace(pos="emb", max_positions=min(learned))
  return first
