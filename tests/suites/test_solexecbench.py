"""SOL-ExecBench problem directories: definitions, workloads, inputs, the SOL score, the CLI."""

from __future__ import annotations

import json
import shutil
import struct
from pathlib import Path

import pytest
import torch

from torchroofline.cli import main
from torchroofline.errors import ProblemFileError
from torchroofline.plan.given import DATA_LIMIT_BYTES
from torchroofline.suites.solexecbench import (
    analyze_dir,
    analyze_workload,
    discover_problems,
    load_definition,
    load_workloads,
    make_inputs,
    resolve_axes,
    with_sol_score,
)

FIXTURES = Path(__file__).parents[1] / "fixtures" / "solexecbench"
GEMM, RMSNORM = FIXTURES / "gemm", FIXTURES / "rmsnorm"
MOE, BLOB = FIXTURES / "moe_routing", FIXTURES / "safetensors_blob"
CAPACITY_LOOP = FIXTURES / "moe_capacity_loop"


def test_gemm_flops_and_bytes_per_workload():
    definition = load_definition(GEMM)
    n, k = 64, 32
    results = analyze_dir(GEMM, "h100", "fp32")
    assert [r.model_name for r in results] == ["gemm_n64_k32/gemm-m16", "gemm_n64_k32/gemm-m128"]
    for workload, result in zip(load_workloads(GEMM), results, strict=True):
        m = workload.axes["M"]
        a, b = make_inputs(definition, workload)
        assert (a.shape, b.shape, a.dtype, b.dtype) == ((m, k), (n, k), torch.float16,
                                                         torch.float16)
        # C = A @ B.T: 2·M·N·K FLOPs; A, B read and C written once, 2 bytes each (fp16)
        assert result.flops == 2 * m * n * k
        assert result.compulsory_bytes == (m * k + n * k + m * n) * 2


def test_rmsnorm_scalar_input_and_trace_record_line():
    definition = load_definition(RMSNORM)
    workloads = load_workloads(RMSNORM)
    # the second line is a FlashInfer trace record, the workload under "workload"
    assert [w.uuid for w in workloads] == ["rms-b8", "rms-b64"]
    x, weight, eps = make_inputs(definition, workloads[1])
    assert (x.dtype, weight.dtype, eps) == (torch.bfloat16, torch.bfloat16, 1e-6)
    hidden = 256
    for workload, result in zip(workloads, analyze_dir(RMSNORM, "h100"), strict=True):
        batch = workload.axes["batch_size"]
        # input read and output written (B·H bf16 each), the weight read once (H bf16)
        assert result.compulsory_bytes == (2 * batch * hidden + hidden) * 2


def test_custom_inputs_keep_real_routing():
    definition = load_definition(MOE)
    (workload,) = load_workloads(MOE)
    tokens, hidden, experts, out = 16, 64, 8, 32
    assert resolve_axes(definition, workload) == {
        "num_tokens": tokens, "hidden_size": hidden, "num_experts": experts,
        "out_features": out, "routed": tokens,
    }
    x, weights, expert_ids = make_inputs(definition, workload)
    assert torch.equal(expert_ids, torch.arange(tokens) % 2)  # the generator's own routing
    given = analyze_workload(definition, workload, "h100")
    # x and the output (fp32), the int64 indices, and the weights of the 2 experts routed to
    assert given.compulsory_bytes == (
        tokens * hidden * 4 + tokens * out * 4 + tokens * 8 + 2 * hidden * out * 4
    )
    assert given.flops == 2 * tokens * hidden * out
    any_values = analyze_workload(definition, workload, "h100", data="any")
    assert any_values.compulsory_bytes <= given.compulsory_bytes


def test_absent_safetensors_blob_is_one_line_and_spares_the_other_workloads():
    missing, result = analyze_dir(BLOB, "h100")
    assert isinstance(missing, ProblemFileError)
    message = str(missing)
    assert "\n" not in message
    assert "blobs/x_r4.safetensors" in message and "blob-r4" in message
    # the random workload: x read and y written, 8·128 fp32 each
    assert result.compulsory_bytes == 2 * 8 * 128 * 4


def _write_safetensors(path: Path, key: str, tensor: torch.Tensor) -> None:
    data = tensor.contiguous().numpy().tobytes()
    header = json.dumps({key: {"dtype": "F32", "shape": list(tensor.shape),
                               "data_offsets": [0, len(data)]}}).encode()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(struct.pack("<Q", len(header)) + header + data)


def test_present_safetensors_blob_is_read(tmp_path):
    folder = tmp_path / "blob"
    shutil.copytree(BLOB, folder)
    values = torch.arange(4 * 128, dtype=torch.float32).reshape(4, 128)
    _write_safetensors(folder / "blobs" / "x_r4.safetensors", "x", values)
    definition = load_definition(folder)
    x, scale = make_inputs(definition, load_workloads(folder)[0])
    assert torch.equal(x, values) and scale == 0.5
    _write_safetensors(folder / "blobs" / "x_r4.safetensors", "x", values[:2])
    with pytest.raises(ProblemFileError, match=r"holds F32 \[2, 128\], the definition"):
        make_inputs(definition, load_workloads(folder)[0])


def test_malformed_definition_and_missing_axis(tmp_path):
    folder = tmp_path / "bad"
    shutil.copytree(GEMM, folder)
    (folder / "workload.jsonl").write_text('{"uuid": "u", "axes": {}, "inputs": '
                                           '{"A": {"type": "random"}, "B": {"type": "random"}}}\n')
    with pytest.raises(ProblemFileError, match="no value for the var axis 'M'"):
        make_inputs(load_definition(folder), load_workloads(folder)[0])
    (folder / "definition.json").write_text("{not json")
    with pytest.raises(ProblemFileError, match="not valid JSON"):
        load_definition(folder)


def test_discover_lists_directories_not_their_reference():
    found = discover_problems([FIXTURES])
    assert found == [FIXTURES / "fp8_dequant_gemm", GEMM, FIXTURES / "int8_dequant_gemm",
                     CAPACITY_LOOP, MOE, RMSNORM, BLOB]


def test_cli_analyze_directory_json_list_with_score(capsys):
    code = main(["analyze", str(GEMM), "--json", "--actual-ms", "0.02,0.04",
                 "--baseline-ms", "0.05"])
    out, _ = capsys.readouterr()
    assert code == 0
    documents = json.loads(out)
    assert [d["workload"] for d in documents] == ["gemm-m16", "gemm-m128"]
    for document, actual in zip(documents, (0.02, 0.04), strict=True):
        sol = document["time_ms"]["sol"]
        # S = 1 / (1 + (T_k - T_sol) / (T_b - T_sol))
        assert document["sol_score"]["score"] == pytest.approx(
            1 / (1 + (actual - sol) / (0.05 - sol))
        )


def test_a_time_lower_math_reaches_is_scored_against_its_bound():
    # the verdict's rung, as a KernelBench run's sample: a time between the TF32 and the fp32
    # bounds of a 4096² fp32 GEMM is possible with TF32 math, scored against that bound, not
    # flagged as faster than light; a time below every rung is not scored
    import torch.nn as nn

    from torchroofline import analyze

    result = analyze(nn.Linear(4096, 4096, device="meta"), torch.empty(4096, 4096, device="meta"),
                     "h100")
    fp32_ms, tf32_ms = (result.sol_by_math_s[rung] * 1e3 for rung in ("program", "tf32"))
    actual, baseline = (fp32_ms + tf32_ms) / 2, 4 * fp32_ms
    document: dict = {}
    line = with_sol_score(document, result, actual, baseline)
    score = 1 / (1 + (actual - tf32_ms) / (baseline - tf32_ms))
    assert document["sol_score"]["score"] == pytest.approx(score)
    assert document["sol_score"]["sol_ms"] == pytest.approx(tf32_ms)
    assert line.startswith(f"SOL score {score:.3f}")
    fastest = min(result.sol_by_math_s.values()) * 1e3
    assert with_sol_score(document, result, fastest / 2, baseline).startswith("SOL score: none")


def test_cli_score_needs_a_baseline_above_the_bound(capsys):
    # a baseline of 1 ns is below this GEMM's speed of light: no scale, no score
    code = main(["analyze", str(GEMM), "--actual-ms", "0.02", "--baseline-ms", "0.000001"])
    out, _ = capsys.readouterr()
    assert code == 0
    assert out.count("SOL score: none") == 2


def test_cli_a_workload_time_below_every_rung_exits_3(capsys):
    # as a problem file's --actual-ms and validate's times: it exited 0 beside "IMPOSSIBLE"
    code = main(["analyze", str(GEMM), "--actual-ms", "0.000001"])
    _, err = capsys.readouterr()
    assert code == 3
    assert err.count("the measured 1e-06 ms is below the") == 2  # both workloads


def test_cli_absent_blob_fails_with_one_line(capsys):
    code = main(["analyze", str(BLOB)])
    _, err = capsys.readouterr()
    assert code == 1
    lines = [line for line in err.splitlines() if line.startswith("torchroofline: error:")]
    assert len(lines) == 1 and "x_r4.safetensors" in lines[0]


def test_batch_one_row_per_workload(capsys):
    code = main(["kernelbench", str(RMSNORM), str(BLOB), "--json"])
    out, _ = capsys.readouterr()
    rows = {p["name"]: p["status"] for p in json.loads(out)["problems"]}
    assert rows == {"rmsnorm/rms-b8": "ok", "rmsnorm/rms-b64": "ok",
                    "safetensors_blob/blob-r4": "failed", "safetensors_blob/random-r8": "ok"}
    assert code == 1


def test_unknown_axis_in_a_shape_is_one_line(tmp_path):
    folder = tmp_path / "bad_axis"
    shutil.copytree(GEMM, folder)
    definition = json.loads((folder / "definition.json").read_text())
    definition["inputs"]["A"]["shape"] = ["M", "Q"]
    (folder / "definition.json").write_text(json.dumps(definition))
    with pytest.raises(ProblemFileError, match="input 'A' names the axis Q, which the definition"):
        load_definition(folder)


def test_reference_tf32_switch_stays_its_own(tmp_path):
    folder = tmp_path / "tf32"
    shutil.copytree(GEMM, folder)
    (folder / "reference.py").write_text(
        "import torch\ntorch.backends.cuda.matmul.allow_tf32 = True\n\n\n"
        "def run(A, B):\n    return torch.matmul(A, B.T)\n"
    )
    before = torch.backends.cuda.matmul.allow_tf32
    analyze_dir(folder, "h100")
    assert torch.backends.cuda.matmul.allow_tf32 == before


def test_moe_host_loop_with_capacity_reads_the_given_routing_with_the_experts_as_shapes():
    # T = 32, H = 16, F = 32, E = 8, top-2, C = int(1.25·T·2/E) = 10: the experts hit are
    # read with .item(), each keeps its first C pairs. With a data limit of 8 KiB the three
    # expert banks (16 KiB each) are made as shapes only, x (2 KiB) and the router for real:
    # the routing runs on the given values, the experts' products stay fake. Bound: the
    # router (2·T·H·E FLOPs) and Σ_e min(count_e, C) pairs of 3·2·H·F; x, the router, the
    # output and the three matrices of each expert that keeps a pair — as with every input real
    definition = load_definition(CAPACITY_LOOP)
    (workload,) = load_workloads(CAPACITY_LOOP)
    tokens, hidden, inner, experts, capacity = 32, 16, 32, 8, 10
    x, router, *banks, factor = make_inputs(definition, workload)
    assert int(factor * tokens * 2 / experts) == capacity
    chosen = (x @ router.t()).topk(2, dim=-1).indices
    kept = torch.bincount(chosen.flatten(), minlength=experts).clamp(max=capacity)
    assert kept.sum() < tokens * 2  # the capacity drops pairs
    flops = 2 * tokens * hidden * experts + int(kept.sum()) * 3 * 2 * hidden * inner
    needed = (2 * tokens * hidden + experts * hidden
              + int((kept > 0).sum()) * 3 * hidden * inner) * 4
    for limit in (DATA_LIMIT_BYTES, 8 * 2**10):
        if limit < DATA_LIMIT_BYTES:
            assert [t.is_meta for t in make_inputs(definition, workload, limit)[2:5]] == [True] * 3
        given = analyze_workload(definition, workload, "h100", data_limit_bytes=limit)
        assert given.tensor_flops == flops
        assert given.compulsory_bytes == needed
