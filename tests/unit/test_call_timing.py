"""kernelseek.call_timing.per_call_ms on this CPU (wall clock): the callables take turns in blocks after their
warm-ups, on a steady host (the collector paused, one CPU), and each one's median is its own calls'."""
import gc
import os
import time

from kernelseek import call_timing as T


def test_callables_take_turns_in_blocks_after_their_warmups():
    order = []
    fns = [lambda: order.append("a"), lambda: order.append("b")]
    T.per_call_ms(fns, reps=8, rounds=4, warmup=2)
    assert "".join(order) == "aabb" + "aabb" * 4


def test_each_median_is_its_own_callables_and_the_host_is_steady():
    seen = []

    def slow():
        seen.append((gc.isenabled(), len(os.sched_getaffinity(0))))
        time.sleep(0.004)

    def fast():
        time.sleep(0.001)
    was, cpus = gc.isenabled(), os.sched_getaffinity(0)
    ms = T.per_call_ms([slow, fast], reps=6, rounds=3, warmup=1)
    assert 3.5 < ms[0] < 40 and 0.8 < ms[1] < ms[0]
    assert seen and all(s == (False, 1) for s in seen)          # inside: collector paused, pinned to one CPU
    assert gc.isenabled() == was and os.sched_getaffinity(0) == cpus


def test_time_ms_is_one_callable_in_one_block():
    calls = []
    assert T.time_ms(lambda: calls.append(1), reps=5, warmup=3) >= 0 and len(calls) == 8
