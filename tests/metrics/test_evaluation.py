"""Dev metrics (what checkpoint selection and the Table 3 sweep rank by) against a reference.

The reference scores every dev pair alone, in float64 NumPy from the model's logits:
-sum log softmax at the target ids, argmax hits and non-pad tokens. The Evaluator batches
the split (padding, buckets), distributes it over replicas and sums in float32, so its
figures must equal the reference's to float32 rounding over a few thousand tokens.
"""

import math

import numpy as np
import pytest
import tensorflow as tf

from t2t_keras import registry
from t2t_keras.models.transformer import Transformer
from t2t_keras.problems import numbers
from t2t_keras.training.evaluation import Evaluator

HP = registry.hparams("transformer_tiny").replace(
    hidden_size=32, filter_size=64, num_heads=2, num_encoder_layers=1, num_decoder_layers=1,
    batch_size=256)


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
  data_dir = str(tmp_path_factory.mktemp("numbers"))
  problem = numbers.TranslateEndeNumbers(num_train=200, num_dev=45, num_test=5)
  problem.generate_data(data_dir)
  vocab = problem.get_vocabulary(data_dir)
  tf.keras.utils.set_random_seed(4)
  model = Transformer(vocab.vocab_size, HP)
  model.build_for_ids()
  return problem, data_dir, vocab, model


def _reference(problem, data_dir, model, pairs=None):
  """(cross-entropy sum, correct tokens, tokens) of each dev pair scored alone, float64."""
  xent = correct = tokens = 0.0
  examples = list(problem.dataset(data_dir, "dev").as_numpy_iterator())
  for ex in examples[:pairs]:
    features = {k: tf.constant(ex[k][None].astype(np.int32)) for k in ("inputs", "targets")}
    logits = model(features, training=False).numpy()[0].astype(np.float64)  # [T, V]
    log_probs = logits - logits.max(-1, keepdims=True)
    log_probs -= np.log(np.exp(log_probs).sum(-1, keepdims=True))
    targets = ex["targets"]
    xent -= log_probs[np.arange(len(targets)), targets].sum()
    correct += float((logits.argmax(-1) == targets).sum())
    tokens += len(targets)
  return xent, correct, tokens, len(examples)


def _check_against_reference(setup, strategy, hparams=HP):
  problem, data_dir, vocab, model = setup
  xent, correct, tokens, _ = _reference(problem, data_dir, model)
  with strategy.scope():
    metrics = Evaluator(problem, data_dir, hparams, strategy, model, vocab, eval_steps=10**6,
                        bleu_sentences=0).evaluate()
  assert metrics["dev_tokens"] == tokens
  assert metrics["dev_loss"] == pytest.approx(xent / tokens, rel=1e-5)
  assert metrics["dev_perplexity"] == pytest.approx(math.exp(xent / tokens), rel=1e-5)
  assert metrics["dev_accuracy"] == pytest.approx(correct / tokens, abs=0.5 / tokens)


@pytest.mark.heavy
def test_dev_metrics_equal_the_pair_by_pair_float64_reference(setup):
  _check_against_reference(setup, tf.distribute.get_strategy())


@pytest.mark.heavy
def test_dev_metrics_on_two_replicas_equal_the_reference(setup, two_cpu_strategy):
  """Every dev pair counts on two replicas fed by one pipeline: each cell's last batches
  are padded to full rows and a replica without a batch gets an all-padding one (before,
  they were dropped: 0 tokens on this 45-pair split)."""
  _check_against_reference(setup, two_cpu_strategy)


@pytest.mark.heavy
@pytest.mark.parametrize("replicas", [1, 2])
def test_packed_dev_metrics_equal_the_reference(setup, two_cpu_strategy, replicas):
  strategy = two_cpu_strategy if replicas == 2 else tf.distribute.get_strategy()
  _check_against_reference(setup, strategy, HP.replace(packed_length=128))


@pytest.mark.heavy
def test_eval_steps_counts_only_the_first_batches(setup):
  problem, data_dir, vocab, model = setup
  evaluator = Evaluator(problem, data_dir, HP, tf.distribute.get_strategy(), model, vocab,
                        eval_steps=1, bleu_sentences=0)
  one = evaluator.evaluate()
  everything = evaluator.evaluate(steps=10**6)
  _, _, tokens, _ = _reference(problem, data_dir, model)
  assert everything["dev_tokens"] == tokens
  assert 0 < one["dev_tokens"] < tokens  # one batch of a split that needs several
