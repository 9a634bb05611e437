"""The model sizes the side-by-side benchmarks measure, each with its fixed batch.

Pure Python (no TensorFlow), shared by step_bench.py (ours), model_garden_sized.py (the
peer), peer_compare.py and multi_device_check.py:

  size   hparams set (+ overrides)                   vocab   batch x length  peer script
  tiny   transformer_tiny                            1000     16 x 16       model_garden_sized
  small  transformer_multi30k, every dropout 0.1     8000    128 x 32       ../shared/bench's
                                                                            model_garden_peer
  base   transformer_base (the paper's: post-norm,   37000    64 x 64       model_garden_sized
         P_drop 0.1, no attention/ReLU dropout)
  big    transformer_big (d 1024, d_ff 4096, h 16,   37000    64 x 64       model_garden_sized
         P_drop 0.3)

`small` is the shape every earlier figure used (Multi30k's real 8k vocabulary); `base` and
`big` are the paper's models with its 37k shared vocabulary (section 5.1) on 4,096-token
batches (t2t's *_single_gpu sets; 64 tokens a side, about twice a WMT sentence, so
attention runs at a real length); `tiny` only checks that the scripts run. Ids are random
and there is no padding, so every step has batch x length target tokens. Decoding is the
same at every size: beam 4, alpha 0.6, 32 sources of 30 ids, exactly 40 output tokens.

The peer is built from the same hparams (`peer_flags`), so both sides always run one model.
"""

import dataclasses


@dataclasses.dataclass(frozen=True)
class Size:
  name: str
  hparams_set: str
  overrides: str
  vocab_size: int
  batch: int  # sentences a step
  length: int  # tokens a side, no padding
  problem: str  # whose data dir builds our Trainer (its batches are replaced)

  def sentences(self, batch=None):
    """Sentences a step: `batch`, or the size's when None."""
    return batch or self.batch

  def tokens(self, batch=None):
    """Target tokens of one step of `batch` (default the size's) sentences."""
    return self.sentences(batch) * self.length


DROPOUT_01 = "layer_prepostprocess_dropout=0.1,attention_dropout=0.1,relu_dropout=0.1"
SIZES = {
    "tiny": Size("tiny", "transformer_tiny", "", 1000, 16, 16, "translate_ende_numbers"),
    "small": Size("small", "transformer_multi30k", DROPOUT_01, 8000, 128, 32,
                  "translate_ende_multi30k"),
    "base": Size("base", "transformer_base", "", 37000, 64, 64, "translate_ende_numbers"),
    "big": Size("big", "transformer_big", "", 37000, 64, 64, "translate_ende_numbers"),
}
DECODE_BATCH, DECODE_SRC_LENGTH, DECODE_LENGTH = 32, 30, 40


def get(name):
  """The Size called `name`; an unknown name lists the known ones."""
  if name not in SIZES:
    raise ValueError(f"unknown size {name!r}; known: {', '.join(SIZES)}")
  return SIZES[name]


def hparams(size, extra=""):
  """The size's frozen HParams (its set, its overrides, then `extra`)."""
  from t2t_keras import registry  # pylint: disable=import-outside-toplevel
  hp = registry.hparams(size.hparams_set).override(size.overrides)
  return hp.override(extra) if extra else hp


def step_flops(hp, size, batch=None):
  """Model FLOPs of one training step of `hp` on the size's [batch, length] batch
  (benchmarks/flops.py: matmuls, backward = 2 x forward)."""
  from flops import train_step_flops  # pylint: disable=import-outside-toplevel
  return train_step_flops(hp, size.vocab_size,
                          [(size.sentences(batch), size.length, size.length)])


def peer_flags(hp, size, batch=None):
  """model_garden_sized.py's flags for the model `hp` at `size`: the same layers, widths,
  norm placement, dropouts and batch (Model Garden has no separate source/target
  layer counts, so both must be equal; its attention and FFN have no biases, as ours)."""
  if hp.num_encoder_layers != hp.num_decoder_layers:
    raise ValueError("the peer has one layer count for both stacks; got "
                     f"{hp.num_encoder_layers}+{hp.num_decoder_layers}")
  return [f"--vocab={size.vocab_size}", f"--layers={hp.num_encoder_layers}",
          f"--d_model={hp.hidden_size}", f"--heads={hp.num_heads}",
          f"--d_ff={hp.filter_size}", f"--norm_first={int(hp.norm_type == 'pre')}",
          f"--dropout={hp.layer_prepostprocess_dropout:g}",
          f"--attention_dropout={hp.attention_dropout:g}",
          f"--relu_dropout={hp.relu_dropout:g}", f"--batch={size.sentences(batch)}",
          f"--length={size.length}", f"--label_smoothing={hp.label_smoothing:g}"]
