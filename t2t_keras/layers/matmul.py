"""x @ w whose weight gradient is taken in the faster of two layouts on CPUs.

TF's MatMul gradient computes the weight's gradient as x^T dy with
`matmul(x, dy, transpose_a=True)`. For a tall x that is wider than dy (the
FFN's second layer: x [rows, d_ff], dy [rows, d_model]) TF's oneDNN kernel runs
that product at about 3/4 of the speed of the same product laid out as
`matmul(dy, x, transpose_a=True)` = (x^T dy)^T, [d_model, d_ff], plus a
transpose of that small result (the other way round the plain form is faster;
figures: docs/notebook.md). `matmul` picks the layout whose product has the
fewer rows.
"""

import tensorflow as tf

from t2t_keras.layers.custom_gradient import custom_gradient


@custom_gradient
def matmul(x, w):
  """x [N, k] @ w [k, n] -> [N, n]; values and gradients equal tf.matmul's.

  The gradient of w is (dy^T x)^T when k > n, x^T dy otherwise; x's is dy w^T.
  """
  y = tf.matmul(x, w)

  def grad(dy):
    dx = tf.matmul(dy, w, transpose_b=True)
    if x.shape[-1] is not None and w.shape[-1] is not None and x.shape[-1] > w.shape[-1]:
      dw = tf.transpose(tf.matmul(dy, x, transpose_a=True))
    else:
      dw = tf.matmul(x, dy, transpose_a=True)
    return dx, dw

  return y, grad
