"""The metrics of an Nsight Compute --csv report (tests/gpu/ncu_*.sh): per profiled kernel (by its
ID, in launch order) a dict metric name -> value, and the kernel's name cut to `width`."""
import csv


def read(path, width=44):
    rows = list(csv.DictReader([l for l in open(path) if l.startswith('"')]))
    metrics, names = {}, {}
    for r in rows:
        try:
            metrics.setdefault(r["ID"], {})[r["Metric Name"]] = float(r["Metric Value"].replace(",", ""))
        except ValueError:
            pass
        names[r["ID"]] = r["Kernel Name"][:width]
    return metrics, names


def print_memory_kernels(path, labels, rest):
    """A memory-bound kernel's summary per profiled kernel of the report at path (launch order):
    its label (labels[n], else `rest`), time, DRAM bytes and rate, the stall reasons of at least
    0.05 per issue, the L2 / L1 counters and the occupancy and throughput sections' values."""
    k, names = read(path)
    for n, i in enumerate(sorted(k, key=int)):
        m = k[i]
        t = m.get("gpu__time_duration.sum", 0) * 1e-3
        label = labels[n] if n < len(labels) else rest
        rd, wr = m.get("dram__bytes_read.sum", 0) / 1e6, m.get("dram__bytes_write.sum", 0) / 1e6
        print(f"== {label} ({names[i]}): {t:.1f} us, DRAM {rd:.1f} MB read {wr:.1f} MB written, "
              f"{(rd + wr) / t * 1e3 if t else 0:.0f} GB/s")
        for name, val in sorted(m.items()):
            if name.startswith("smsp__average_warps_issue_stalled") and val >= 0.05:
                print(f"   {name[34:-23]:60s} {val:12.2f}")
            elif name.startswith(("sm__inst_executed_pipe_", "sm__pipe_")) and val >= 1:
                print(f"   {name:60s} {val:12.2f}")
            elif name.startswith(("lts__", "l1tex__")) or name == "smsp__inst_executed.sum" \
                    or "Warp Cycles" in name or "Throughput" in name or "Occupancy" in name \
                    or "Registers" in name or "Eligible" in name or "Waves" in name:
                print(f"   {name:60s} {val:12.2f}")
