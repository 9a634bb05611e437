"""The peer (TF Model Garden's Seq2SeqTransformer) at any size: one training step and beam search.

Run with the peer's python (tf-models-official; ../shared/bench/README.md), as
benchmarks/peer_compare.py does for --size tiny|base|big:

    /tmp/peer/bin/python benchmarks/model_garden_sized.py --vocab 37000 --layers 6 \
        --d_model 512 --heads 8 --d_ff 2048 --norm_first 0 --dropout 0.1 --batch 64 --length 64

What ../shared/bench/model_garden_peer.py does at the small size, with the shapes as flags
(bench_sizes.peer_flags derives them from our hparams, so both sides build one model):
random ids in [2, vocab) from numpy default_rng(0), sources then targets, no padding;
Adam (0.9, 0.98, 1e-9) at a constant 1e-4; label smoothing over the vocabulary as the
shared script's loss; one traced step timed apart, 3 warm-up steps, then STEPS (15) timed
steps, each until the loss is on the host (with --profile_dir, under tf.profiler, each in
a "train" trace event). JIT=1 compiles the step with XLA (peer_compare sets it where our
Trainer compiles: on a GPU). Then beam search (beam 4, alpha 0.6, max
length 40, a plain tf.function, as the shared script) on 32 sources of 29 random ids in
[3, vocab) + EOS, the inputs of our step_bench.py; it may stop at EOS, so its mean decoded
length is printed. --decode_steps 0 skips the search. Output lines are the shared
script's, so peer_sides.parse_peer_step (peer_compare.py's) reads both.

Imports only the peer's packages (numpy, tensorflow, tf_keras, official): nothing of ours.
"""

import argparse
import contextlib
import os
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


def main():
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  for name in ("vocab", "layers", "d_model", "heads", "d_ff", "norm_first", "batch", "length"):
    parser.add_argument(f"--{name}", type=int, required=True)
  for name in ("dropout", "attention_dropout", "relu_dropout"):
    parser.add_argument(f"--{name}", type=float, default=0.0)
  parser.add_argument("--label_smoothing", type=float, default=0.1)
  parser.add_argument("--steps", type=int, default=int(os.environ.get("STEPS", "15")))
  parser.add_argument("--decode_steps", type=int, default=int(os.environ.get("DSTEPS", "5")))
  parser.add_argument("--profile_dir", help="the timed steps under tf.profiler, each marked "
                                            "'train' (profile_step.py --peer reads it)")
  args = parser.parse_args()

  # pylint: disable=import-outside-toplevel
  import numpy as np
  import tensorflow as tf
  import tf_keras
  from official.nlp.modeling.models import seq2seq_transformer as s2s

  print("tf", tf.__version__, "tf_keras", tf_keras.__version__, flush=True)
  jit = os.environ.get("JIT", "0") == "1"
  vocab, batch, length = args.vocab, args.batch, args.length
  layer_kw = dict(num_layers=args.layers, num_attention_heads=args.heads,
                  intermediate_size=args.d_ff, activation="relu", dropout_rate=args.dropout,
                  attention_dropout_rate=args.attention_dropout, use_bias=False,
                  norm_first=bool(args.norm_first), norm_epsilon=1e-6,
                  intermediate_dropout=args.relu_dropout)
  model = s2s.Seq2SeqTransformer(
      vocab_size=vocab, embedding_width=args.d_model, dropout_rate=args.dropout,
      padded_decode=False, decode_max_length=40, beam_size=4, alpha=0.6,
      encoder_layer=s2s.TransformerEncoder(**layer_kw),
      decoder_layer=s2s.TransformerDecoder(**layer_kw), eos_id=1)
  rng = np.random.default_rng(0)
  src = tf.constant(rng.integers(2, vocab, (batch, length)), tf.int32)
  tgt = tf.constant(rng.integers(2, vocab, (batch, length)), tf.int32)
  opt = tf_keras.optimizers.Adam(1e-4, beta_1=0.9, beta_2=0.98, epsilon=1e-9)

  def loss_fn(logits, labels):
    confidence = 1.0 - args.label_smoothing
    low = args.label_smoothing / (vocab - 1)
    soft = tf.one_hot(labels, vocab, on_value=confidence, off_value=low)
    xent = tf.nn.softmax_cross_entropy_with_logits(labels=soft,
                                                   logits=tf.cast(logits, tf.float32))
    weights = tf.cast(tf.not_equal(labels, 0), tf.float32)
    return tf.reduce_sum(xent * weights) / tf.reduce_sum(weights)

  @tf.function(jit_compile=jit)
  def train_step(src, tgt):
    with tf.GradientTape() as tape:
      loss = loss_fn(model({"inputs": src, "targets": tgt}, training=True), tgt)
    grads = tape.gradient(loss, model.trainable_variables)
    opt.apply_gradients(zip(grads, model.trainable_variables))
    return loss

  start = time.perf_counter()
  loss = float(train_step(src, tgt))
  print(f"first step (trace/compile) {time.perf_counter() - start:.1f}s loss {loss:.3f}",
        flush=True)
  print("params:", sum(int(np.prod(v.shape)) for v in model.trainable_variables), flush=True)
  for _ in range(3):
    train_step(src, tgt)
  times = []
  marker = contextlib.nullcontext  # the timed steps as they are, unless profiled
  if args.profile_dir:
    tf.profiler.experimental.start(args.profile_dir)
    marker = lambda i: tf.profiler.experimental.Trace("train", step_num=i, _r=1)  # noqa: E731
  for i in range(args.steps):
    start = time.perf_counter()
    with marker(i):
      loss = train_step(src, tgt).numpy()
    times.append(time.perf_counter() - start)
  if args.profile_dir:
    tf.profiler.experimental.stop()
  med = float(np.median(times))
  print(f"TRAIN jit={jit}: median step {med * 1000:.1f} ms (min {min(times) * 1000:.1f}, max "
        f"{max(times) * 1000:.1f}) over {len(times)} steps; {batch * length / med:.0f} target "
        f"tok/s ({2 * batch * length / med:.0f} src+tgt tok/s); loss {float(loss):.3f}",
        flush=True)
  if args.decode_steps < 1:
    return

  decode_batch = 32
  ids = np.random.default_rng(0).integers(3, vocab, (decode_batch, 29))  # step_bench's
  dsrc = tf.constant(np.concatenate([ids, np.ones([decode_batch, 1], np.int64)], 1), tf.int32)

  @tf.function
  def decode(x):
    return model({"inputs": x}, training=False)

  start = time.perf_counter()
  out = decode(dsrc)
  print(f"decode first call {time.perf_counter() - start:.1f}s, outputs shape "
        f"{out['outputs'].shape}", flush=True)
  dtimes = []
  for _ in range(args.decode_steps):
    start = time.perf_counter()
    out = decode(dsrc)
    _ = out["outputs"].numpy()
    dtimes.append(time.perf_counter() - start)
  dmed = float(np.median(dtimes))
  lengths = tf.reduce_sum(tf.cast(tf.not_equal(out["outputs"], 0), tf.int32), -1).numpy()
  print(f"BEAM beam=4 batch={decode_batch} max_len=40: median {dmed:.2f}s/batch -> "
        f"{decode_batch / dmed:.1f} sent/s; decoded lengths mean {lengths.mean():.1f} "
        "(random model, no early EOS)", flush=True)


if __name__ == "__main__":
  main()
