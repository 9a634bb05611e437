"""benchmarks/profile_step.py: a profiler trace summed by op type (self time), and per device:
busy and idle time within and between the marked steps, kernels, XLA programs, copies."""

import collections
import gzip
import os

import pytest

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


MS = 10 ** 9  # picoseconds


def _add_events(plane, line, events):
  """(name, start_ms, end_ms) on the shared clock, offsets from the line's timestamp."""
  for name, start, end in events:
    ids = {m.name: i for i, m in plane.event_metadata.items()}
    if name not in ids:
      ids[name] = len(plane.event_metadata) + 1
      plane.event_metadata[ids[name]].id = ids[name]
      plane.event_metadata[ids[name]].name = name
    line.events.add(metadata_id=ids[name], offset_ps=start * MS - line.timestamp_ns * 1000,
                    duration_ps=(end - start) * MS)


def _gpu_xspace(markers=True):
  """Two marked steps, [0, 10) and [15, 25) ms, on the host; on the GPU, two streams (the
  first with a timestamp of 1 ms), the XLA modules line and a copy; one kernel between
  the steps."""
  xspace = xplane_pb2.XSpace()
  host = xspace.planes.add(name="/host:CPU")
  if markers:
    _add_events(host, host.lines.add(name="python"),
                [("train#step_num=0,_r=1#", 0, 10), ("train#step_num=1,_r=1#", 15, 25)])
  gpu = xspace.planes.add(name="/device:GPU:0")
  _add_events(gpu, gpu.lines.add(name="Stream #1(Compute)", timestamp_ns=10 ** 6), [
      ("fusion_1", 1, 4), ("MemcpyH2D", 8, 9), ("fusion_2", 11, 12), ("fusion_1", 16, 20)])
  _add_events(gpu, gpu.lines.add(name="Stream #2(Compute)"), [("gemm", 3, 6), ("gemm", 18, 21)])
  _add_events(gpu, gpu.lines.add(name="XLA Modules"),
              [("cluster_train_step", 1, 9), ("cluster_train_step", 16, 21)])
  return xspace


def test_device_summary_per_step_by_hand():
  """Busy: [1, 6) and [8, 9) in step 1, [16, 21) in step 2 (the streams' union): 5.5 ms a
  step, so 4.5 idle within a step; the gap [10, 15) holds fusion_2's 1 ms: 4 idle; the
  kernels of the steps (fusion_2 is between them) and the copy, per step."""
  d, = profile_step.device_summary(_gpu_xspace())
  assert (d["device"], d["steps"], d["marked"]) == ("/device:GPU:0", 2, True)
  assert (d["busy_ms"], d["idle_in_step_ms"], d["idle_between_steps_ms"]) == (5.5, 4.5, 4.0)
  assert d["kernels"] == 2.0
  assert d["top"] == [("fusion_1", 3.5, 1.0), ("gemm", 3.0, 1.0)]
  assert (d["xla_programs"], d["xla_top"]) == (1.0, [("cluster_train_step", 1.0)])
  assert (d["h2d_copies"], d["h2d_ms"]) == (0.5, 0.5)
  assert profile_step.device_summary(_xspace()) == []  # no "Stream #" lines: no device
  saved = _gpu_xspace()
  del saved.planes[1].lines[2]  # a trace as saved may lack the derived "XLA Modules" line
  d, = profile_step.device_summary(saved)
  assert (d["xla_programs"], d["xla_top"], d["busy_ms"]) == (None, [], 5.5)


def test_device_summary_without_markers_takes_the_steps_given_over_the_span():
  xspace = _gpu_xspace(markers=False)
  with pytest.raises(ValueError, match="no 'train' step markers; give the number of steps"):
    profile_step.device_summary(xspace)
  d, = profile_step.device_summary(xspace, steps=2)
  # the span [1, 21): busy [1, 6) + [8, 9) + [11, 12) + [16, 21) = 12 ms, idle 8
  assert (d["marked"], d["busy_ms"], d["idle_in_step_ms"]) == (False, 6.0, 4.0)
  assert d["idle_between_steps_ms"] is None and d["kernels"] == 2.5


def test_covered_counts_overlaps_once_and_clips_to_the_window():
  assert profile_step.covered([(0, 4), (2, 6), (8, 9)]) == 7
  assert profile_step.covered([(0, 4), (2, 6), (8, 9)], (3, 8)) == 3
  assert profile_step.covered([(5, 5), (9, 12)], (0, 10)) == 1


TRACE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data",
                     "tiny_cpu_step.xplane.pb.gz")


def test_a_saved_cpu_trace_reads_back_its_steps_and_ops(tmp_path, capsys):
  """A trace `profile_step.py --size tiny --steps 2 --warmup 1 --keep_trace DIR` wrote on a
  CPU (committed, cut to the host plane's executor, Eigen and marker lines without their
  stats, which name the machine's files): its two step markers, the steps' matmuls on the
  executor's thread, the host figures per marked step, and no device plane."""
  path = tmp_path / "tiny.xplane.pb"
  path.write_bytes(gzip.decompress(open(TRACE, "rb").read()))
  xspace = profile_step.load_xspace(str(path))
  windows = profile_step.step_windows(xspace)
  assert len(windows) == 2 and windows[0][1] <= windows[1][0]
  groups = profile_step.report(xspace, None, 5, "HEAD")
  tf_total, tf_calls = groups["tf"]
  assert profile_step.matmul_ms(tf_total, steps=2) > 0
  assert profile_step.device_summary(xspace) == []
  out = capsys.readouterr().out
  assert out.startswith("HEAD\nTF ops on the executor's thread: ")
  assert "devices: no plane with kernels in this trace (a CPU run, or no CUPTI)" in out
