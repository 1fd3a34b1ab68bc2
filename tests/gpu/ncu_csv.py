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
