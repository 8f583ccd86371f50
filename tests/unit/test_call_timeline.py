"""tools/call_timeline.py's summary of one call's events (the GPU part runs on the H200 only): kernels on two
streams that overlap count once in the GPU's busy time, the idle time is the span less that, and the host's
last launch is the end of the last launch call."""
from types import SimpleNamespace as NS


def _ev(name, start, end, gpu):
    return NS(name=name, time_range=NS(start=start, end=end), device_type="DeviceType.CUDA" if gpu else "DeviceType.CPU")


def test_overlapping_kernels_count_once_and_idle_is_the_rest(load_tool):
    t = load_tool("call_timeline")
    evs = [_ev("cudaLaunchKernel", 110.0, 112.0, False), _ev("long_seqs", 115.0, 118.0, True),
           _ev("cudaLaunchKernel", 120.0, 123.0, False), _ev("prefill", 125.0, 225.0, True),
           _ev("cudaLaunchKernelExC", 130.0, 131.5, False), _ev("decode", 132.0, 200.0, True),   # beside the prefill
           _ev("combine", 230.0, 235.0, True)]
    s = t.summary(100.0, 260.0, evs)
    assert s["first_kernel_us"] == 15.0 and s["last_kernel_end_us"] == 135.0
    assert s["gpu_busy_us"] == 3.0 + 100.0 + 5.0                 # the decode hides inside the prefill
    assert s["gpu_idle_inside_us"] == (235.0 - 115.0) - 108.0      # 7 + 5 us between the kernels
    assert s["last_launch_us"] == 31.5 and s["launches"] == 3 and s["kernels"] == 4


def test_a_call_without_kernels_reports_host_time_only(load_tool):
    s = load_tool("call_timeline").summary(0.0, 42.0, [_ev("cudaEventRecord", 1.0, 2.0, False)])
    assert s == {"host_us": 42.0, "kernels": 0}
