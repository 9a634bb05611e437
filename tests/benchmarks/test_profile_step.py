"""benchmarks/profile_step.py: summing a profiler trace by op type, as self time."""

import collections

from tensorflow.tsl.profiler.protobuf import xplane_pb2

from conftest import load_benchmark

profile_step = load_benchmark("profile_step")


def test_op_key_takes_the_op_type_of_tf_ops_and_marks_the_rest():
  assert profile_step.op_key("model/decoder/dense/MatMul:_MklMatMul") == "_MklMatMul"
  assert profile_step.op_key("ExecutorState::Process") == "~ExecutorState::Process"
  assert profile_step.op_key("ynn_fusion.2") == "~ynn_fusion.2"


def test_self_time_subtracts_direct_children_only():
  # parent [0, 100) holds a [10, 40) and b [50, 70), which holds c [55, 60);
  # d [100, 110) starts as the parent ends, so it is a sibling, not a child.
  total, calls = profile_step.self_times([
      ("b", 50, 20), ("parent", 0, 100), ("d", 100, 10), ("a", 10, 30), ("c", 55, 5)])
  assert total == collections.Counter({"parent": 50, "a": 30, "b": 15, "c": 5, "d": 10})
  assert sum(total.values()) == 110  # the busy span of the thread, counted once
  assert calls == collections.Counter({"parent": 1, "a": 1, "b": 1, "c": 1, "d": 1})


def test_self_time_adds_up_repeated_keys():
  total, calls = profile_step.self_times([("x:MatMul", 0, 4), ("x:MatMul", 10, 6)])
  assert total == collections.Counter({"x:MatMul": 10}) and calls["x:MatMul"] == 2


def _xspace():
  xspace = xplane_pb2.XSpace()
  host = xspace.planes.add(name="/host:CPU")
  for i, name in enumerate(["step:_MklMatMul", "ExecutorState::Process", "loss/Mul:Mul",
                            "multiply_add_fusion", "train_step"], start=1):
    host.event_metadata[i].id = i
    host.event_metadata[i].name = name
  tf_line = host.lines.add(name="tf_Compute/123")
  tf_line.events.add(metadata_id=2, offset_ps=0, duration_ps=1000)      # executor
  tf_line.events.add(metadata_id=1, offset_ps=100, duration_ps=600)     # matmul in it
  tf_line.events.add(metadata_id=3, offset_ps=800, duration_ps=100)     # mul in it
  eigen = host.lines.add(name="tf_numa_-1_Eigen/456")
  eigen.events.add(metadata_id=4, offset_ps=0, duration_ps=300)
  eigen.events.add(metadata_id=4, offset_ps=400, duration_ps=200)
  python = host.lines.add(name="python")
  python.events.add(metadata_id=5, offset_ps=0, duration_ps=5000)
  other = xspace.planes.add(name="/device:GPU:0")
  other.event_metadata[1].name = "gemm:MatMul"
  other.lines.add(name="tf_Compute/0").events.add(metadata_id=1, offset_ps=0, duration_ps=9)
  return xspace


def test_summarize_groups_executor_and_eigen_threads_of_the_host():
  groups = profile_step.summarize(_xspace())
  tf_total, tf_calls = groups["tf"]
  assert tf_total == collections.Counter(
      {"_MklMatMul": 600, "Mul": 100, "~ExecutorState::Process": 300})
  assert tf_calls["_MklMatMul"] == 1
  xla_total, xla_calls = groups["xla"]
  assert xla_total == collections.Counter({"~multiply_add_fusion": 500})
  assert xla_calls["~multiply_add_fusion"] == 2
  # the python thread and other planes are not counted
  assert "~train_step" not in tf_total and "MatMul" not in tf_total


def test_matmul_ms_counts_matmul_op_types_per_step():
  total = collections.Counter({"_MklMatMul": 3e9, "_MklBatchMatMulV2": 1e9, "MatMul": 2e9,
                               "Mul": 5e9, "~multiply_dot_fusion": 7e9})
  assert profile_step.matmul_ms(total, steps=2) == 3.0
