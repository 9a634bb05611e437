"""A batch searched as several concurrent searches over its slices, so a CPU's cores all work.

One XLA-compiled beam search leaves a 2-core CPU's second core idle much of the
time: its many small steps (the decoder's [128, 256] x [256, d] matmuls for 32
sentences x 4 beams) run one after the other. Two searches over the two halves
of the batch, called from a plain tf.function, run side by side on TF's
inter-op threads, with the same output ids (figures: docs/notebook.md). Every sentence is searched exactly as in the whole batch (its own
maximum length, the same padded width and buffer), so results do not depend on
the number of shards beyond float rounding.
"""

import os

import tensorflow as tf


def default_shards():
  """1 where a GPU is visible (one search fills it); else 2 on a CPU with 2 or more cores.

  2 is what was measured best on 2 cores (4 shards: 80 against 82.5 sentences/s);
  `search_shards=N` sets it for bigger CPUs.
  """
  if tf.config.list_logical_devices("GPU"):
    return 1
  return 2 if (os.cpu_count() or 1) >= 2 else 1


def sharded_search(search, shards):
  """`search` run on `shards` contiguous slices of the batch at once, results concatenated.

  Args:
    search: inputs int32 [batch, len] (and any further batch-major tensors, e.g.
      target prefixes) -> (ids int32 [batch, beam, max_len], scores float32 [batch,
      beam]), e.g. a jit-compiled tf.function; its max_len must depend on the padded
      width only (beam_search's does).
    shards: how many slices; a batch smaller than that is searched whole.
  Returns:
    A function of the same signature (trace it in a tf.function that is not
    jit-compiled: inside XLA the slices would run one after the other).
  """
  if shards <= 1:
    return search

  def fn(*tensors):
    batch = tf.shape(tensors[0])[0]

    def split():
      bounds = [k * batch // shards for k in range(shards + 1)]
      outs = [search(*[t[bounds[k]:bounds[k + 1]] for t in tensors]) for k in range(shards)]
      return tuple(tf.concat(parts, axis=0) for parts in zip(*outs))

    return tf.cond(batch >= shards, split, lambda: tuple(search(*tensors)))

  return fn


def shard_search_fn(search_fn, shards=0, input_signature=None):
  """`search_fn` (a jit-compiled tf.function) as `shards` concurrent slices in a plain
  tf.function; shards 0 = `default_shards()`; unchanged when that is 1."""
  shards = shards or default_shards()
  if shards == 1:
    return search_fn
  return tf.function(sharded_search(search_fn, shards), autograph=False,
                     input_signature=input_signature)
