"""kernelseek.call_timing on the H200: per_call_ms's CUDA events see each callable's own GPU time when two take
turns (a 40 us and a 200 us GPU sleep), and graph_ms replays a captured call."""
import pytest

torch = pytest.importorskip("torch")
pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU (run through the device tool)")]

from kernelseek import call_timing as T  # noqa: E402
from kernelseek.serving_bench import FlushHooks  # noqa: E402


def _sleeper(us):
    rate = torch.cuda.get_device_properties(0).clock_rate      # kHz: cycles per ms
    cycles = int(rate * us / 1e3)
    return lambda: torch.cuda._sleep(cycles)


def test_two_callables_in_turns_read_their_own_gpu_times():
    short, long = T.per_call_ms([_sleeper(40), _sleeper(200)], reps=16, rounds=4)
    assert 0.03 < short < 0.15 and 0.17 < long < 0.40 and long > 2.5 * short, (short, long)


def test_graph_replay_of_a_captured_call():
    ms, why = T.graph_ms(_sleeper(100), 8, FlushHooks(torch.device("cuda")))
    assert why == "" and 0.08 < ms < 0.30, (ms, why)
