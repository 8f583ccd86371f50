"""The one launch path (kernelseek.abi.Launch) on the GPU: the current stream, the workspace on the
device, the `original:` baseline through it, and the result checked against the reference."""
import pytest

torch = pytest.importorskip("torch")
pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU (run through the device tool)")]

from kernelseek import abi, baselines, build  # noqa: E402
from kernelseek.check import check_output  # noqa: E402
from kernelseek.inputs import alloc_outputs, make_inputs  # noqa: E402
from kernelseek.paths import KERNELS  # noqa: E402
from kernelseek.reference import attention_ref  # noqa: E402
from kernelseek.scenarios import Scenario  # noqa: E402

NAIVE = KERNELS / "naive_fwd.cu"
S = Scenario(name="abi_gpu", batch=2, seqlen_q=70, seqlen_k=133, heads_q=4, heads_kv=2, head_dim=64, causal=True)


@pytest.fixture(scope="module")
def naive():
    res = build.build(NAIVE)
    assert res.ok, res.log[-2000:]
    return abi.load(res.so_path)


def _check(s, inp, o, lse):
    c = check_output(s, o, lse, attention_ref(s, inp, "fp32"), attention_ref(s, inp, "lowp"))
    assert c.passed, c.reason


def test_launch_runs_on_the_current_stream_with_a_device_workspace(naive):
    inp = make_inputs(S, seed=5, device="cuda", gen_device="cuda")
    o, lse = alloc_outputs(S, inp)
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        call = abi.Launch(naive, S, inp, o, lse)
        assert call.stream == side.cuda_stream != torch.cuda.default_stream().cuda_stream
        call()
    side.synchronize()
    assert call.workspace.is_cuda and call.workspace.numel() >= abi.MIN_WORKSPACE_BYTES
    _check(S, inp, o, lse)
    o.zero_()
    call()                                          # a second launch of the same prepared call
    torch.cuda.synchronize()
    _check(S, inp, o, lse)


def test_the_original_baseline_launches_through_abi(naive):
    b = baselines.get(str(NAIVE))
    assert b.supports(S)[0]
    inp = make_inputs(S, seed=6, device="cuda", gen_device="cuda")
    bound = b.bind(S, inp)
    assert isinstance(bound.call, abi.Launch)
    o, lse = bound.result(bound.call())
    torch.cuda.synchronize()
    _check(S, inp, o, lse)
