"""Collectives in public profiler traces against their bound: no NCCL/RCCL kernel may run
faster than the interconnect bound of price/distributed.py. Each ``nccl:*`` annotation of a
PyTorch profiler trace is joined to the NCCL kernel it launched (a runtime launch inside it, by
correlation); its size is the annotation's input (nccl-tests' size: the buffer of an
all-reduce or broadcast, the send buffer of an all-to-all); its group is the trace's world
(``distributedInfo``), on one node (the traces come from single 8-GPU nodes). Prints, per trace
and kind, the count and the smallest measured ÷ bound (below 1 would be a broken bound).

    python benchmarks/validate_collectives.py TRACE.json.gz [...] --gpu a100-80gb
"""

import argparse
import gzip
import json
from collections import defaultdict

from torchroofline.price.distributed import collective_sol_s
from torchroofline.price.interconnect import interconnect_for
from torchroofline.trace.distributed import CollectiveCall

#: profiler input type → bytes per element
TYPE_BYTES = {"float": 4, "c10::BFloat16": 2, "c10::Half": 2, "int": 4, "long int": 8,
              "double": 8, "unsigned char": 1, "signed char": 1, "bool": 1}
#: annotation name → collective kind
KINDS = {"nccl:all_reduce": "all_reduce", "nccl:all_to_all": "all_to_all",
         "nccl:broadcast": "broadcast", "nccl:all_gather": "all_gather",
         "nccl:_all_gather_base": "all_gather", "nccl:reduce_scatter": "reduce_scatter",
         "nccl:_reduce_scatter_base": "reduce_scatter"}


def collectives(path: str) -> tuple[int, list[tuple[str, int, float]]]:
    """The trace's world and (kind, size in bytes, kernel µs) of each joined collective."""
    with gzip.open(path, "rt") if path.endswith(".gz") else open(path) as handle:
        trace = json.load(handle)
    events = trace["traceEvents"]
    world = trace.get("distributedInfo", {}).get("world_size", 8)
    kernels = {e["args"].get("correlation"): e for e in events
               if e.get("cat") == "kernel" and "nccl" in e.get("name", "").lower()}
    launches = [e for e in events if e.get("cat") == "cuda_runtime"
                and e.get("args", {}).get("correlation") in kernels]
    found = []
    for note in (e for e in events if e.get("name") in KINDS):
        inside = [k for k in launches if k["tid"] == note["tid"]
                  and note["ts"] <= k["ts"] <= note["ts"] + note["dur"]]
        dims, types = note["args"].get("Input Dims", []), note["args"].get("Input type", [])
        if not inside or not dims or types[0] not in TYPE_BYTES:
            continue
        elements = 1
        for size in dims[0]:
            elements *= size
        kernel = kernels[inside[0]["args"]["correlation"]]
        found.append((KINDS[note["name"]], elements * TYPE_BYTES[types[0]], kernel["dur"]))
    return world, found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("traces", nargs="+")
    parser.add_argument("--gpu", required=True)
    args = parser.parse_args()
    net = interconnect_for(args.gpu)
    for path in args.traces:
        world, found = collectives(path)
        ratios: dict[str, list[float]] = defaultdict(list)
        for kind, size, measured_us in found:
            call = CollectiveCall(0, kind, kind, size, "", world, 1, world, "", "")
            ratios[kind].append(measured_us * 1e-6 / collective_sol_s(call, net, world))
        for kind, values in sorted(ratios.items()):
            print(f"{path.rsplit('/', 1)[-1]}  {kind:<11} {len(values):>3} collectives on "
                  f"{world} ranks, measured / bound: min {min(values):,.1f}, "
                  f"median {sorted(values)[len(values) // 2]:,.1f}")


if __name__ == "__main__":
    main()
