"""Sequence packing: several (inputs, targets) pairs per fixed-length row.

tensor2tensor's "packed" datasets, built on the fly:

    rows = pack_dataset(ds, length=256)
    # ds:   {"inputs": int32 [n], "targets": int32 [m]}, EOS included, no padding
    # rows: {"inputs", "targets", "inputs_segmentation", "targets_segmentation",
    #        "inputs_position", "targets_position"}: int32 [length] each

A row holds pairs 1, 2, 3, ... in order of placement; pair k's tokens have
segment id k on BOTH sides, and positions 0, 1, 2, ... from the start of its
segment. Padding (at the end of each side) has id 0, segment 0 and position 0.
For example, pairs ([5, 1], [7, 8, 1]) then ([6, 1], [9, 1]) in a row of 6:

    inputs               5 1 6 1 0 0      targets               7 8 1 9 1 0
    inputs_segmentation  1 1 2 2 0 0      targets_segmentation  1 1 1 2 2 0
    inputs_position      0 1 0 1 0 0      targets_position      0 1 2 0 1 0

The model must keep segments apart: attention only within one segment id
(encoder self-attention, decoder self-attention and encoder-decoder attention
alike), positions from the *_position features, and the decoder's inputs
shifted right within each segment, not across the whole row.

Algorithm: streaming first-fit over `num_open_rows` open rows, one
`tf.data.Dataset.scan` step per pair, so the iterator stays checkpointable
(tf.train.Checkpoint) and the order is deterministic given the input order.
A pair goes to the first open row where both sides fit. When none has room, the
fullest open row is emitted and the pair starts it afresh; "fullest" is the row
whose fuller side holds the most tokens (ties: most tokens on both sides), since
that side is what stops a row from taking more pairs (on Multi30k it leaves
~0.5 points less padding than ranking rows by their total). A finite dataset
ends with `num_open_rows` flush steps that emit the open rows, fullest first, so
every pair comes out exactly once. Only the placement runs in the (sequential)
scan: the length check and padding of each pair run in a parallel map before it,
positions are derived from the segment ids in a parallel map after it.
"""

import functools

import tensorflow as tf

FEATURES = ("inputs", "targets", "inputs_segmentation", "targets_segmentation",
            "inputs_position", "targets_position")


def pack_dataset(dataset, length, num_open_rows=8):
  """Packs pairs into rows of `length` tokens per side.

  Args:
    dataset: tf.data.Dataset of {"inputs": int32 [n], "targets": int32 [m]};
      every n and m must be <= `length` (checked at run time: an
      InvalidArgumentError naming both lengths). Other features are dropped;
      pairs with both sides empty carry no tokens and are dropped too.
    length: tokens per row and side, >= the longest side of any pair.
    num_open_rows: rows filled at a time; more rows, less padding, more work
      per pair (O(num_open_rows * length) per scan step).

  Returns:
    tf.data.Dataset of dicts with the `FEATURES` keys, each int32 [length].
  """
  length, k = int(length), int(num_open_rows)
  if length < 1:
    raise ValueError(f"pack_dataset: length must be >= 1, got {length}")
  if k < 1:
    raise ValueError(f"pack_dataset: num_open_rows must be >= 1, got {k}")

  flush = tf.data.Dataset.from_tensors(
      (tf.zeros([2, 2, length], tf.int32), tf.zeros([2], tf.int32), tf.constant(True)))
  steps = (dataset.filter(_nonempty)
           .map(functools.partial(_as_step, length=length),
                num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
           .concatenate(flush.repeat(k)))
  # Scan state: rows int32 [k, 2, 2, length] (per side: ids, segment ids),
  # fills int32 [k, 2] (tokens used per side), pairs int32 [k] (pairs per row).
  state = (tf.zeros([k, 2, 2, length], tf.int32), tf.zeros([k, 2], tf.int32),
           tf.zeros([k], tf.int32))
  return (steps.scan(state, functools.partial(_place, length=length))
          .filter(lambda ok, unused_row: ok)
          .map(_row_features, num_parallel_calls=tf.data.AUTOTUNE, deterministic=True))


def _as_step(ex, length):
  """Scan input of a pair: (block int32 [2, 2, length], sizes int32 [2], is_flush).

  block[side] = (ids, ones over the ids), left-aligned and zero-padded.
  """
  sizes = tf.stack([tf.size(ex["inputs"]), tf.size(ex["targets"])])
  with tf.control_dependencies([tf.debugging.assert_less_equal(sizes, length, message=(
      f"pack_dataset: an example is longer than the row length {length}; filter by "
      f"max_length <= {length} first. (inputs length, targets length):"))]):
    block = tf.stack([
        tf.stack([tf.pad(ex[key], [[0, length - sizes[i]]]),
                  tf.cast(tf.range(length) < sizes[i], tf.int32)])
        for i, key in enumerate(("inputs", "targets"))])
  return block, sizes, tf.constant(False)


def _place(state, elem, length):
  """Places one pair in the first open row it fits (or flushes); when none fits, emits
  the fullest row and starts it afresh with the pair. Outputs (emit?, the emitted row
  int32 [2, 2, length])."""
  rows, fills, pairs = state
  block, sizes, is_flush = elem
  fits = tf.reduce_all(fills + sizes <= length, axis=1) & ~is_flush
  emit = ~tf.reduce_any(fits)
  fullness = tf.reduce_max(fills, 1) * (2 * length + 1) + tf.reduce_sum(fills, 1)
  row = tf.where(emit, tf.argmax(fullness, output_type=tf.int32),
                 tf.argmax(tf.cast(fits, tf.int32), output_type=tf.int32))
  old = rows[row]
  keep = 1 - tf.cast(emit, tf.int32)  # 0: the row is emitted and starts afresh
  start = fills[row] * keep
  seg_id = pairs[row] * keep + 1 - tf.cast(is_flush, tf.int32)
  # start + size <= length, so rolling a block by `start` puts the pair at
  # [start, start + size) and zeros elsewhere.
  placed = tf.stack([tf.roll(block[0], start[0], 1), tf.roll(block[1], start[1], 1)])
  new = old * keep + placed * tf.reshape(tf.stack([1, seg_id]), [1, 2, 1])
  state = (tf.tensor_scatter_nd_update(rows, [[row]], new[None]),
           tf.tensor_scatter_nd_update(fills, [[row]], (start + sizes)[None]),
           tf.tensor_scatter_nd_update(pairs, [[row]], [seg_id]))
  return state, (emit & (pairs[row] > 0), old)


def _row_features(unused_ok, row):
  """An emitted row int32 [2, 2, length] -> the `FEATURES` dict."""
  return {"inputs": row[0, 0], "targets": row[1, 0],
          "inputs_segmentation": row[0, 1], "targets_segmentation": row[1, 1],
          "inputs_position": _positions(row[0, 1]), "targets_position": _positions(row[1, 1])}


def _nonempty(ex):
  return tf.size(ex["inputs"]) + tf.size(ex["targets"]) > 0


def _positions(segmentation):
  """int32 [length]: index of each token within its segment; 0 on padding (segment 0)."""
  index = tf.range(tf.size(segmentation))
  first = tf.math.unsorted_segment_min(index, segmentation, tf.size(segmentation) + 1)
  return tf.where(segmentation > 0, index - tf.gather(first, segmentation), 0)
