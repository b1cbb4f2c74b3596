"""The GPU table: dense figures, lookup, errors, and the KernelBench table parser."""

from __future__ import annotations

import dataclasses
import json

import pytest
import torch

from torchroofline import Result, analyze
from torchroofline.cli import main
from torchroofline.errors import ClockError, PrecisionError, UnknownGPUError
from torchroofline.present.report import format_prompt
from torchroofline.price import gpu_spec, hardware, kernelbench_gpus
from torchroofline.price.hardware import GPUSpec, get_gpu, list_gpus
from torchroofline.price.kernelbench_gpus import parse_kernelbench_specs
from torchroofline.price.precision import math_rungs

# A table in KernelBench's GPU_SPEC_INFO format (its spellings, typo "Tensore" included).
KERNELBENCH_TABLE = {
    "H100": {
        "GPU Architecture": "Hopper",
        "GPU Memory": "80GB",
        "Memory Bandwidth": "3.35 TB/s",
        "FP64 TFLOPS": "34",
        "FP64 Tensor Core TFLOPS": "67",
        "FP32 TFLOPS": "67",
        "TF32 Tensor Core TFLOPS": "989 with sparsity",
        "BFLOAT16 Tensore Core TFLOPS": "1979 with sparsity",
        "INT8 Tensor Core TOPS": "3958 with sparsity",
        "Register File Size": "64K 32-bit registers per SM",
    },
    "Future GPU": {
        "GPU Architecture": "gfx950",
        "GPU Memory": "16 GB GDDR6",
        "Memory Bandwidth": "1555 GB/s",
        "FP32 TFLOPS": "19.5",
        "TF32 Tensor Core TFLOPS": "156 (312 with sparsity)",
        "FP16 Matrix Core TFLOPS": "not published",
        "FP8 Matrix Core TFLOPS": "4600",
        "MXFP6, MXFP4 Matrix Core TFLOPS": "9200",
        "Number of CU": "256",
        "L2 Cache": "6 MB",
    },
    "T4-like": {
        "Memory Bandwidth": "320 GB/s",
        "Single-Precision TFLOPS": "8.1",
        "Mixed-Precision (FP16/FP32) TFLOPS": "65",
        "INT8 TOPS": "130",
        "INT4 TOPS": "260",
    },
    "No bandwidth": {"FP32 TFLOPS": "10", "Memory Bandwidth": "fast"},
}


def test_dense_not_sparse_figures() -> None:
    h100 = get_gpu("h100-sxm")
    assert h100.tensor_peak("bf16") == pytest.approx(989.4e12)  # datasheet prints 1979 sparse
    assert h100.tensor_peak("tf32") == pytest.approx(494.7e12)
    assert h100.memory_bandwidth_bytes_per_s == pytest.approx(3.35e12)
    assert h100.l2_bytes == 50 * 2**20
    assert get_gpu("l4").tensor_peak("fp16") == pytest.approx(121e12)  # datasheet: 242 sparse
    assert get_gpu("a100").tensor_peak("fp16") == pytest.approx(312e12)


def test_geforce_fp16_is_fp32_accumulate() -> None:
    rtx = get_gpu("rtx4090")
    assert rtx.tensor_peak("fp16") == pytest.approx(165.2e12)
    # GeForce runs FP32 accumulate at half the FP16-accumulate rate (whitepaper rounds: 330.3)
    fp16_acc = rtx.fp16_accumulate_fp16_flops_per_s
    assert fp16_acc == pytest.approx(2 * rtx.tensor_peak("fp16"), rel=1e-3)


@pytest.mark.parametrize(
    ("name", "key"),
    [
        ("H100", "h100-sxm"),
        ("h100-sxm5", "h100-sxm"),
        ("H100 SXM", "h100-sxm"),
        ("h100_pcie", "h100-pcie"),
        ("H200-SXM", "h200"),
        ("A100", "a100-80gb"),
        ("a100-sxm", "a100-80gb"),
        ("A100 40GB", "a100-40gb"),
        ("a100-pcie", "a100-pcie"),
        ("4090", "rtx4090"),
        ("RTX-4090", "rtx4090"),
        ("NVIDIA GeForce RTX 4090", "rtx4090"),
        ("v100-sxm2", "v100"),
        ("AMD Instinct MI300X", "mi300x"),
        ("l40s", "l40s"),
    ],
)
def test_alias_and_case_insensitive_lookup(name: str, key: str) -> None:
    assert get_gpu(name).key == key


def test_every_name_resolves_to_its_own_gpu() -> None:
    specs = list_gpus()
    assert len({spec.key for spec in specs}) == len(specs)
    for spec in specs:
        for name in (spec.key, spec.name, *spec.aliases):
            assert get_gpu(name) is spec, name


def test_unknown_gpu_message_is_one_line_with_close_names() -> None:
    with pytest.raises(UnknownGPUError) as caught:
        get_gpu("h1000")
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith("unknown GPU 'h1000'; closest: ")
    assert "h100-sxm" in message
    assert "torchroofline gpus" in message


@pytest.mark.parametrize(
    ("name", "key"),
    [
        # as nvidia-smi, rocm-smi and torch.cuda.get_device_name() print them
        ("NVIDIA H100 80GB HBM3", "h100-sxm"),
        ("H100-SXM5-80GB", "h100-sxm"),
        ("NVIDIA H100 NVL", "h100-nvl"),
        ("NVIDIA H100 PCIe", "h100-pcie"),
        ("NVIDIA A100-SXM4-80GB", "a100-80gb"),
        ("NVIDIA A100 80GB PCIe", "a100-pcie"),
        ("AMD Instinct MI300X VF", "mi300x"),
        ("AMD Instinct MI300X", "mi300x"),
        ("NVIDIA B200", "b200"),
        ("Tesla V100-SXM2-32GB", "v100"),
        ("Tesla V100-PCIE-32GB", "v100"),
        ("Tesla V100-SXM2-16GB", "v100-16gb"),
        ("NVIDIA A100-PCIE-40GB", "a100-40gb"),
    ],
)
def test_device_names_as_drivers_print_them(name: str, key: str) -> None:
    assert get_gpu(name).key == key


def test_an_unknown_device_name_suggests_its_model_first() -> None:
    # "H100 80GB" spelled otherwise: its other words resemble "A100 80GB", its model is an H100
    with pytest.raises(UnknownGPUError) as caught:
        get_gpu("NVIDIA H100 80GB HBM9")
    assert "closest: h100-sxm, h100-pcie, h100-nvl " in str(caught.value)


def test_h100_nvl_keeps_the_sxm_compute_with_its_own_memory() -> None:
    # NVIDIA's H100 datasheet: 94 GB at 3.9 TB/s; the SXM's higher peaks keep it a bound
    nvl, sxm = get_gpu("h100-nvl"), get_gpu("h100-sxm")
    assert nvl.memory_bandwidth_bytes_per_s > sxm.memory_bandwidth_bytes_per_s
    assert nvl.tensor_peak_flops_per_s == sxm.tensor_peak_flops_per_s
    assert nvl.memory_bytes == 94e9


def test_unknown_gpu_without_close_names() -> None:
    with pytest.raises(UnknownGPUError, match="^unknown GPU 'zzzzzzzz' \\(run"):
        get_gpu("zzzzzzzz")


def test_gpuspec_passes_through() -> None:
    spec = get_gpu("l4")
    assert get_gpu(spec) is spec


@pytest.mark.parametrize(("gpu", "precision"), [("a100", "fp8"), ("v100", "tf32"), ("t4", "bf16")])
def test_missing_tensor_support_raises(gpu: str, precision: str) -> None:
    spec = get_gpu(gpu)
    assert not spec.has_tensor(precision)
    with pytest.raises(PrecisionError) as caught:
        spec.tensor_peak(precision)
    message = str(caught.value)
    assert "\n" not in message
    assert spec.name in message
    assert all(p in message for p in spec.tensor_peak_flops_per_s)


def test_vector_peak_falls_back_to_fp32() -> None:
    h100, mi300x = get_gpu("h100"), get_gpu("mi300x")
    assert h100.vector_peak("fp16") == pytest.approx(133.8e12)
    assert h100.vector_peak("bf16") == pytest.approx(133.8e12)
    assert h100.vector_peak("tf32") == h100.vector_peak("fp32") == pytest.approx(66.9e12)
    assert "fp16" not in mi300x.vector_peak_flops_per_s  # no published FP16 vector figure
    assert mi300x.vector_peak("fp16") == mi300x.vector_peak("fp32") == pytest.approx(163.4e12)
    # no FP4 vector ALUs: fp4 pointwise work runs upcast, at the half2 rate (values exact in fp16)
    assert h100.vector_peak("fp4") == h100.vector_peak("fp16")
    with pytest.raises(PrecisionError):
        h100.vector_peak("int4")


@pytest.mark.parametrize(
    ("gpu", "fp32_tflops", "ratio"),
    [("v100", 15.7, 2), ("t4", 8.1, 2), ("a100", 19.5, 4), ("h100-pcie", 51.2, 2), ("l4", 30.3, 1)],
)
def test_half2_vector_peaks(gpu: str, fp32_tflops: float, ratio: int) -> None:
    # Volta/Turing/Hopper run packed half2 at 2x FP32, GA100 at 4x, Ada at 1x
    spec = get_gpu(gpu)
    assert spec.vector_peak("fp16") == pytest.approx(ratio * fp32_tflops * 1e12)
    assert spec.vector_peak("bf16") == spec.vector_peak("fp16")


def test_fp16_pointwise_on_v100_runs_at_the_half2_rate() -> None:
    import torch

    import torchroofline

    x = torch.empty(1024, 1024, device="meta")
    fp16 = torchroofline.analyze(torch.nn.ReLU(), x, "v100", "fp16")
    fp32 = fp16.on("v100", "fp32")
    # ReLU: one vector FLOP per element, 2**20 elements; V100 half2 31.4 TFLOP/s, FP32 15.7
    assert fp16.vector_flops == 2**20
    assert fp16.time_ms["compute_sol"] == pytest.approx(2**20 / 31.4e12 * 1e3)
    assert fp32.time_ms["compute_sol"] == pytest.approx(2**20 / 15.7e12 * 1e3)


@pytest.mark.parametrize(
    ("name", "picked", "others"),
    [("a100", "A100 80GB", ("a100-40gb", "a100-pcie")), ("h100", "H100 SXM", ("h100-pcie",))],
)
def test_a_shared_short_name_says_which_part_it_picks(name, picked, others) -> None:
    note = hardware.choice_note(name)
    assert note is not None and "\n" not in note
    assert picked in note and all(key in note for key in others)


@pytest.mark.parametrize("name", ["a100-80gb", "A100 80GB", "l40", "rtx4090", "mi300x"])
def test_an_exact_or_unshared_name_needs_no_note(name) -> None:
    assert hardware.choice_note(name) is None


@pytest.mark.parametrize("spec", list_gpus(), ids=lambda spec: spec.key)
def test_table_invariants(spec: GPUSpec) -> None:
    fp32 = spec.vector_peak("fp32")
    assert spec.memory_bandwidth_bytes_per_s > 0
    assert fp32 > 0
    assert spec.vector_peak("fp64") <= fp32
    assert spec.vector_peak("fp16") >= fp32  # packed half2 is never slower than FP32
    # A tensor core that is slower than the vector units would be a unit mix-up (or sparse/dense).
    for precision, peak in spec.tensor_peak_flops_per_s.items():
        assert peak >= fp32, precision
    if "bf16" in spec.tensor_peak_flops_per_s and "fp16" in spec.tensor_peak_flops_per_s:
        assert spec.tensor_peak("bf16") == spec.tensor_peak("fp16")
    if spec.fp16_accumulate_fp16_flops_per_s is not None:
        assert spec.fp16_accumulate_fp16_flops_per_s > spec.tensor_peak("fp16")
    # the warm bound's L2 rate: a figure for every GPU, above HBM, at most 64 B/clk per SM or CU
    # at the boost clock (the rule that derives the unpublished ones)
    assert spec.l2_bandwidth_bytes_per_s is not None
    assert spec.l2_bandwidth > spec.memory_bandwidth_bytes_per_s
    assert spec.l2_bandwidth <= gpu_spec.L2_BYTES_PER_FP32_FLOP * fp32 * 1.01  # rounded peaks
    assert spec.launch_overhead_s == gpu_spec.DEFAULT_LAUNCH_OVERHEAD_S
    assert spec.source
    labels = {f"tensor.{p}" for p in spec.tensor_peak_flops_per_s}
    labels |= {f"vector.{p}" for p in spec.vector_peak_flops_per_s}
    labels |= {f.name for f in dataclasses.fields(spec)}
    assert set(spec.unconfirmed) <= labels


def test_unconfirmed_figures_are_marked() -> None:
    assert "sm_count" in get_gpu("a10g").unconfirmed
    assert "l2_bytes" in get_gpu("b200").unconfirmed
    # derived from 5.2 GT/s; the L2 rate from a per-clock figure NVIDIA prints for the A100 only
    assert get_gpu("h100").unconfirmed == ("memory_clock_mhz", "l2_bandwidth_bytes_per_s")
    # printed in the A100 whitepaper (5120 and, for the V100, 2048 bytes a clock): confirmed
    assert get_gpu("a100-80gb").l2_bandwidth == 5120 * 1410e6
    assert get_gpu("v100").l2_bandwidth == 2048 * 1530e6
    assert "l2_bandwidth_bytes_per_s" not in get_gpu("a100-80gb").unconfirmed


@pytest.mark.parametrize(("name", "cus", "l2_bytes_per_clock"),
                         [("mi250x", 110, 32 * 64), ("mi250", 104, 32 * 64),
                          ("mi210", 104, 32 * 64), ("mi300x", 304, 8 * 16 * 128)])
def test_cdna_entries_are_one_device_with_its_l2_channels(name, cus, l2_bytes_per_clock) -> None:
    spec = get_gpu(name)
    # one GCD (what torch sees as a device): CUs x 1024 FP16 FLOP/clk x 1.7 GHz on CDNA2
    assert spec.sm_count == cus
    if spec.architecture == "CDNA2":
        assert spec.tensor_peak("fp16") == pytest.approx(cus * 1024 * 1.7e9, rel=2e-3)
        assert spec.memory_bandwidth_bytes_per_s == 1638.4e9  # half of 3276.8 GB/s (MI250s)
    # channels x bytes per clock per channel x the boost clock
    assert spec.l2_bandwidth == l2_bytes_per_clock * spec.boost_clock_mhz * 1e6


def test_gpuspec_is_frozen_and_hashable() -> None:
    spec = get_gpu("h100")
    with pytest.raises(dataclasses.FrozenInstanceError):
        spec.memory_bandwidth_bytes_per_s = 1.0  # type: ignore[misc]
    assert hash(spec) == hash(get_gpu("H100 SXM"))


def test_peak_tables_are_read_only_and_specs_still_pickle() -> None:
    import pickle

    spec = dataclasses.replace(get_gpu("h100"), tensor_peak_flops_per_s={"fp16": 1e12})
    with pytest.raises(TypeError):
        spec.tensor_peak_flops_per_s["fp16"] = 2e12  # type: ignore[index]
    with pytest.raises(TypeError):
        get_gpu("h100").vector_peak_flops_per_s["fp32"] = 0.0  # type: ignore[index]
    copy = pickle.loads(pickle.dumps(spec))  # batch workers receive specs pickled
    assert copy == spec and copy.tensor_peak("fp16") == 1e12
    with pytest.raises(TypeError):
        copy.tensor_peak_flops_per_s["fp16"] = 2e12  # type: ignore[index]


@pytest.mark.parametrize(
    ("variant", "base", "differs"),
    [
        (
            "h200",
            "h100-sxm",
            {"memory_bytes", "memory_bandwidth_bytes_per_s", "memory_clock_mhz", "unconfirmed"},
        ),
        ("mi325x", "mi300x", {"memory_bytes", "memory_bandwidth_bytes_per_s"}),
        (
            "a100-40gb",
            "a100-80gb",
            {"memory_bytes", "memory_bandwidth_bytes_per_s", "memory_clock_mhz", "unconfirmed"},
        ),
        ("a100-pcie", "a100-80gb", {"memory_bandwidth_bytes_per_s", "memory_clock_mhz"}),
        ("v100-16gb", "v100", {"memory_bytes"}),
    ],
)
def test_variants_differ_from_their_base_only_in_memory(variant, base, differs) -> None:
    # H200 = H100 SXM's GH100 with HBM3e; MI325X = MI300X's CDNA3 with 256 GB; the A100s share GA100
    a, b = get_gpu(variant), get_gpu(base)
    ignored = {"name", "aliases", "source"}
    changed = {
        f.name
        for f in dataclasses.fields(GPUSpec)
        if f.name not in ignored and getattr(a, f.name) != getattr(b, f.name)
    }
    assert changed == differs


def test_lookup_indexes_the_table_once(monkeypatch: pytest.MonkeyPatch) -> None:
    hardware._index.cache_clear()
    built = []
    real = hardware._names
    monkeypatch.setattr(hardware, "_names", lambda spec: built.append(spec) or real(spec))
    for name in ("h100", "a100", "mi300x", "rtx 4090", "H200"):
        get_gpu(name)
    assert len(built) == len(list_gpus())  # every GPU's names read once, for the first lookup
    hardware._index.cache_clear()


def test_unknown_precision_key_is_rejected() -> None:
    with pytest.raises(ValueError, match="int4"):
        dataclasses.replace(get_gpu("h100"), tensor_peak_flops_per_s={"int4": 1.0})


def test_to_dict_is_json_serialisable() -> None:
    data = json.loads(json.dumps(get_gpu("h100").to_dict()))
    assert data["key"] == "h100-sxm"
    assert data["tensor_peak_flops_per_s"]["bf16"] == pytest.approx(989.4e12)
    assert data["aliases"] == ["h100", "h100-sxm5", "h100-80gb-hbm3", "h100-sxm5-80gb"]


def test_parse_kernelbench_specs() -> None:
    specs = parse_kernelbench_specs(KERNELBENCH_TABLE)
    assert set(specs) == {"H100", "Future GPU", "T4-like"}  # no parsable bandwidth: dropped

    h100 = specs["H100"]
    assert h100.memory_bandwidth_bytes_per_s == pytest.approx(3.35e12)
    assert h100.memory_bytes == 80 * 10**9
    assert h100.tensor_peak("tf32") == pytest.approx(494.5e12)  # sparse only: halved
    assert h100.tensor_peak("bf16") == pytest.approx(989.5e12)
    assert h100.tensor_peak("int8") == pytest.approx(1979e12)
    assert h100.vector_peak_flops_per_s == {"fp64": pytest.approx(34e12), "fp32": 67e12}
    assert set(h100.tensor_peak_flops_per_s) == {"tf32", "bf16", "int8"}  # FP64 TC: no slot
    assert h100.vendor == "NVIDIA"
    assert {"l2_bytes", "sm_count"} <= set(h100.unconfirmed)

    future = specs["Future GPU"]
    assert future.memory_bandwidth_bytes_per_s == pytest.approx(1555e9)
    assert future.tensor_peak("tf32") == pytest.approx(156e12)  # dense first figure
    assert future.tensor_peak("fp8") == pytest.approx(4600e12)
    assert not future.has_tensor("fp16")  # unparsable value skipped
    assert future.architecture == "CDNA4"
    assert future.vendor == "AMD"
    assert future.sm_count == 256
    assert future.l2_bytes == 6 * 2**20
    assert future.memory_bytes == 16 * 10**9
    assert future.key == "future-gpu"

    t4 = specs["T4-like"]
    assert t4.vector_peak("fp32") == pytest.approx(8.1e12)
    assert t4.tensor_peak_flops_per_s == {"fp16": pytest.approx(65e12), "int8": 130e12}


@pytest.fixture
def fresh_tables():
    """The GPU tables are read once per process; these tests change what they read."""
    caches = (hardware._all_gpus, hardware._index, kernelbench_gpus._kernelbench_specs)
    for cache in caches:
        cache.cache_clear()
    yield
    for cache in caches:
        cache.cache_clear()


def test_builtin_wins_on_collision(monkeypatch: pytest.MonkeyPatch, fresh_tables) -> None:
    parsed = parse_kernelbench_specs(KERNELBENCH_TABLE)
    monkeypatch.setattr(kernelbench_gpus, "load_kernelbench_gpus", lambda: parsed)
    assert get_gpu("H100").tensor_peak("bf16") == pytest.approx(989.4e12)  # not 989.5e12
    assert get_gpu("future gpu") is parsed["Future GPU"]
    keys = [spec.key for spec in list_gpus()]
    assert keys.count("h100-sxm") == 1
    assert "h100" not in keys
    assert keys[-2:] == ["future-gpu", "t4-like"]


def test_load_kernelbench_gpus_without_kernelbench(
    monkeypatch: pytest.MonkeyPatch, fresh_tables
) -> None:
    def missing(name: str) -> None:
        raise ModuleNotFoundError(name)

    monkeypatch.setattr(kernelbench_gpus.importlib, "import_module", missing)
    assert kernelbench_gpus.load_kernelbench_gpus() == {}


def test_every_gpus_sources_live_in_the_repository() -> None:
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    listed = (root / "docs" / "gpu_sources.md").read_text(encoding="utf-8")
    for spec in list_gpus():
        if not spec.source.startswith("KernelBench"):
            assert f"{spec.name}" in listed, spec.name
    for path in (root / "src" / "torchroofline").rglob("*.py"):
        assert "shared/" not in path.read_text(encoding="utf-8"), path


# --- FP4 / FP6 peaks ---------------------------------------------------------------------------

_FP4_GPUS = ("b200", "gb200", "b300", "gb300", "rtx5090", "rtx-pro-6000", "mi350x", "mi355x")


@pytest.mark.parametrize("name", _FP4_GPUS)
def test_blackwell_and_cdna4_parts_have_dense_fp4_peaks(name: str) -> None:
    spec = get_gpu(name)
    fp4, fp8 = spec.tensor_peak("fp4"), spec.tensor_peak("fp8")
    # FP4 runs at 2x (Blackwell, CDNA4) to 4x (GeForce/PRO Blackwell against its FP32-accumulate
    # FP8 row; Blackwell Ultra: 3x) the FP8 rate, never more: a sparse figure read as dense
    # would show as 8x against a dense FP8 figure
    assert 2 * fp8 <= fp4 <= 4 * fp8
    if spec.has_tensor("fp6"):
        assert fp8 <= spec.tensor_peak("fp6") <= fp4


def test_fp4_closed_forms() -> None:
    # HGX B200 datasheet: FP4 18 PF and FP8 9 PF, both with sparsity -> dense 9 and 4.5 PF; the
    # same 148 SMs run FP4 at twice the FP8 rate per clock
    b200 = get_gpu("b200")
    assert b200.tensor_peak("fp4") == pytest.approx(9000e12) == 2 * b200.tensor_peak("fp8")
    assert b200.tensor_peak("fp6") == b200.tensor_peak("fp8")
    # RTX 5090: "3352 AI TOPS" is FP4 with sparsity; dense = 170 SMs x 4096 FLOP/clk x 2.407 GHz
    assert get_gpu("rtx5090").tensor_peak("fp4") == pytest.approx(3352e12 / 2, rel=1e-3)
    assert get_gpu("rtx5090").tensor_peak("fp4") == pytest.approx(170 * 4096 * 2.407e9, rel=1e-3)
    # MI355X: MXFP4 at 16384 FLOP/clk/CU, 256 CUs at 2.4 GHz
    assert get_gpu("mi355x").tensor_peak("fp4") == pytest.approx(256 * 16384 * 2.4e9, rel=1e-4)


@pytest.mark.parametrize("name", ["h100", "a100", "rtx4090", "mi300x", "h20", "l40s"])
def test_parts_without_fp4_tensor_cores_have_no_fp4_peak(name: str) -> None:
    spec = get_gpu(name)
    assert not spec.has_tensor("fp4") and not spec.has_tensor("fp6")
    with pytest.raises(PrecisionError, match="no fp4 tensor cores"):
        spec.tensor_peak("fp4")


@pytest.mark.parametrize(
    "name", ["b300", "gb200", "gb300", "h20", "rtx 5090", "RTX PRO 6000 Blackwell", "rtx-pro-6000"]
)
def test_new_parts_resolve(name: str) -> None:
    assert get_gpu(name).name in {"B300", "GB200", "GB300", "H20", "RTX 5090", "RTX PRO 6000"}


# --- the table's figures against docs/gpu_sources.md -------------------------------------------


def _doc_table(header: str) -> dict[str, list[str]]:
    """Rows of the markdown table in docs/gpu_sources.md that starts with ``header``, keyed by
    their first cell."""
    from pathlib import Path

    text = (Path(__file__).resolve().parents[2] / "docs" / "gpu_sources.md").read_text(
        encoding="utf-8"
    )
    lines = text[text.index(header) :].splitlines()[2:]
    rows = {}
    for line in lines:
        if not line.startswith("|"):
            break
        cells = [cell.strip() for cell in line.strip("|").split("|")]
        rows[cells[0]] = cells[1:]
    return rows


def _cell(value: float | None, scale: float = 1.0) -> str:
    return "—" if value is None else f"{value / scale:g}"


def _builtin() -> list[GPUSpec]:
    return [spec for spec in list_gpus() if not spec.source.startswith("KernelBench")]


def test_every_fp4_and_fp6_figure_has_a_source_row() -> None:
    rows = _doc_table("| GPU | FP6 | FP4 |")
    with_fp4 = {spec.name for spec in _builtin() if spec.has_tensor("fp4")}
    assert set(rows) == with_fp4
    for spec in _builtin():
        if spec.name in rows:
            fp6 = spec.tensor_peak_flops_per_s.get("fp6")
            assert rows[spec.name][:2] == [_cell(fp6, 1e12), _cell(spec.tensor_peak("fp4"), 1e12)]
            assert rows[spec.name][2], spec.name  # the sources


def test_every_clock_has_a_source_row() -> None:
    rows = _doc_table("| GPU | boost MHz | tensor MHz | memory MHz |")
    assert set(rows) == {spec.name for spec in _builtin()}
    for spec in _builtin():
        clocks = [spec.boost_clock_mhz, spec.tensor_clock_mhz, spec.memory_clock_mhz]
        assert rows[spec.name][:3] == [_cell(clock) for clock in clocks], spec.name
        assert rows[spec.name][3] or spec.boost_clock_mhz is None, spec.name


# --- locked clocks -----------------------------------------------------------------------------


def test_locked_clock_scales_peaks_by_clock_ratio() -> None:
    b200 = get_gpu("b200")
    locked = b200.at_clocks(1500)
    # tensor figures are the per-clock rate at the 1860 MHz tensor clock, vector figures at the
    # 1980 MHz boost: at 1,500 MHz each is its figure x 1500 / its clock
    assert locked.tensor_peak("fp16") == pytest.approx(2250e12 * 1500 / 1860)
    assert locked.tensor_peak("fp4") == pytest.approx(9000e12 * 1500 / 1860)
    assert locked.vector_peak("fp32") == pytest.approx(80e12 * 1500 / 1980)
    assert locked.memory_bandwidth_bytes_per_s == b200.memory_bandwidth_bytes_per_s
    assert locked.clocks == {
        "clock_mhz": 1500,
        "boost_clock_mhz": 1980,
        "memory_clock_mhz": None,
        "nominal_memory_clock_mhz": None,
    }
    # a part whose tensor figures assume its boost clock scales both by clock / boost
    a100 = get_gpu("a100").at_clocks(1200)
    assert a100.tensor_peak("bf16") == pytest.approx(312e12 * 1200 / 1410)
    # locking again scales from the clock the peaks hold now, not from the nominal one twice
    assert b200.at_clocks(1800).at_clocks(1500).tensor_peak("fp16") == pytest.approx(
        locked.tensor_peak("fp16")
    )


def test_locked_memory_clock_scales_bandwidth() -> None:
    # H100 SXM: 3350 GB/s at 2619 MHz (HBM3, 5120 bits x 2 x 2619 MT/s / 8 = 3352 GB/s)
    h100 = get_gpu("h100").at_clocks(memory_clock_mhz=1600)
    assert h100.memory_bandwidth_bytes_per_s == pytest.approx(3350e9 * 1600 / 2619)
    assert h100.tensor_peak("bf16") == get_gpu("h100").tensor_peak("bf16")
    assert h100.clocks["memory_clock_mhz"] == 1600
    assert h100.clocks["nominal_memory_clock_mhz"] == 2619


@pytest.mark.parametrize(
    ("gpu", "clock", "memory_clock", "message"),
    [
        ("b200", 2100, None, "at most its boost clock 1980 MHz"),
        ("b200", 0, None, "above 0"),
        ("b200", -5, None, "above 0"),
        ("b300", 1500, None, "no boost clock for the B300"),
        ("h100", None, 3000, "at most its memory clock 2619 MHz"),
        ("b200", None, 2000, "no memory clock for the B200"),
    ],
)
def test_bad_clocks_are_one_line_errors(gpu, clock, memory_clock, message) -> None:
    with pytest.raises(ClockError, match=message) as error:
        get_gpu(gpu).at_clocks(clock, memory_clock)
    assert "\n" not in str(error.value)


# --- the fp4 rung and locked clocks, end to end ------------------------------------------------

_N = 4096


class _MatMul(torch.nn.Module):
    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return a @ b


def _square_matmul(gpu: str, **options) -> Result:
    inputs = (torch.empty(_N, _N, device="meta"), torch.empty(_N, _N, device="meta"))
    return analyze(_MatMul(), inputs, gpu, "fp32", **options)


@pytest.fixture(scope="module")
def b200_matmul() -> Result:
    return _square_matmul("b200")


def test_fp4_rung_of_a_4096_cubed_matmul_on_b200(b200_matmul: Result) -> None:
    ladder = b200_matmul.sol_by_math_s
    flops = 2 * _N**3
    compulsory_bytes = 3 * _N**2 * 4  # fp32 A and B read, C written: the rungs keep the dtypes
    memory_s = compulsory_bytes / 8000e9
    # fp8: 2N^3 / 4.5 PFLOP/s = 30.5 us (compute-bound); fp4: 2N^3 / 9 PFLOP/s = 15.3 us of
    # compute under the 25.2 us the fp32 bytes take, so the fp4 rung is the memory time
    assert ladder["fp8"] == pytest.approx(flops / 4500e12)
    assert ladder["fp4"] == pytest.approx(max(flops / 9000e12, memory_s)) == pytest.approx(memory_s)
    assert list(ladder)[-2:] == ["fp8", "fp4"]


def test_no_fp4_rung_without_fp4_tensor_cores() -> None:
    assert math_rungs(get_gpu("h100")) == ("program", "tf32", "bf16", "fp16", "fp8")
    assert math_rungs(get_gpu("b200"))[-1] == "fp4"
    assert math_rungs(get_gpu("mi355x"))[-1] == "fp4"


def test_fp4_math_without_fp4_tensor_cores_is_the_fp8_rung() -> None:
    # H100 has no FP4 tensor cores: FP4 math runs on its fp8 unit, so the fp4 bound is the fp8
    # bound, 2N³ / 1,979 TFLOP/s = 69.4 µs (over the 60.1 µs the fp32 bytes take at 3.35 TB/s),
    # and the ladder lists it because the analysis chose it
    result = _square_matmul("h100", math="fp4")
    ladder = result.sol_by_math_s
    assert list(ladder)[-2:] == ["fp8", "fp4"]
    assert ladder["fp4"] == ladder["fp8"] == result.sol_s
    assert ladder["fp8"] == pytest.approx(2 * _N**3 / get_gpu("h100").tensor_peak("fp8"))
    assert result.to_dict()["time_ms"]["sol_by_math"]["fp4"] == result.sol_ms
    # re-priced at the program's math, the repeated rung is gone again
    assert "fp4" not in result.on("h100", math="program").sol_by_math_s


def test_analyze_at_a_locked_clock(b200_matmul: Result) -> None:
    locked = _square_matmul("b200", clock_mhz=1500)
    flops = 2 * _N**3
    # program rung: fp32 on the CUDA cores at 80 TFLOP/s x 1500/1980 (boost);
    # fp8 rung: 4.5 PFLOP/s x 1500/1860 (the tensor clock the datasheet figure assumes)
    assert locked.sol_by_math_s["program"] == pytest.approx(flops / (80e12 * 1500 / 1980))
    assert locked.sol_by_math_s["fp8"] == pytest.approx(flops / (4500e12 * 1500 / 1860))
    assert locked.sol_by_math_s["fp8"] / b200_matmul.sol_by_math_s["fp8"] == pytest.approx(
        1860 / 1500
    )
    data = locked.to_dict()
    assert data["gpu_clocks"] == {
        "clock_mhz": 1500,
        "boost_clock_mhz": 1980,
        "memory_clock_mhz": None,
        "nominal_memory_clock_mhz": None,
    }
    assert b200_matmul.to_dict()["gpu_clocks"]["clock_mhz"] == 1980
    assert "Locked: SM clock 1500 MHz (nominal 1980)" in locked.format()
    assert "Locked" not in b200_matmul.format()
    assert "(B200 at SM clock 1500 MHz (nominal 1980), fp32" in format_prompt(locked)
    assert "(B200, fp32" in format_prompt(b200_matmul)


def test_cli_clock_options(capsys) -> None:
    problem = "examples/kernelbench/level1/1_Square_matrix_multiplication_.py"
    code = main(["analyze", problem, "--gpu", "h100", "--mem-clock-mhz", "1600", "--json"])
    data = json.loads(capsys.readouterr().out)
    assert code == 0
    assert data["gpu_clocks"]["memory_clock_mhz"] == 1600
    # 3 fp32 4096x4096 matrices at 3350 GB/s x 1600/2619
    assert data["time_ms"]["memory_sol"] == pytest.approx(
        3 * _N**2 * 4 / (3350e9 * 1600 / 2619) * 1e3
    )
    code = main(["analyze", problem, "--gpu", "b200", "--clock-mhz", "2500"])
    err = capsys.readouterr().err
    assert code == 2
    assert "at most its boost clock 1980 MHz" in err and len(err.strip().splitlines()) == 1
