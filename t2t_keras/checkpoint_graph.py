"""A TF2 checkpoint's object graph: which of a model's variables each checkpoint key holds.

    graph = object_graph(tf.train.load_checkpoint("runs/a/ckpt-1000"))
    matched_variables(graph, "model", model, model.variables)  # [(path, variable, key)]
    model_keys(graph)                                          # {key: path} under "model"

Variables are matched as TensorFlow's checkpoint restore matches them: by the names on
the path from the checkpoint's root (model/encoder_layer_0/...). Warm starts
(`training/warm_start.py`) and every restore of a run for decoding (`runs.restore_model`)
read a checkpoint's layout here.
"""

import collections

import tensorflow as tf
from tensorflow.core.protobuf import trackable_object_graph_pb2

OBJECT_GRAPH = "_CHECKPOINTABLE_OBJECT_GRAPH"


def object_graph(reader):
  """The TrackableObjectGraph of a `tf.train.load_checkpoint` reader."""
  graph = trackable_object_graph_pb2.TrackableObjectGraph()
  graph.ParseFromString(reader.get_tensor(OBJECT_GRAPH))
  return graph


def child(graph, node_id, name):
  """The node id of `name` under node `node_id` in the checkpoint's graph, or None."""
  if node_id is None:
    return None
  return next((c.node_id for c in graph.nodes[node_id].children if c.local_name == name), None)


def variable_key(graph, node_id):
  if node_id is None:
    return None
  return next((a.checkpoint_key for a in graph.nodes[node_id].attributes
               if a.name == "VARIABLE_VALUE"), None)


def matched_variables(graph, root_name, obj, variables):
  """[(path, variable, checkpoint key or None)] for each of `variables` reachable from `obj`,
  matched by name through the checkpoint's object graph from its root's child `root_name`.

  Breadth first, the first path to a variable wins (as in TensorFlow's own saver).
  """
  wanted = {id(v): v for v in variables}
  found, seen = [], set()
  queue = collections.deque([(obj, child(graph, 0, root_name), root_name)])
  while queue:
    node, node_id, path = queue.popleft()
    for name, value in tf.train.TrackableView.children(node).items():
      if id(value) in seen:
        continue
      seen.add(id(value))
      child_id = child(graph, node_id, name)
      if id(value) in wanted:
        found.append((f"{path}/{name}", value, variable_key(graph, child_id)))
      else:
        queue.append((value, child_id, f"{path}/{name}"))
  return found


def model_keys(graph):
  """{checkpoint key: path from "model"} of every variable under the root's "model" child."""
  keys, seen = {}, set()
  queue = collections.deque([(child(graph, 0, "model"), "model")])
  while queue:
    node_id, path = queue.popleft()
    if node_id is None or node_id in seen:
      continue
    seen.add(node_id)
    key = variable_key(graph, node_id)
    if key:
      keys.setdefault(key, path)
    queue.extend((c.node_id, f"{path}/{c.local_name}") for c in graph.nodes[node_id].children)
  return keys
