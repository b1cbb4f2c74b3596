"""Training steps: the traced phases, the step's tensor roles, and closed-form costs."""

from __future__ import annotations

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from torchroofline.errors import InputError
from torchroofline.trace.tracer import trace_model
from torchroofline.trace.training import PHASES, Step


def _mlp() -> nn.Module:
    return nn.Sequential(nn.Linear(8, 16), nn.LayerNorm(16), nn.GELU(), nn.Linear(16, 4))


def _step_trace(model: nn.Module, *inputs: torch.Tensor, **step_options):
    return trace_model(model, inputs, device="cpu", step=Step(**step_options))


def _kernels(trace, phase: str) -> list[str]:
    return [op.base for op in trace.ops if op.phase == phase and not op.is_view]


def test_phases_run_in_order_and_backward_ops_carry_their_module():
    trace = _step_trace(_mlp(), torch.randn(2, 8))
    phases = [op.phase for op in trace.ops]
    assert phases == sorted(phases, key=PHASES.index)
    backward = [(op.base, op.module_path) for op in trace.ops
                if op.phase == "backward" and not op.is_view]
    # the first linear's input needs no gradient: one mm (weight) + one sum (bias) there
    assert backward == [
        ("mm", "3"), ("mm", "3"), ("sum", "3"), ("gelu_backward", "2"),
        ("native_layer_norm_backward", "1"), ("mm", "0"), ("sum", "0"),
    ]


def test_adamw_step_is_foreach_and_its_step_counters_stay_on_the_host():
    trace = _step_trace(_mlp(), torch.randn(2, 8))
    optimizer = _kernels(trace, "optimizer")
    assert optimizer and all(name.startswith("_foreach_") for name in optimizer)
    step = trace.step
    # 6 parameters (2 linear weights + biases, layer norm weight + bias), each with a gradient
    # and AdamW's exp_avg and exp_avg_sq on the device; the CPU step counters are no state here
    assert (len(step.parameters), len(step.gradients), len(step.optimizer_states)) == (6, 6, 12)
    assert len(step.losses) == 1


def test_fused_adamw_is_one_kernel_with_device_step_counters():
    trace = _step_trace(_mlp(), torch.randn(2, 8), optimizer_options={"fused": True})
    assert _kernels(trace, "optimizer") == ["_foreach_add", "_fused_adamw"]
    assert len(trace.step.optimizer_states) == 18  # exp_avg, exp_avg_sq, step per parameter


def test_kept_values_are_updated_parameters_states_and_loss():
    trace = _step_trace(_mlp(), torch.randn(2, 8), optimizer="sgd")
    step = trace.step
    written = {ref.value_id for op in trace.ops for ref in op.writes}
    parameters = {ref.storage_id for ref in step.parameters}
    updated = {ref.value_id for op in trace.ops if op.phase == "optimizer" for ref in op.writes
               if ref.storage_id in parameters}
    assert len(updated) == 6 and updated <= trace.output_value_ids <= written
    assert {ref.value_id for ref in step.losses} <= trace.output_value_ids
    # gradients are consumed by the step, not kept
    assert not {ref.value_id for ref in step.gradients} & trace.output_value_ids


def test_without_an_optimizer_the_gradients_are_kept():
    trace = _step_trace(_mlp(), torch.randn(2, 8), optimizer="none")
    assert not _kernels(trace, "optimizer")
    assert {ref.value_id for ref in trace.step.gradients} <= trace.output_value_ids


def test_gradients_are_stolen_not_copied():
    # autograd's accumulator copies a gradient something else still holds; a GPU run steals it
    trace = _step_trace(_mlp(), torch.randn(2, 8))
    assert not {"copy", "new_empty_strided", "clone"} & set(_kernels(trace, "backward"))


def test_attention_backward_is_one_flash_kernel():
    class Attention(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.qkv = nn.Linear(32, 96)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            q, k, v = self.qkv(x).view(2, 16, 3, 4, 8).permute(2, 0, 3, 1, 4)
            return F.scaled_dot_product_attention(q, k, v, is_causal=True)

    trace = _step_trace(Attention(), torch.randn(2, 16, 32), optimizer="none")
    backward = _kernels(trace, "backward")
    assert backward.count("_scaled_dot_product_flash_attention_backward") == 1
    assert "bmm" not in backward and "_softmax_backward_data" not in backward
    assert len(trace.step.gradients) == 2  # qkv weight and bias reached through attention


def test_a_loss_function_is_part_of_the_forward():
    trace = _step_trace(_mlp(), torch.randn(2, 8), loss=lambda out: out.square().mean())
    assert "mean" in _kernels(trace, "forward")
    assert trace.step.losses[0].shape == ()


@pytest.mark.parametrize("options", [{"mode": "eval"}, {"optimizer": "lion"}, {"loss": 3}])
def test_mistyped_training_options_fail_in_one_line(options):
    import torchroofline

    kwargs = {"mode": "train", **options}
    with pytest.raises(InputError, match="unknown|loss must be"):
        torchroofline.analyze(_mlp(), torch.randn(2, 8), **kwargs)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"loss": lambda out: out.sum()}, "loss: training-step option"),
        ({"optimizer_options": {"lr": 1.0}}, "optimizer_options: training-step option"),
        ({"checkpoint": ["0"]}, "checkpoint: training-step option"),
        ({"mode": "train", "data": "given"}, "data='given' is for inference"),
    ],
)
def test_training_options_out_of_place_fail_before_tracing(options, message):
    # an inference analysis ignored these silently (checkpoint failed only after pricing)
    import torchroofline

    with pytest.raises(InputError, match=message):
        torchroofline.analyze(_mlp(), torch.randn(2, 8), **options)


# --- Closed forms ---------------------------------------------------------------------------


def _train(model: nn.Module, *inputs: torch.Tensor, **options):
    import torchroofline

    return torchroofline.analyze(model, inputs, mode="train", **options)


def _phase(result, name: str):
    return next(figures for figures in result.phases if figures.phase == name)


def test_a_linear_layers_backward_is_twice_its_forward_matmul():
    # Linear(32 → 16) on 8 rows whose input needs a gradient (the first layer makes it):
    # forward 2·8·32·16 FLOPs; backward dX = dY·W and dW = dYᵀ·X, the same each
    result = _train(nn.Sequential(nn.Linear(64, 32, bias=False), nn.Linear(32, 16, bias=False)),
                    torch.randn(8, 64), optimizer="none")
    forward = 2 * 8 * 32 * 16

    def tensor_flops(phase: str) -> int:
        return sum(op.flops.tensor for op in result.ops
                   if op.module_path == "1" and result.trace.ops[op.index].phase == phase)

    assert tensor_flops("forward") == forward
    assert tensor_flops("backward") == 2 * forward


@pytest.mark.parametrize(("optimizer", "accesses", "eager_accesses"), [
    # AdamW: param, grad, exp_avg, exp_avg_sq read; param, exp_avg, exp_avg_sq written. Its
    # foreach passes: p *= 1 − lr·wd (2), m.lerp_(g) (3), v *= β2 (2), v.addcmul_(g, g) (3:
    # g read once), t = √v (2), t /= √bc2 (2), t += ε (2), p.addcdiv_(m, t) (4): 20
    ("adamw", 7, 20),
    # SGD without momentum: param and grad read, param written, in one pass
    ("sgd", 3, 3),
])
def test_the_optimizer_step_moves_each_fp32_state_once(optimizer, accesses, eager_accesses):
    model = nn.Sequential(nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 16))
    parameters = sum(p.numel() for p in model.parameters())
    result = _train(model, torch.randn(8, 64), optimizer=optimizer)
    assert _phase(result, "optimizer").boundary_bytes == accesses * 4 * parameters
    assert _phase(result, "optimizer").eager_bytes == eager_accesses * 4 * parameters


def test_phase_figures_reach_the_json_and_the_report():
    result = _train(_mlp(), torch.randn(2, 8))
    phases = result.to_dict()["phases"]
    assert list(phases) == list(PHASES)
    assert sum(p["flops"] for p in phases.values()) == result.flops
    assert "Training step (adamw optimizer)" in result.format()


def test_no_fused_kernel_crosses_a_phase_but_backward_recomputes_cheap_pointwise_values():
    from torchroofline.plan.step_graphs import recomputed_in_backward

    class SwishLinear(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.up, self.down = nn.Linear(8, 16), nn.Linear(16, 4)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            h = self.up(x)
            return self.down(h * torch.sigmoid(h))

    result = _train(SwishLinear(), torch.randn(4, 8))
    # sigmoid(h) is read in backward only by generated kernels (mul's and sigmoid's
    # gradients) and h is saved anyway: min-cut recomputes it. h·sigmoid(h) feeds the down
    # projection's weight gradient (a library matmul): saved.
    recomputed = recomputed_in_backward(result.trace, result.ops)
    assert [op.name for op in recomputed] == ["aten.sigmoid.default"]
    phases = [op.phase for op in result.trace.ops]
    for kernel in result.plans.fused.kernels:
        kernel_phases = [phases[op.index] for op in kernel.ops if op not in recomputed]
        assert len(set(kernel_phases)) == 1


def test_checkpointing_blocks_recomputes_their_forward_and_frees_their_saved_activations():
    # blocks 0 and 1: Linear(16→16) + Tanh on 4 rows, then a Linear(16→4) head
    model = nn.Sequential(*(nn.Sequential(nn.Linear(16, 16), nn.Tanh()) for _ in range(2)),
                          nn.Linear(16, 4))
    result = _train(model, torch.randn(4, 16), checkpoint=["0", "1"])
    what_if = result.checkpoint_what_if
    tanh_flops = next(op.total_flops for op in result.ops if "tanh" in op.name)
    assert what_if.modules == 2
    assert what_if.recompute_flops == 2 * (2 * 4 * 16 * 16 + tanh_flops)
    # block 0's tanh output is block 1's input (kept); block 1's tanh output, which
    # tanh_backward and the head's weight gradient read, is freed: 4·16 fp32
    assert what_if.saved_activation_bytes == 4 * 16 * 4
    assert result.to_dict()["checkpoint"]["modules"] == 2
    assert result.on("a100-80gb").checkpoint_what_if.saved_activation_bytes == 4 * 16 * 4


def test_a_checkpoint_pattern_that_matches_nothing_is_one_line():
    with pytest.raises(InputError, match="no module matches"):
        _train(_mlp(), torch.randn(2, 8), checkpoint=["blocks.*"])


def test_bf16_autocast_runs_the_matmuls_in_bf16_and_keeps_fp32_state():
    result = _train(_mlp(), torch.randn(2, 8), autocast="bf16")
    matmuls = [op for op in result.trace.ops if op.base in ("addmm", "mm")]
    assert matmuls and all(op.writes[0].dtype == "bfloat16" for op in matmuls)
    assert {ref.dtype for ref in result.trace.step.optimizer_states} == {"float32"}


PROBLEM = """
import torch, torch.nn as nn

class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(32, 16)

    def forward(self, x):
        return torch.relu(self.linear(x))

def get_inputs():
    return [torch.randn(8, 32)]

def get_init_inputs():
    return []
"""


def test_cli_train_reports_the_phases_of_a_problem_file(tmp_path, capsys):
    import json

    from torchroofline.cli import main

    problem = tmp_path / "1_Linear.py"
    problem.write_text(PROBLEM)
    assert main(["analyze", str(problem), "--train", "--optimizer", "sgd", "--json"]) == 0
    document = json.loads(capsys.readouterr().out)
    document = document[0] if isinstance(document, list) else document
    # SGD: the weight and bias (32·16 + 16 fp32) read with their gradients and written
    assert document["phases"]["optimizer"]["boundary_bytes"] == 3 * 4 * (32 * 16 + 16)


def test_a_multi_tensor_op_needs_only_the_inputs_of_the_tensors_kept():
    import torchroofline

    class FirstOfTwo(nn.Module):
        def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
            return torch._foreach_mul([x, y], 2.0)[0]

    x, y = torch.randn(64, 32), torch.randn(128, 32)
    result = torchroofline.analyze(FirstOfTwo(), (x, y), data="any")
    # x read and 2x written (64·32 fp32 each); y and its double are not needed
    assert result.compulsory_bytes == 2 * 64 * 32 * 4
    assert result.flops == 64 * 32


def test_a_cudnn_rnn_trains_as_one_backward_call_with_twice_the_gemm_flops():
    class LastOutput(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.lstm = nn.LSTM(16, 32, num_layers=2, batch_first=True)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.lstm(x)[0]

    result = _train(LastOutput(), torch.randn(4, 10, 16), optimizer="none")
    forward, = (op for op in result.ops if op.name == "aten.lstm.input")
    backward = [op for op in result.ops if result.trace.ops[op.index].phase == "backward"
                and op.category.value != "zero-copy"]
    assert [op.name for op in backward] == ["aten._cudnn_rnn_backward"]
    # data and weight gradients: each as many GEMM FLOPs as the forward
    assert backward[0].flops.tensor == 2 * forward.flops.tensor
    assert len(result.trace.step.gradients) == 8  # w_ih, w_hh, b_ih, b_hh per layer


def test_a_parameter_free_operator_trains_its_inputs():
    # KernelBench's level-1 operators have no parameters: the step is the operator's backward.
    # C = A·B (32×48 by 48×16): dA = dC·Bᵀ and dB = Aᵀ·dC, each 2·32·48·16 FLOPs
    class MatMul(nn.Module):
        def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
            return a @ b

    result = _train(MatMul(), torch.randn(32, 48), torch.randn(48, 16))
    assert _phase(result, "backward").flops == 2 * (2 * 32 * 48 * 16)
    assert _phase(result, "optimizer").flops == 0
    # A, B and dC read; dA and dB written, kept
    assert _phase(result, "backward").boundary_bytes == 4 * (2 * (32 * 48 + 48 * 16) + 32 * 16)
    assert len(result.trace.step.gradients) == 2


def test_a_loss_that_trains_nothing_is_one_line():
    from torchroofline.errors import ModelError

    with pytest.raises(ModelError, match="^the loss does not depend"):
        _train(_mlp(), torch.randn(2, 8), loss=lambda out: out.detach().sum())


def test_checkpointing_lowers_the_eager_peak_by_at_most_what_it_frees():
    # four Linear(16→16) + GELU blocks on 4096 rows, then a head: eager autograd saves each
    # GELU's input (gelu_backward reads it) and the last GELU's output (the head's weight
    # gradient reads it): 5 × 4096·16 fp32 that checkpointing the four blocks frees (each
    # block's own input, the previous GELU's output, stays saved)
    rows = 4096
    model = nn.Sequential(*(nn.Sequential(nn.Linear(16, 16), nn.GELU()) for _ in range(4)),
                          nn.Linear(16, 4))
    result = _train(model, torch.randn(rows, 16), optimizer="none",
                    checkpoint=["0", "1", "2", "3"])
    what_if = result.checkpoint_what_if
    assert what_if.saved_activation_bytes == 5 * rows * 16 * 4
    assert 0 < result.memory.peak_bytes - what_if.peak_bytes <= what_if.saved_activation_bytes


def test_a_first_conv_layers_backward_computes_only_the_weight_gradient():
    # Conv2d(3, 8, 3) on 2×3×16×16 → 2×8×14×14: forward 2 · (2·14·14 outputs) · 8 · 27 =
    # 169,344 FLOPs. The input is data (no gradient), so convolution_backward computes only
    # grad_weight: the same 169,344 (each (output, tap) pair once more). The estimate prices
    # the backward call as a convolution kernel (it once read `groups` at the forward's position)
    import torchroofline

    model = nn.Sequential(nn.Conv2d(3, 8, 3), nn.ReLU())
    result = torchroofline.analyze(model, torch.empty(2, 3, 16, 16, device="meta"), mode="train")
    convs = {op.name: op.flops.tensor for op in result.ops if "convolution" in op.name}
    assert convs == {
        "aten.convolution.default": 169_344, "aten.convolution_backward.default": 169_344,
    }
    assert result.eager_estimate_s >= result.sol_s > 0


def test_fused_adamw_reads_its_gradients_without_writing_them():
    # _fused_adamw_'s schema marks grads written, but the kernel unscales them in place only
    # with a grad_scale (AMP): without one it reads param, grad, exp_avg, exp_avg_sq and writes
    # param, exp_avg, exp_avg_sq — 7 fp32 accesses, 28 B per parameter — at 14 FLOPs each; the
    # step counter adds 1 FLOP, 8 B (+1 in place) and 4 B (read by the fused kernel)
    params = 1024 * 1024
    result = _train(nn.Linear(1024, 1024, bias=False), torch.randn(8, 1024),
                    optimizer_options={"fused": True})
    step = _phase(result, "optimizer")
    assert step.flops == 14 * params + 1
    assert step.eager_bytes == 28 * params + 12
