"""CPU side of kernelseek.timing: input-set rotation, quantiles, and the steady-host context."""
import gc
import os

import pytest

from kernelseek import timing


def test_sets_needed_passes_three_l2s():
    assert timing.sets_needed(10e6) == 8            # 180 MB / 10 MB = 18, capped at 8
    assert timing.sets_needed(50e6) == 4            # ceil(180 / 50)
    assert timing.sets_needed(1e9) == 2             # never fewer than two sets


def test_quantile_interpolates():
    xs = [4.0, 1.0, 3.0, 2.0]
    assert timing._quantile(xs, 0.0) == 1.0
    assert timing._quantile(xs, 1.0) == 4.0
    assert timing._quantile(xs, 0.5) == pytest.approx(2.5)
    assert timing._quantile([7.0], 0.9) == 7.0


@pytest.mark.skipif(not hasattr(os, "sched_getaffinity"), reason="no CPU affinity on this OS")
def test_steady_host_pins_one_cpu_and_pauses_gc_then_restores():
    before = os.sched_getaffinity(0)
    assert gc.isenabled()
    with timing.steady_host():
        inside = os.sched_getaffinity(0)
        assert len(inside) == 1 and inside <= before
        assert not gc.isenabled()
    assert os.sched_getaffinity(0) == before
    assert gc.isenabled()


@pytest.mark.skipif(not hasattr(os, "sched_getaffinity"), reason="no CPU affinity on this OS")
def test_steady_host_names_a_bad_cpu(monkeypatch):
    before = os.sched_getaffinity(0)
    monkeypatch.setenv("KSEEK_TIMING_CPU", str(max(before) + 1000))
    with pytest.raises(ValueError, match="KSEEK_TIMING_CPU"):
        with timing.steady_host():
            pass
    assert os.sched_getaffinity(0) == before and gc.isenabled()


def test_batch_plan_samples_host_bound_calls_longer():
    from kernelseek.timing import batch_plan, HOST_BOUND_SAMPLING
    # est = per-call ms, enq = one call's host enqueue ms: "dev" is device-bound, "host" host-bound
    est = {"dev": 0.135, "host": 0.155}
    enq = {"dev": 0.012, "host": 0.150}
    k, nb = batch_plan(est, enq, budget_s=0.4, min_batches=5, max_batches=50, target_batch_ms=2.0)
    assert k == {"dev": 14, "host": 12}
    # 0.4 s / (0.135 ms x 14) = 211 batches, capped at 50; the host-bound call: cap 200, 4 x 215 -> 200
    assert nb["dev"] == 50
    assert nb["host"] == 50 * HOST_BOUND_SAMPLING
    # a long device-bound call: one call per batch, 0.4 s / 30 ms = 13 batches; at 200 ms, min_batches
    k, nb = batch_plan({"long": 30.0, "longer": 200.0}, {"long": 0.1, "longer": 0.1}, budget_s=0.4,
                       min_batches=5, max_batches=50, target_batch_ms=2.0)
    assert k == {"long": 1, "longer": 1} and nb == {"long": 13, "longer": 5}


def test_gate_follows_the_median_enqueue_time_not_one_slow_sample():
    # FA4 on bench26 row 20: ~0.2 ms host per call; one sample caught a 0.6 ms host stall
    samples = [0.19, 0.21, 0.20, 0.60, 0.20, 0.18, 0.22]
    med = sorted(samples)[len(samples) // 2]
    assert timing.ENQ_SAMPLES == len(samples)
    assert timing.gate_ms(med) == pytest.approx(0.40)
    assert timing.gate_ms(samples[3]) == pytest.approx(1.0)   # what the single-sample gate was
    assert timing.gate_ms(0.001) == pytest.approx(0.02)       # clamped below
    assert timing.gate_ms(7.0) == pytest.approx(1.0)          # and above
