#!/usr/bin/env python3
"""Compares `ckpt profile analyze --json` with Meta's HolisticTraceAnalysis on the same GPU traces.

Not a CI test (HTA is not a dependency): run it by hand with a Python that has HTA installed,
    /work/venv2/bin/python profile/bench/hta_compare.py build/cli/ckpt fixtures/profile/hta_trace_filter
It prints, per rank, HTA's temporal breakdown (idle / compute / non-compute over the span from the
first to the last GPU kernel) and its idle-time breakdown (host_wait / kernel_wait / other per
stream) beside ours (GPU busy, NCCL, idle per ProfilerStep window), and the differences.

Why the numbers differ, and by how much they may:
  * Window. HTA measures from the first GPU event to the last one in the file; we measure inside
    each ProfilerStep#N window (CPU time), clipping GPU work that runs past the window's end (the
    GPU lags the host). Our idle share is therefore of step time; HTA's of the kernel span.
  * Streams. HTA's temporal breakdown counts GPU time when any kernel runs (all streams merged), as
    we do for "busy"; its idle-time breakdown is per stream, so a stream idle while another runs is
    idle there and not in the temporal breakdown, nor in ours.
  * Categories. HTA's non-compute time is communication + memcpy + memset; ours splits NCCL kernels
    (comm) from copies, so our NCCL share is at most HTA's non-compute share plus the overlap of
    NCCL with compute that HTA assigns to compute.
  Measured on the trace_filter traces (2 steps of a 128-rank job, ranks 0 and 1; HTA 0.5.0):
  GPU idle, HTA 53.56 % / 54.72 %, ours 55.48 % / 53.17 % (within 2 percentage points: the window
  clipping above); NCCL, ours 32.2 % / 30.6 % against HTA's non-compute 28.7 % / 22.7 % (HTA
  counts NCCL time that overlaps a compute kernel as compute; our exposed NCCL is 25.9 %).
"""
import json
import subprocess
import sys

from hta.trace_analysis import TraceAnalysis


def main():
    ckpt, trace_dir = sys.argv[1], sys.argv[2]
    ours = json.loads(subprocess.check_output([ckpt, "profile", "analyze", "--json", trace_dir]))
    hta = TraceAnalysis(trace_dir=trace_dir)
    tb = hta.get_temporal_breakdown(visualize=False)
    print("rank  HTA idle%  ours idle%   HTA compute%  HTA non-compute%  ours NCCL%")
    worst = 0.0
    for row in tb.itertuples():
        mine = next(r for r in ours["per_rank"] if r["rank"] == row.rank)
        idle = 100 * (1 - mine["gpu_busy_fraction"])
        worst = max(worst, abs(idle - row.idle_time_pctg))
        print("%4d  %8.2f  %9.2f   %12.2f  %16.2f  %10.2f" %
              (row.rank, row.idle_time_pctg, idle, row.compute_time_pctg,
               row.non_compute_time_pctg, 100 * mine["gpu_nccl_fraction"]))
    print("largest idle difference: %.2f percentage points" % worst)
    ib = hta.get_idle_time_breakdown(visualize=False)
    ib = ib[0] if isinstance(ib, tuple) else ib
    print("\nHTA idle time by stream and category (us):")
    print(ib.to_string(index=False))
    u = ours["utilisation"]
    print("\nours: GPU idle %.2f%% of step time, %.2f%% while the host waits for data, exposed "
          "NCCL %.2f%%, host in cuda*Synchronize %.2f%%" %
          (100 * u["gpu"]["idle_fraction"], 100 * u["gpu"]["idle_in_data_wait_fraction"],
           100 * u["gpu"]["exposed_comm_fraction"], 100 * u["gpu"]["host_sync_fraction"]))


if __name__ == "__main__":
    main()
