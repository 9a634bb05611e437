"""Marian's transformer in float64 NumPy, written from Marian's source (marian-dev,
`src/models/transformer.h`, `src/layers/generic.h`, `src/layers/output.cpp`,
`src/tensors/cpu/tensor_operators.cpp`) for the import tests. It shares no code with
t2t_keras and works in Marian's ids.

    params, config = read(npz_path)
    logits = teacher_forced_logits(params, config, src_ids, tgt_ids)  # [T, V]
    out = greedy(params, config, src_ids, max_length)                  # ids, ending </s>

What it follows, each from the file named:
  * embeddings times sqrt(dim-emb), then sinusoids added (transformer.h
    addPositionalEmbeddings); the sinusoid of position p is [sin(p f_k) | cos(p f_k)],
    f_k = exp(-k log(10000) / (dim/2 - 1)) (tensor_operators.cpp
    SinusoidalPositionEmbeddings); positions start at 0 on both sides;
  * the decoder's input at step 0 is a zero vector (decoder.h embeddingsFromPrediction;
    in training, shift() inserts zeros), then step t's word embedding, position t;
  * a sublayer is postProcess(f(preProcess(x)), x): "dan" = LayerNorm(x + f(x)),
    pre-norm "n" / "da" = x + f(LayerNorm_pre(x)) with "_top" LayerNorms at the end;
    LayerNorm (x - mean) / sqrt(var + 1e-6) * scale + bias (generic.h layerNorm);
  * attention: x W + b per projection (W [in, out]), heads as contiguous column blocks,
    softmax(q k^T / sqrt(d_k) + (1 - mask) * -99999999) v, joined, W_o + b_o;
  * FFN W2(act(W1 x + b1)) + b2, act swish (x sigmoid(x)) or relu;
  * logits h Wt^T + b, Wt the tied embedding (or decoder_ff_logit_out_Wt).
"""

import numpy as np
import yaml

MASK = -99999999.0


def read(path):
  """({name: float64 array}, model.yml dict) of a Marian .npz."""
  with np.load(path) as npz:
    params = {k: npz[k].astype(np.float64) for k in npz.files if k != "special:model.yml"}
    text = npz["special:model.yml"].astype(np.uint8).tobytes().rstrip(b"\0").decode()
  return params, yaml.safe_load(text)


def sinusoids(length, dim, start=0):
  n = dim // 2
  increment = np.log(10000.0) / (n - 1)
  angles = np.arange(start, start + length)[:, None] * np.exp(-increment * np.arange(n))
  return np.concatenate([np.sin(angles), np.cos(angles)], axis=1)


def layer_norm(x, scale, bias):
  mean = x.mean(-1, keepdims=True)
  var = ((x - mean) ** 2).mean(-1, keepdims=True)
  return (x - mean) / np.sqrt(var + 1e-6) * scale.reshape(-1) + bias.reshape(-1)


def _dense(p, prefix, x, w, b):
  return x @ p[f"{prefix}_{w}"] + p[f"{prefix}_{b}"].reshape(-1)


def attention(p, prefix, queries, memory, mask, heads):
  """queries [T, d], memory [S, d], mask [T, S] (1 = attend) -> [T, d]."""
  q, k, v = (_dense(p, prefix, x, f"W{n}", f"b{n}")
             for x, n in ((queries, "q"), (memory, "k"), (memory, "v")))
  dk = q.shape[1] // heads
  out = []
  for h in range(heads):
    cols = slice(h * dk, (h + 1) * dk)
    z = q[:, cols] @ k[:, cols].T / np.sqrt(dk) + (1.0 - mask) * MASK
    w = np.exp(z - z.max(-1, keepdims=True))
    out.append((w / w.sum(-1, keepdims=True)) @ v[:, cols])
  return _dense(p, prefix, np.concatenate(out, axis=1), "Wo", "bo")


def ffn(p, prefix, x, activation):
  h = _dense(p, prefix, x, "W1", "b1")
  h = h / (1.0 + np.exp(-h)) if activation == "swish" else np.maximum(h, 0.0)
  return _dense(p, prefix, h, "W2", "b2")


def sublayer(p, ln_prefix, x, f, pre):
  if pre:
    return x + f(layer_norm(x, p[f"{ln_prefix}_ln_scale_pre"], p[f"{ln_prefix}_ln_bias_pre"]))
  return layer_norm(x + f(x), p[f"{ln_prefix}_ln_scale"], p[f"{ln_prefix}_ln_bias"])


def _is_pre(config):
  return "n" in str(config.get("transformer-preprocess") or "")


def _tables(p, config):
  """(source embedding, target embedding, output matrix Wt [V, d])."""
  if config.get("tied-embeddings-all") or config.get("tied-embeddings-src"):
    src = tgt = p["Wemb"]
  else:
    src, tgt = p["encoder_Wemb"], p["decoder_Wemb"]
  if config.get("tied-embeddings-all") or config.get("tied-embeddings"):
    return src, tgt, tgt
  return src, tgt, p["decoder_ff_logit_out_Wt"]


def encode(p, config, src):
  """src: Marian ids ending in </s> -> memory [S, d]."""
  d, heads, pre = config["dim-emb"], config["transformer-heads"], _is_pre(config)
  x = _tables(p, config)[0][src] * np.sqrt(d) + sinusoids(len(src), d)
  full = np.ones((len(src), len(src)))
  for i in range(1, config["enc-depth"] + 1):
    x = sublayer(p, f"encoder_l{i}_self_Wo", x,
                 lambda h, i=i: attention(p, f"encoder_l{i}_self", h, h, full, heads), pre)
    x = sublayer(p, f"encoder_l{i}_ffn_ffn", x,
                 lambda h, i=i: ffn(p, f"encoder_l{i}_ffn", h,
                                    config["transformer-ffn-activation"]), pre)
  if pre:
    x = layer_norm(x, p["encoder_top_ln_scale"], p["encoder_top_ln_bias"])
  return x


def decoder_logits(p, config, memory, previous):
  """previous: the target ids before each step (len T; step 0 has none) -> logits [T, V]."""
  d, heads, pre = config["dim-emb"], config["transformer-heads"], _is_pre(config)
  _, table, output = _tables(p, config)
  words = np.zeros((len(previous) + 1, d))
  words[1:] = table[previous]
  x = words * np.sqrt(d) + sinusoids(len(words), d)
  causal = np.tril(np.ones((len(words), len(words))))
  context = np.ones((len(words), len(memory)))
  for i in range(1, config["dec-depth"] + 1):
    x = sublayer(p, f"decoder_l{i}_self_Wo", x,
                 lambda h, i=i: attention(p, f"decoder_l{i}_self", h, h, causal, heads), pre)
    x = sublayer(p, f"decoder_l{i}_context_Wo", x,
                 lambda h, i=i: attention(p, f"decoder_l{i}_context", h, memory, context,
                                          heads), pre)
    x = sublayer(p, f"decoder_l{i}_ffn_ffn", x,
                 lambda h, i=i: ffn(p, f"decoder_l{i}_ffn", h,
                                    config["transformer-ffn-activation"]), pre)
  if pre:
    x = layer_norm(x, p["decoder_top_ln_scale"], p["decoder_top_ln_bias"])
  bias = p.get("decoder_ff_logit_out_b", np.zeros((1, len(output)))).reshape(-1)
  return x @ output.T + bias


def teacher_forced_logits(p, config, src, tgt):
  """Logits [len(tgt), V] of each target position given the ones before it."""
  return decoder_logits(p, config, encode(p, config, src), list(tgt[:-1]))


def greedy(p, config, src, max_length, eos):
  """The argmax output (Marian ids), ending with eos unless max_length cut it."""
  memory, out = encode(p, config, src), []
  while len(out) < max_length:
    out.append(int(np.argmax(decoder_logits(p, config, memory, out)[-1])))
    if out[-1] == eos:
      break
  return out
