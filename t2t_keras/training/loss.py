"""Label-smoothed cross-entropy over non-pad target tokens (section 5.4)."""

import tensorflow as tf

from t2t_keras.layers.custom_gradient import custom_gradient


def smoothed_xent(logits, labels, smoothing):
  """Per-token label-smoothed cross-entropy with a hand-written gradient and no one-hot tensor.

  The smoothed target q puts 1 - smoothing on the label and off = smoothing / (V - 1)
  on every other id; the loss is -sum_v q_v log p_v. With z the logits and
  lse = log sum_v exp z_v:

      loss = lse - z_label + off * (V z_label - sum_v z_v)
      dloss/dz = p - q = softmax(z) - off - (1 - smoothing - off) onehot

  The forward keeps exp(z - max) for the backward, which is one multiply and a
  scatter at the labels: no [N, V] log-softmax, one-hot or target tensor. It is
  XLA-compiled on its own (also when the training step is not), so the passes
  over the [N, V] logits fuse: faster than TF's fused sparse softmax kernel and
  than log_softmax with autodiff (figures: docs/notebook.md).

  Args:
    logits: float32 [N, V].
    labels: int [N] (any id; padding is weighted out by the caller).
    smoothing: epsilon_ls, a Python float.
  Returns:
    float32 [N].
  """
  return _smoothed_xent(logits, tf.cast(labels, tf.int32), float(smoothing))


def _smoothed_ids(z, skip_pad):
  """(how many ids the smoothing spreads over, float32 []; the off value's mask [V]
  or None): every id, or (skip_pad: PAD is outside the softmax, its logit masked) all
  but id 0."""
  vocab = tf.cast(tf.shape(z)[-1], tf.float32)
  if not skip_pad:
    return vocab, None
  return vocab - 1.0, 1.0 - tf.one_hot(0, tf.shape(z)[-1], dtype=tf.float32)


def _smoothed_terms(z, labels, smoothing, skip_pad=False):
  """(xent [N], e = exp(z - max) [N, V], total = sum e [N]) for float32 logits z [N, V]."""
  vocab, _ = _smoothed_ids(z, skip_pad)
  off = smoothing / (vocab - 1.0)
  top = tf.reduce_max(z, -1, keepdims=True)
  e = tf.exp(z - top)
  total = tf.reduce_sum(e, -1)
  z_label = tf.gather(z, labels, axis=1, batch_dims=1)
  xent = top[:, 0] + tf.math.log(total) - z_label
  if smoothing:
    z_sum = tf.reduce_sum(z[:, 1:] if skip_pad else z, -1)  # (PAD's -1e9 never summed)
    xent += off * (vocab * z_label - z_sum)
  return xent, e, total


def _p_minus_q(e, total, labels, dy, smoothing, skip_pad=False):
  """dy [N] * (softmax - q) [N, V] from `_smoothed_terms`' e and total."""
  vocab, smoothed = _smoothed_ids(e, skip_pad)
  off = smoothing / (vocab - 1.0)
  g = e * (dy / total)[:, None]
  if smoothing:
    g -= off * (dy[:, None] if smoothed is None else dy[:, None] * smoothed)
  at = tf.stack([tf.range(tf.shape(labels)[0]), labels], axis=1)
  return tf.tensor_scatter_nd_add(g, at, -(1.0 - smoothing - off) * dy)


@tf.function(jit_compile=True, autograph=False)
def _smoothed_xent(logits, labels, smoothing):

  @custom_gradient
  def fn(z):
    xent, e, total = _smoothed_terms(z, labels, smoothing)

    def grad(dy):
      return _p_minus_q(e, total, labels, dy, smoothing)

    return xent, grad

  return fn(logits)


@tf.function(jit_compile=True, autograph=False)
def _loss_and_grad(z, labels, smoothing, skip_pad=False):
  """float32 logits z [N, V], labels int32 [N] (0: padding, weight 0) ->
  (sum of the non-pad rows' losses, their gradient dloss/dz [N, V]). skip_pad: the
  smoothing leaves out id 0 (PAD outside the softmax, its logit masked)."""
  weights = tf.cast(tf.not_equal(labels, 0), tf.float32)
  xent, e, total = _smoothed_terms(z, labels, smoothing, skip_pad)
  return (tf.reduce_sum(xent * weights),
          _p_minus_q(e, total, labels, weights, smoothing, skip_pad))


@tf.function(jit_compile=True, autograph=False)
def _rdrop_loss_and_grad(z, labels, smoothing, alpha, skip_pad=False):
  """R-Drop's objective for one chunk and its gradient, as `_loss_and_grad` for one copy.

  z: float32 [2c, V], the logits of c rows under the first dropout masks, then of the same
  rows under the second; labels int32 [c] (0: padding, weight 0). The loss is the mean of
  the two copies' label-smoothed cross-entropy plus alpha / 2 times their symmetric KL,
  S = (KL(P || Q) + KL(Q || P)) / 2 = sum_v (p_v - q_v) d_v / 2 with d = log p - log q, so
  (derived by hand, checked against autodiff in tests/training/test_rdrop.py)

      dS/dz_p = (p * (d - E_p[d]) + p - q) / 2,   dS/dz_q = (-q * (d - E_q[d]) + q - p) / 2.

  Returns (the non-pad rows' loss sum, its gradient float32 [2c, V]).
  """
  weights = tf.cast(tf.not_equal(labels, 0), tf.float32)
  copies = []
  for zk in tf.split(z, 2):
    xent, e, total = _smoothed_terms(zk, labels, smoothing, skip_pad)
    # log-probabilities from the logits, not log(e / total): a masked logit (-1e9) would
    # give log 0 in both copies, and their difference NaN.
    log_p = zk - tf.reduce_max(zk, -1, keepdims=True) - tf.math.log(total)[:, None]
    copies.append((xent, e, total, log_p, e / total[:, None]))
  (xent_p, e_p, total_p, log_p, p), (xent_q, e_q, total_q, log_q, q) = copies
  d = log_p - log_q
  kl = 0.5 * tf.reduce_sum((p - q) * d, -1)                                   # [c]
  scale = (0.25 * alpha * weights)[:, None]  # alpha / 2 times dS/dz's one half
  dz_p = (_p_minus_q(e_p, total_p, labels, 0.5 * weights, smoothing, skip_pad)
          + scale * (p * (d - tf.reduce_sum(p * d, -1, keepdims=True)) + p - q))
  dz_q = (_p_minus_q(e_q, total_q, labels, 0.5 * weights, smoothing, skip_pad)
          + scale * (q * (tf.reduce_sum(q * d, -1, keepdims=True) - d) + q - p))
  loss = tf.reduce_sum(weights * (0.5 * (xent_p + xent_q) + 0.5 * alpha * kl))
  return loss, tf.concat([dz_p, dz_q], 0)


def smoothed_cross_entropy(logits, targets, smoothing):
  """Sum of label-smoothed cross-entropy over non-pad tokens, and their count.

  The smoothed target puts 1 - smoothing on the true token and
  smoothing / (V - 1) on each other token; the loss is -sum_v q_v log p_v.
  Summing (not averaging) lets the trainer divide by the token count summed
  over all replicas.

  Args:
    logits: float [..., V] (e.g. [batch, len, V]).
    targets: int [...] (e.g. [batch, len]); 0 is padding.
    smoothing: epsilon_ls.
  Returns:
    (loss_sum float32 scalar, num_tokens float32 scalar).
  """
  logits = tf.cast(logits, tf.float32)
  vocab = logits.shape[-1] or tf.shape(logits)[-1]
  xent = smoothed_xent(tf.reshape(logits, [-1, vocab]), tf.reshape(targets, [-1]), smoothing)
  weights = tf.cast(tf.not_equal(tf.reshape(targets, [-1]), 0), tf.float32)
  return tf.reduce_sum(xent * weights), tf.reduce_sum(weights)


# Rows of logits held at once by `projected_cross_entropy`, and the multiple the
# last, partial chunk is padded to (so the XLA loss kernel sees few shapes).
CHUNK_ROWS = 512
_LAST_CHUNK_MULTIPLE = 32


def projected_cross_entropy(hidden, table, targets, smoothing, compact=True, bias=None,
                            skip_pad=False):
  """The pre-softmax projection and the label-smoothed loss, a chunk of rows at a time.

  Equal to `smoothed_cross_entropy(hidden @ table^T + bias, targets, smoothing)`, value
  and gradients, without ever holding the [tokens, V] logits: CHUNK_ROWS rows at
  a time are projected, their loss and gradient p - q taken by the same XLA
  kernel, and the gradients of hidden and table (dloss/dz @ table and
  dloss/dz^T @ hidden) computed then, in the forward pass; the backward scales
  them by the incoming scalar. The logits' gradient is never stored either.
  With `compact`, rows whose target is padding are dropped first, so they cost
  no projection. The last partial chunk is padded with weight-0 rows to a
  multiple of 32.

  Args:
    hidden: float [..., d] (e.g. [batch, len, d_model]), the decoder's output,
      in the compute dtype (float32, bfloat16 or float16).
    table: [V, d] in hidden's dtype (the shared embedding matrix).
    targets: int [...] (e.g. [batch, len]); 0 is padding.
    smoothing: epsilon_ls, a Python float.
    compact: drop padding rows first. Their number varies by batch, which XLA
      cannot compile: pass False inside jit_compile.
    bias: None, or float32 [V] added to the logits (`Transformer.softmax_bias`).
    skip_pad: the smoothing leaves out id 0 (`softmax_excludes_pad`: PAD's logit is
      masked by `bias`).
  Returns:
    (loss_sum float32 scalar, num_tokens float32 scalar).
  """
  num_tokens = tf.reduce_sum(tf.cast(tf.not_equal(targets, 0), tf.float32))
  h, labels = _rows(hidden, targets, 1, compact)
  return _projected_loss(h, table, bias, labels, float(smoothing), skip_pad), num_tokens


def projected_rdrop_loss(hidden, table, targets, smoothing, rdrop_alpha, compact=True,
                         bias=None, skip_pad=False):
  """R-Drop's objective (Liang et al. 2021) as `projected_cross_entropy` computes the plain
  loss: a chunk of rows at a time, both copies' logits of a row in one chunk, value and
  gradients formed in the forward pass, never the [tokens, V] logits.

  The batch ran twice under its own dropout masks; per target token the loss is the mean
  of the two copies' label-smoothed cross-entropy plus rdrop_alpha / 2 times their
  symmetric KL, (KL(P || Q) + KL(Q || P)) / 2 as fairseq's
  `label_smoothed_cross_entropy_with_rdrop` (`compute_kl_loss`) computes it, neither side
  held constant: fairseq's objective (both copies' losses summed, plus rdrop_alpha times
  the KL) halved, so it reads as one pass's loss.

  Args:
    hidden: float [2B, T, d], the decoder's output for the batch (rows 0..B-1) and its
      copy (rows B..2B-1), in the compute dtype.
    table: [V, d] in hidden's dtype.
    targets: int [B, T], the batch's (0 is padding, left out).
    smoothing: epsilon_ls; rdrop_alpha: the KL's weight (Python floats).
    compact, bias, skip_pad: as `projected_cross_entropy`'s.
  Returns:
    float32 [], the loss summed over the batch's target tokens.
  """
  h, labels = _rows(hidden, targets, 2, compact)
  return _projected_loss(h, table, bias, labels, float(smoothing), skip_pad,
                         float(rdrop_alpha))


def _rows(hidden, targets, copies, compact):
  """(h [copies, N, d], labels int32 [N]): the decoder's output [copies * B, T, d] as rows
  of its `copies` copies of the batch, and the batch's targets [B, T] flattened; with
  `compact`, only the non-pad positions (a dynamic N)."""
  h = tf.reshape(hidden, [copies, -1, hidden.shape[-1]])
  labels = tf.reshape(tf.cast(targets, tf.int32), [-1])
  if compact:
    rows = tf.where(tf.not_equal(labels, 0))[:, 0]
    h, labels = tf.gather(h, rows, axis=1), tf.gather(labels, rows)
  return h, labels


def _projected_loss(h, table, bias, labels, smoothing, skip_pad, rdrop_alpha=None):
  """Sum of the losses of rows h [K, N, d] with labels [N] against logits h @ table^T
  (+ bias): K = 1, the label-smoothed cross-entropy; K = 2 (rdrop_alpha a float), R-Drop's
  objective over the two copies of each row."""
  # The gradients are formed before the loss scale (dy) multiplies them: float16
  # would flush p - q's small entries (the smoothing's 0.1 / (V - 1)), so they
  # are float32 there; bfloat16 has float32's range.
  grad_dtype = tf.float32 if h.dtype == tf.float16 else h.dtype
  copies, d = h.shape[0], h.shape[-1]
  settings = (smoothing, skip_pad, rdrop_alpha, grad_dtype)

  @custom_gradient
  def fn(h, table, *biases):
    # The gradient is `grad` below: nothing here is differentiated (no accumulators).
    h, table = tf.stop_gradient(h), tf.stop_gradient(table)
    b = tf.stop_gradient(biases[0]) if biases else None
    # Python ints where the shape is static (XLA needs them), tensors otherwise.
    n = h.shape[1] if h.shape[1] is not None else tf.shape(h)[1]
    full = n // CHUNK_ROWS
    dh = tf.TensorArray(grad_dtype, size=full, infer_shape=False,
                        element_shape=tf.TensorShape([copies, CHUNK_ROWS, d]))

    def body(i, loss, dtable, dbias, dh):
      start = i * CHUNK_ROWS  # tf.slice: a dynamic start and a static size (XLA)
      l, dhc, dtc, dbc = _chunk_loss(tf.slice(h, [0, start, 0], [copies, CHUNK_ROWS, -1]),
                                     table, b, tf.slice(labels, [start], [CHUNK_ROWS]),
                                     *settings)
      return i + 1, loss + l, dtable + dtc, dbias + dbc, dh.write(i, dhc)

    loss, dtable, dbias = tf.constant(0.0), tf.zeros(table.shape, tf.float32), tf.zeros([])
    dbias = dbias if b is None else tf.zeros_like(b)
    if not isinstance(full, int) or full:  # (XLA compiles the body even for 0 trips)
      _, loss, dtable, dbias, dh = tf.while_loop(
          lambda i, *_: i < full, body, (tf.constant(0), loss, dtable, dbias, dh),
          maximum_iterations=full,  # XLA needs the bound
          parallel_iterations=1)  # one chunk's logits alive at a time
    # The rest, padded with label-0 (weight 0) rows to a multiple of 32.
    rest = n - full * CHUNK_ROWS
    padded = -(-rest // _LAST_CHUNK_MULTIPLE) * _LAST_CHUNK_MULTIPLE
    last_h = tf.pad(h[:, full * CHUNK_ROWS:], [[0, 0], [0, padded - rest], [0, 0]])
    last_labels = tf.pad(labels[full * CHUNK_ROWS:], [[0, padded - rest]])
    l, dh_last, dt_last, db_last = _chunk_loss(last_h, table, b, last_labels, *settings)
    loss, dtable, dbias = loss + l, dtable + dt_last, dbias + db_last
    stacked = tf.transpose(dh.stack(), [1, 0, 2, 3])                 # [K, full, CHUNK, d]
    dh = tf.concat([tf.reshape(stacked, [copies, -1, d]), dh_last[:, :rest]], 1)

    def grad(dy):
      return (tf.cast(dh * tf.cast(dy, dh.dtype), h.dtype),
              tf.cast(dtable * tf.cast(dy, tf.float32), table.dtype),
              *[dbias * tf.cast(dy, tf.float32) for _ in biases])

    return loss, grad

  return fn(h, table) if bias is None else fn(h, table, tf.cast(bias, tf.float32))


def _chunk_loss(hc, table, bias, labels, smoothing, skip_pad, rdrop_alpha, grad_dtype):
  """(loss sum, d/dhc [K, c, d] in grad_dtype, d/dtable float32 [V, d], d/dbias float32 [V]
  (0 without a bias)) of one chunk hc [K, c, d] with labels [c], as `_projected_loss`."""
  copies, d = hc.shape[0], hc.shape[-1]
  hc = tf.reshape(hc, [-1, d])                                               # [K c, d]
  z = tf.cast(tf.matmul(hc, table, transpose_b=True), tf.float32)
  z = z if bias is None else z + bias
  if copies == 1:
    loss, dz = _loss_and_grad(z, labels, smoothing, skip_pad)
  else:
    loss, dz = _rdrop_loss_and_grad(z, labels, smoothing, rdrop_alpha, skip_pad)
  dbias = tf.zeros([]) if bias is None else tf.reduce_sum(dz, axis=0)
  dz, hc = tf.cast(dz, grad_dtype), tf.cast(hc, grad_dtype)
  return (loss, tf.reshape(tf.matmul(dz, tf.cast(table, grad_dtype)), [copies, -1, d]),
          tf.cast(tf.matmul(dz, hc, transpose_a=True), tf.float32), dbias)


def token_metrics(logits, targets):
  """Sums for dev metrics: (plain cross-entropy sum, correct-token count, token count)."""
  logits = tf.cast(logits, tf.float32)
  weights = tf.cast(tf.not_equal(targets, 0), tf.float32)
  xent = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=targets, logits=logits)
  correct = tf.cast(tf.equal(tf.argmax(logits, -1, output_type=targets.dtype), targets),
                    tf.float32)
  return (tf.reduce_sum(xent * weights), tf.reduce_sum(correct * weights),
          tf.reduce_sum(weights))
