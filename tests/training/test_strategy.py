"""training/strategy.py's is_chief: which task of a TF_CONFIG cluster writes checkpoints
and logs (TensorFlow's convention: the "chief" task, else worker 0)."""

import types

import pytest
import tensorflow as tf

from t2t_keras.training.strategy import is_chief


def _on(cluster, task_type, task_id):
  resolver = tf.distribute.cluster_resolver.SimpleClusterResolver(
      tf.train.ClusterSpec(cluster), task_type=task_type, task_id=task_id)
  return types.SimpleNamespace(cluster_resolver=resolver)


WITH_CHIEF = {"chief": ["h0:1"], "worker": ["h1:1", "h2:1"]}
WORKERS = {"worker": ["h0:1", "h1:1"]}


@pytest.mark.parametrize("cluster, task_type, task_id, chief", [
    (WITH_CHIEF, "chief", 0, True),
    (WITH_CHIEF, "worker", 0, False),  # worker 0 is not the chief when a chief task exists
    (WITH_CHIEF, "worker", 1, False),
    (WORKERS, "worker", 0, True),
    (WORKERS, "worker", 1, False),
])
def test_is_chief_of_a_cluster(cluster, task_type, task_id, chief):
  assert is_chief(_on(cluster, task_type, task_id)) is chief


def test_one_machine_is_its_own_chief():
  assert is_chief(tf.distribute.get_strategy())
  assert is_chief(types.SimpleNamespace(cluster_resolver=None))
