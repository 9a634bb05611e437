"""benchmarks/kill_loop.py --short: cheap writers SIGKILLed half-way through their run, run
again until they complete, their outputs equal to an uninterrupted run's; the loop's
verdicts can fail, and a second call resumes from its results file."""

import json
import os
import shutil

import pytest

from conftest import load_benchmark

kill_loop = load_benchmark("kill_loop")
kill_writers = kill_loop.kill_writers

# Real binaries, each started three times (reference, killed, rerun): the full suite only.
pytestmark = pytest.mark.heavy

WRITERS = ("avg-all", "exporter-savedmodel")


def test_short_loop_recovers_every_kill_without_mismatch_or_leftover(tmp_path):
  settings = kill_loop.parse_args([f"--work_dir={tmp_path}", "--short",
                                   f"--writers={','.join(WRITERS)}"])
  lines = []
  table = kill_loop.run_loop(settings, isolate=False, log=lines.append)
  log = "\n".join(lines)
  for writer in WRITERS:
    counts = table[writer]
    assert counts["cycles"] == counts["kills"] == 1, log
    assert counts["recovered"] == 1, log
    assert counts["mismatches"] == counts["refused"] == counts["tripped"] == 0, log
    assert counts["stale_after_rerun"] == counts["orphans"] == 0, log
  with open(tmp_path / "results.jsonl", encoding="utf-8") as f:
    records = [json.loads(line) for line in f]
  assert [r["writer"] for r in records] == list(WRITERS)
  assert all(len(r["kill_times"]) == 1 and r["kill_times"][0] > 0 for r in records)
  assert f"{WRITERS[0]} #0: killed at {records[0]['kill_times'][0]:.2f} s" in log

  # Run again: every cycle is read back from results.jsonl, nothing runs.
  again = []
  assert kill_loop.run_loop(settings, isolate=False, log=again.append) == table
  assert len(again) == 1  # the totals table only

  # The verdicts can fail: a changed average and a temporary directory are found.
  ref = os.path.join(tmp_path, "avg-all", "reference", "out", "avg")
  copy = os.path.join(tmp_path, "changed")
  shutil.copytree(ref, copy)
  with open(os.path.join(copy, "run.json"), "a", encoding="utf-8") as f:
    f.write(" ")
  os.makedirs(os.path.join(copy, ".tmp-9-host-1-abc"))
  found = kill_writers.verdict("avg-all", ref, copy)
  assert found["mismatches"] == [f"{copy}/run.json: bytes differ from the reference's"]
  assert kill_loop.leftovers(copy) == [".tmp-9-host-1-abc"]
