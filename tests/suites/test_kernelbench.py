"""KernelBench problem files, timings and the comparison with the speed of light."""

from __future__ import annotations

import json
import os
import resource
import warnings
from pathlib import Path

import pytest
import torch

import torchroofline
from torchroofline.errors import InputError, ProblemFileError
from torchroofline.price.hardware import get_gpu
from torchroofline.suites.kernelbench import (
    KERNELBENCH_SEED,
    analyze_file,
    build_problem,
    compare_kernelbench,
    discover,
    find_reference,
    is_generated,
    load_problem,
    load_timings,
    reference_for,
    seeded_inputs,
)

SUITE = Path(__file__).parents[1] / "fixtures" / "kernelbench"
RUNS = Path(__file__).parents[1] / "fixtures" / "kernelbench_run"
H100 = get_gpu("h100")


def test_load_problem_parts():
    problem = load_problem(SUITE / "level2" / "1_Conv2D_ReLU_BiasAdd.py")
    assert problem.name == "1_Conv2D_ReLU_BiasAdd"
    assert problem.level == 2
    assert problem.model_class.__name__ == "Model"
    assert problem.get_init_inputs() == [3, 16, 3, (16, 1, 1)]


def test_square_matmul_closed_form():
    n = 2048
    result = analyze_file(SUITE / "level1" / "1_Square_matrix_multiplication_.py", "h100", "fp32")
    assert result.model_name == "1_Square_matrix_multiplication_"
    assert result.flops == 2 * n**3
    assert result.compulsory_bytes == 3 * n * n * 4
    # fp32 matmul runs on CUDA cores: 2·N³ / 66.9 TFLOP/s
    assert result.time_ms["compute_sol"] == pytest.approx(2 * n**3 / 66.9e12 * 1e3)
    assert result.bottleneck == "compute"


def test_conv_relu_bias_closed_form():
    batch, c_in, c_out, size, k = 128, 3, 16, 32, 3
    out = size - k + 1
    result = analyze_file(SUITE / "level2" / "1_Conv2D_ReLU_BiasAdd.py", "h100", "fp32")
    out_elements = batch * c_out * out * out
    assert result.tensor_flops == 2 * out_elements * c_in * k * k
    conv, tail = result.kernels
    assert conv.category == "compute"
    # Inductor peels the conv's own bias into an add (kernel/conv.py), fused with relu + bias:
    # read the conv output and both biases once, write the result once
    assert tail.op_names == ("aten.add.Tensor", "aten.relu.default", "aten.add.Tensor")
    assert tail.bytes == (2 * out_elements + 2 * c_out) * 4


def test_softmax_of_six_gigabytes_allocates_nothing():
    rows, cols = 4096, 393216
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    result = analyze_file(SUITE / "level1" / "23_Softmax.py", "h100", "fp32")
    grown_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
    assert grown_kib < 500 * 1024
    assert result.fused_kernel_count == 1
    assert result.compulsory_bytes == 2 * rows * cols * 4
    assert result.fused_bytes == result.compulsory_bytes


def test_layer_norm_is_one_kernel():
    result = analyze_file(SUITE / "level1" / "40_LayerNorm.py", "h100", "fp32")
    elements = 16 * 64 * 256 * 256
    assert result.fused_kernel_count == 1
    # input and output, plus weight and bias (64·256·256 each) and the per-row mean and rstd
    assert result.compulsory_bytes >= 2 * elements * 4


def test_large_parameter_built_on_fake_tensors():
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    result = analyze_file(SUITE / "level1" / "90_Large_parameter.py", "h100", "fp32")
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before < 500 * 1024
    assert result.params == 100_000 * 100_000
    assert result.flops == 2 * 8 * 100_000 * 100_000


def test_gru_is_costed_as_cudnn_layers_not_steps():
    steps, batch, inputs, hidden, layers = 512, 10, 128, 256, 6
    result = analyze_file(SUITE / "level3" / "41_GRUBidirectional.py", "h100", "fp32")
    rnn_ops = [op for op in result.ops if op.name == "aten.gru.input"]
    assert len(rnn_ops) == 1 and len(result.ops) < 10
    gates = 3 * hidden
    first_layer = 2 * steps * batch * gates * (inputs + hidden)
    later_layers = 2 * steps * batch * gates * (2 * hidden + hidden)
    assert result.tensor_flops == 2 * (first_layer + (layers - 1) * later_layers)


def test_data_dependent_problem_falls_back_with_a_note():
    result = analyze_file(SUITE / "level1" / "91_Data_dependent.py", "h100", "fp32")
    assert any("real" in note for note in result.notes)
    # the sum (64·64 adds), its comparison with 0 (1) and the branch's relu or negation (64·64);
    # compulsory: x read and the output written once, 64·64 fp32 each
    assert result.flops == 2 * 64 * 64 + 1
    assert result.compulsory_bytes == 2 * 64 * 64 * 4
    again = analyze_file(SUITE / "level1" / "91_Data_dependent.py", "h100", "fp32")
    assert [op.name for op in again.ops] == [op.name for op in result.ops]


def test_data_dependent_problem_inputs_are_kernelbench_s_seeded_draws():
    # get_inputs() draws from the global generator, which KernelBench (and the loader) seeds
    # with 42 first: the values are the same on every call
    problem = load_problem(SUITE / "level1" / "91_Data_dependent.py")
    (first,), (second,) = seeded_inputs(problem), seeded_inputs(problem)
    assert torch.equal(first, second)
    torch.manual_seed(KERNELBENCH_SEED)
    assert torch.equal(first, torch.rand(64, 64))


@pytest.mark.parametrize(
    ("file", "message"),
    [
        ("syntax_error.py", "syntax error"),
        ("no_model.py", "defines no nn.Module class 'Model'"),
        ("missing.py", "no such problem file"),
    ],
)
def test_bad_problem_files(file, message):
    with pytest.raises(ProblemFileError, match=message) as error:
        load_problem(SUITE / "broken" / file)
    assert "\n" not in str(error.value)


def test_load_timings_kernelbench_format():
    timings = load_timings(SUITE / "baseline_time_torch.json")
    assert timings[(1, "1_Square_matrix_multiplication_.py")] == 0.392
    assert timings[(2, "1_Conv2D_ReLU_BiasAdd.py")] == 0.085


def test_load_timings_rejects_bad_files(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"level1": {"x.py": {"std": 1.0}}}))
    with pytest.raises(InputError, match="no finite positive 'mean'"):
        load_timings(bad)
    # NaN passed the "<= 0" test, and inf (1e400) read as "0.0%" of SoL in kernelbench and
    # stopped validate with a traceback (math domain error)
    for value in ("NaN", "1e400", "true"):
        bad.write_text('{"level1": {"x.py": {"mean": VALUE}}}'.replace("VALUE", value))
        with pytest.raises(InputError, match=r"'x\.py' has no finite positive 'mean' time in ms, "
                           r"got (nan|inf|True)$"):
            load_timings(bad)
    bad.write_text("{not json")
    with pytest.raises(InputError, match="cannot read timings"):
        load_timings(bad)


def test_compare_kernelbench_figures():
    result = analyze_file(SUITE / "level1" / "1_Square_matrix_multiplication_.py", "h100", "fp32")
    sol = result.sol_ms
    comparison = compare_kernelbench(result, ref_ms=4 * sol, gen_ms=2 * sol)
    data = comparison.to_dict()
    assert data["speedup"] == pytest.approx(2.0)
    assert data["ref_sol_fraction"] == pytest.approx(0.25)
    assert data["gen_sol_fraction"] == pytest.approx(0.5)
    assert data["gen_headroom"] == pytest.approx(2.0)
    assert not data["gen_impossible"]
    json.dumps(data)
    # half the fp32 bound is above the TF32 one (2·2048³ / 494.7e12 s = 34.7 µs): a TF32 time
    tf32_time = compare_kernelbench(result, ref_ms=4 * sol, gen_ms=sol / 2)
    assert tf32_time.to_dict()["gen_possible_with"] == "tf32"
    assert not tf32_time.to_dict()["gen_impossible"]
    assert tf32_time.to_dict()["gen_verdict_kind"] == "lower math"
    assert "faster than the fp32 bound; possible only with TF32 or lower math" \
        in tf32_time.format()
    # 10 µs is below every rung: the memory term, 3·2048²·4 B at 3.35 TB/s, is 15.0 µs
    too_fast = compare_kernelbench(result, ref_ms=4 * sol, gen_ms=0.01)
    assert too_fast.to_dict()["gen_impossible"] and too_fast.gen.possible_with is None
    assert too_fast.to_dict()["gen_verdict_kind"] == "impossible"
    assert "*** IMPOSSIBLE: faster than any math on this GPU" in too_fast.format()
    with pytest.raises(InputError):
        compare_kernelbench(result, ref_ms=-1)


def test_discover_orders_and_filters_levels():
    everything = discover([SUITE])
    names = [p.name for p in everything]
    assert names.index("1_Square_matrix_multiplication_.py") < names.index("23_Softmax.py")
    level2 = discover([SUITE], levels={2})
    assert [p.name for p in level2] == ["1_Conv2D_ReLU_BiasAdd.py"]
    with pytest.raises(InputError, match="no such file"):
        discover([SUITE / "nowhere"])
    with pytest.raises(InputError, match="a KernelBench run folder.*pass it as --run"):
        discover([RUNS / "runs" / "demo"])


def test_public_api_exports():
    assert torchroofline.analyze_file is analyze_file
    assert torchroofline.load_problem is load_problem
    assert torchroofline.compare_kernelbench is compare_kernelbench


def test_kernelbench_extra_installs_what_its_problems_import():
    tomllib = pytest.importorskip("tomllib")
    pyproject = Path(__file__).resolve().parents[2] / "pyproject.toml"
    extras = tomllib.loads(pyproject.read_text())["project"]["optional-dependencies"]
    assert any(requirement.startswith("einops") for requirement in extras["kernelbench"])


# --- Problems that need the network fail at once, with one line ------------------------------


def test_hub_problem_fails_offline_at_once(monkeypatch):
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("TRANSFORMERS_OFFLINE", raising=False)
    problem = load_problem(RUNS / "network" / "1_hub_model.py")
    with pytest.raises(ProblemFileError) as error:
        build_problem(problem)
    message = str(error.value)
    assert "Hugging Face hub" in message and "HF_HUB_OFFLINE=1" in message
    assert "HF_HUB_OFFLINE=0" in message and "\n" not in message
    assert "HF_HUB_OFFLINE" not in os.environ  # put back as it was


def test_users_hub_setting_is_kept(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "0")
    problem = load_problem(RUNS / "network" / "1_hub_model.py")
    with pytest.raises(ProblemFileError) as error:
        build_problem(problem)
    message = str(error.value)
    assert "couldn't connect" in message  # the online path ran: the user's setting was kept
    assert "HF_HUB_OFFLINE=0;" in message and "huggingface.co is reachable" in message
    assert os.environ["HF_HUB_OFFLINE"] == "0"


def test_problem_opening_a_socket_says_it_needs_the_network():
    with pytest.raises(ProblemFileError, match="needs network access \\(ConnectionRefusedError"):
        load_problem(RUNS / "network" / "2_opens_a_socket.py")


# --- Generated kernels are analyzed as their reference, never imported ------------------------

DEMO = RUNS / "runs" / "demo"


def test_generated_files_are_told_from_their_text():
    assert is_generated(DEMO / "level_1_problem_23_sample_0_kernel.py")  # run name, plain PyTorch
    assert not is_generated(SUITE / "level1" / "23_Softmax.py")


def test_run_file_finds_its_reference_by_kernelbench_naming():
    found = find_reference(DEMO / "level_1_problem_23_sample_1_kernel.py", SUITE)
    assert found == SUITE / "level1" / "23_Softmax.py"
    assert find_reference(DEMO / "level_1_problem_1_sample_0_kernel.py", SUITE / "level1").name \
        == "1_Square_matrix_multiplication_.py"


def test_reference_found_near_a_run_and_by_problem_name(tmp_path):
    problems = tmp_path / "KernelBench" / "KernelBench" / "level1"
    problems.mkdir(parents=True)
    reference = problems / "19_ReLU.py"
    reference.write_text((SUITE / "level1" / "23_Softmax.py").read_text())
    run = tmp_path / "KernelBench" / "runs" / "r"
    run.mkdir(parents=True)
    kernel = run / "level_1_problem_19_sample_0_kernel.py"
    kernel.write_text("import torch\nfrom torch.utils.cpp_extension import load_inline\n")
    assert find_reference(kernel) == reference  # KernelBench/KernelBench/level1 from the run
    assert find_reference(kernel, tmp_path / "KernelBench") == reference  # the repository
    named = tmp_path / "mine" / "level1" / "19_ReLU.py"
    named.parent.mkdir(parents=True)
    named.write_text("import triton\n")
    assert reference_for(named, problems=tmp_path / "KernelBench" / "KernelBench") == reference
    assert reference_for(named, ref=reference) == reference
    assert reference_for(reference) is None  # a problem is its own reference
    both = tmp_path / "mine" / "level1" / "19_ReLU_v2.py"  # ModelNew beside its own reference
    both.write_text(reference.read_text() + "\n\nclass ModelNew(Model):\n    pass\n")
    assert reference_for(both) is None
    both.write_text(both.read_text() + "import triton\n")  # compiled: never imported
    assert reference_for(both, problems=tmp_path / "KernelBench" / "KernelBench") == reference


def test_missing_reference_is_one_line_naming_the_search_and_the_flag():
    kernel = DEMO / "level_1_problem_1_sample_0_kernel.py"
    with pytest.raises(ProblemFileError) as error:
        find_reference(kernel)  # the fixtures' folder is 'kernelbench', not found by naming
    message = str(error.value)
    assert "level1/1_*.py" in message and "searched" in message
    assert "--problems" in message and "\n" not in message


def test_compiled_kernels_are_never_imported():
    with pytest.raises(ProblemFileError, match="generated cuda kernel, never imported"):
        load_problem(DEMO / "level_1_problem_1_sample_0_kernel.py", class_name="ModelNew")
    with pytest.raises(ProblemFileError, match="generated triton kernel"):
        load_problem(DEMO / "level_1_problem_1_sample_1_kernel.py", class_name="ModelNew")


def test_small_constant_buffers_built_in_init_are_known_values():
    # register_buffer("scale", ones(8)) and a 0-dim tensor(2.0): the shadow keeps both values
    # (looking them up once compared tensors element-wise and raised)
    result = analyze_file(Path(__file__).parents[1] / "fixtures" / "constants" / "small_buffers.py")
    known = sorted(value.tolist() for value in result.trace.constants.values())
    assert known == [[1.0] * 8, [2.0]]  # each as its storage's flat elements
    # one add per output element of the 4 × 8 input: the multiply by the known ones is x
    # itself (plan/algebra/literals.py)
    assert result.flops == 4 * 8
    assert [s.rule for s in result.rewrites] == ["x mul 1 = x"]


def test_an_unknown_write_through_a_view_forgets_the_base_value():
    # m = ones(4, 4); m[0].normal_() in __init__: the random write reaches m through its view,
    # so neither m nor the view is a known constant any more; an untouched tril mask still is
    import torch
    from torch._subclasses.fake_tensor import FakeTensorMode

    from torchroofline.trace.shadow import ConstantShadow, known_value

    with FakeTensorMode(), ConstantShadow():
        m = torch.ones(4, 4)
        row = m[0]
        row.normal_()
        mask = torch.tril(torch.ones(3, 3))
    assert known_value(m) is None and known_value(row) is None
    assert known_value(mask).tolist() == [[1, 0, 0], [1, 1, 0], [1, 1, 1]]


def test_initializers_skip_the_fake_dispatch_and_keep_known_values_apart():
    # nn.Linear's reset_parameters draws (uniform_) into unknown fake weights: the shadow
    # answers them itself, so the fake mode below it sees the weights made, never drawn into;
    # a fill of a known constant still runs for real, and a draw into one still forgets it
    import torch
    from torch._subclasses.fake_tensor import FakeTensor, FakeTensorMode
    from torch.utils._python_dispatch import TorchDispatchMode

    from torchroofline.trace.shadow import ConstantShadow, known_value

    class Seen(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # noqa: ANN001
            seen.append(func._schema.name)
            return func(*args, **(kwargs or {}))

    seen: list[str] = []
    with FakeTensorMode(), Seen(), ConstantShadow():
        layer = torch.nn.Linear(3, 2)
        filled = torch.zeros(2).fill_(5.0)
        drawn = torch.ones(2).uniform_()
    assert "aten::uniform_" in seen  # the draw into the known ones went down: it forgets them
    assert seen.count("aten::uniform_") == 1  # the weight's and the bias's draws did not
    assert isinstance(layer.weight, FakeTensor) and layer.weight.shape == (2, 3)
    assert known_value(layer.weight) is None and known_value(drawn) is None
    assert known_value(filled).tolist() == [5.0, 5.0]


def test_compare_kernelbench_names_an_algebraic_shortcut():
    """A generated time between the bound and the bound as written needs the shortcut the bound
    takes: (x @ Wᵀ / 2).sum(1) at 4096² is a matrix-vector product (docs/algebra.md)."""
    import torch

    class Scaled(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.fc = torch.nn.Linear(4096, 4096, bias=False, device="meta")

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return (self.fc(x) / 2).sum(1)

    result = torchroofline.analyze(Scaled(), torch.empty(4096, 4096, device="meta"), "h100")
    as_written = result.time_ms["sol_as_written"]
    comparison = compare_kernelbench(result, ref_ms=2 * as_written, gen_ms=as_written / 2)
    data = comparison.to_dict()
    # as_written / 2 is above the bound as written with TF32 math: either explains it
    shortcut = "possible only with an algebraic shortcut (fc, sum through the linear map), " \
        "or as written with TF32 or lower math (check your tolerance)"
    assert (data["gen_shortcut"], data["ref_shortcut"]) == (shortcut, None)
    assert shortcut in comparison.format()


def test_a_fill_of_a_fake_mode_constant_is_written_as_the_mode_writes_it():
    # BatchNorm's reset zeroes its step count, a one-element tensor the fake mode keeps as a
    # constant: the shadow writes the constant (and its own value) itself, so no zero_ of a
    # fake tensor goes down, and the constant is what the fake mode alone leaves
    import torch
    from torch._subclasses.fake_tensor import FakeTensor, FakeTensorMode
    from torch.utils._python_dispatch import TorchDispatchMode

    from torchroofline.trace.shadow import ConstantShadow, known_value

    class Seen(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # noqa: ANN001
            if args and isinstance(args[0], FakeTensor):  # not the shadow's real writes
                seen.append(func._schema.name)
            return func(*args, **(kwargs or {}))

    seen: list[str] = []
    with FakeTensorMode():
        alone = torch.nn.BatchNorm2d(3).num_batches_tracked
        alone_seven = torch.tensor(2).fill_(7)
    with FakeTensorMode(), Seen(), ConstantShadow():
        steps = torch.nn.BatchNorm2d(3).num_batches_tracked
        seven = torch.tensor(2).fill_(7)
    assert "aten::zero_" not in seen and "aten::fill_" not in seen
    assert steps.constant.item() == alone.constant.item() == 0 == known_value(steps).item()
    assert seven.constant.item() == alone_seven.constant.item() == 7 == known_value(seven).item()
    assert steps.dtype == alone.dtype and steps.shape == alone.shape == ()


# a problem written for the GPU: on a CPU-only build each .cuda() raised "Torch not compiled with
# CUDA enabled" while the file was built, before any op; the trace already kept such moves
ON_THE_GPU = '''
import torch, torch.nn as nn
class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(64, 32).cuda()
        self.register_buffer("shift", torch.ones(32).to("cuda:0"))
    def forward(self, x):
        return self.proj(x) + self.shift
def get_inputs():
    return [torch.randn(16, 64).cuda()]
def get_init_inputs():
    return []
'''


def test_a_problem_that_moves_itself_to_the_gpu_is_built_where_it_is(tmp_path: Path) -> None:
    moved = tmp_path / "on_gpu.py"
    moved.write_text(ON_THE_GPU)
    result = analyze_file(moved, "h100-sxm")
    # the same program as the file's without the moves, whose product is 16·64·32·2 FLOPs
    on_host = tmp_path / "on_host.py"
    on_host.write_text(ON_THE_GPU.replace(".cuda()", "").replace('.to("cuda:0")', ""))
    expected = analyze_file(on_host, "h100-sxm")
    assert result.flops == expected.flops >= 16 * 64 * 32 * 2
    assert result.sol_s == expected.sol_s > 0


def test_building_on_fake_tensors_shows_no_warning_of_torchs(tmp_path: Path) -> None:
    # a sweep to N=0 printed "..._cuda_bindings.py:202: UserWarning: Initializing zero-element
    # tensors is a no-op", torch's warning on a fake tensor, named as torchroofline's line
    empty = tmp_path / "empty_linear.py"
    empty.write_text(ON_THE_GPU.replace("64, 32", "0, 32").replace("16, 64", "16, 0")
                     .replace(".cuda()", ""))  # model.cuda() builds for real, which may warn
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        build_problem(load_problem(empty))
    assert [str(w.message) for w in caught] == []
