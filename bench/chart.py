#!/usr/bin/env python3
"""bench/chart.py — SVG charts of a benchmark results JSON (bench/run.py's schema), no third-party
packages: hand-written SVG.

  python3 bench/chart.py RESULTS.json [--out DIR]   writes DIR/bars.svg and DIR/roofline.svg

bars.svg: one panel per kernel, per shape a group of bars (ours, the baseline, each peer): GB/s
for memory-bound kernels, TFLOP/s for tensor-core ones, with the measured ceiling as a dashed
line; a red cross where a row failed its check (it has no time). roofline.svg: every verified row
at its arithmetic intensity (FLOP per minimum byte) and achieved TFLOP/s, under the roof drawn from
the ceilings measured in the same run.
"""
import argparse
import json
import math
import os
import sys
from xml.sax.saxutils import escape

IMPL_ORDER = ["tilec", "baseline", "cublas", "torch-sdpa-flash", "torch-sdpa-cudnn", "torch-flex", "torch"]
COLORS = {"tilec": "#d62728", "baseline": "#1f77b4", "cublas": "#2ca02c", "torch-sdpa-flash": "#ff7f0e",
          "torch-sdpa-cudnn": "#9467bd", "torch-flex": "#8c564b", "torch": "#7f7f7f"}
TENSOR_CORE = ("gemm", "attention", "attention_gqa", "attention_backward")
MARKERS = ["circle", "square", "triangle", "diamond", "cross", "star"]


def shape_label(r):
    s, k = r["shape"], r["kernel"]
    if k in ("attention", "attention_gqa", "attention_backward"):
        w = f" W{s['W']}" if s.get("W") else ""
        return f"N{s['N']} d{s['D']}{w}{' c' if r.get('causal') else ''} {r['dtype']}"
    if k == "gemm":
        return f"{s['M']}x{s['N']}x{s['K']} {r['dtype']}"
    if k == "vadd":
        return f"N={s['N']}"
    return f"{s['M']}x{s['N']} {r['dtype']}"


def best_rows(res):
    """{kernel: {label: {impl: row}}}: per impl the fastest verified row (tilec variants), else a
    failed one so the failure shows."""
    out = {}
    for r in res.get("rows", []):
        g = out.setdefault(r["kernel"], {}).setdefault(shape_label(r), {})
        cur = g.get(r["impl"])
        ok = r.get("verified") and r.get("median_ms")
        if cur is None or (ok and (not cur.get("verified") or not cur.get("median_ms") or
                                   r["median_ms"] < cur["median_ms"])):
            g[r["impl"]] = r
    return out


def metric(kernel, r):
    v = r.get("tflops") if kernel in TENSOR_CORE else r.get("gbps")
    return v if (r.get("verified") and v) else None


def nice_max(v):
    if v <= 0:
        return 1.0
    e = 10 ** math.floor(math.log10(v))
    for m in (1, 1.2, 1.5, 2, 2.5, 3, 4, 5, 6, 8, 10):
        if m * e >= v:
            return m * e
    return 10 * e


def text(x, y, s, size=11, anchor="start", rotate=None, color="#222", weight="normal"):
    tr = f' transform="rotate({rotate} {x:.1f} {y:.1f})"' if rotate is not None else ""
    return (f'<text x="{x:.1f}" y="{y:.1f}" font-size="{size}" text-anchor="{anchor}" fill="{color}" '
            f'font-weight="{weight}"{tr}>{escape(str(s))}</text>')


def bars_svg(res):
    ce = res.get("ceilings") or {}
    groups = best_rows(res)
    bar_w, bar_gap, group_gap = 9, 1, 16
    left, right, top_pad, plot_h, bottom = 70, 150, 52, 200, 110
    panels, width = [], 900
    for kernel, cases in groups.items():
        impls = [i for i in IMPL_ORDER if any(i in g for g in cases.values())]
        impls += sorted({i for g in cases.values() for i in g} - set(impls))
        gw = len(impls) * (bar_w + bar_gap) + group_gap
        w = left + right + max(1, len(cases)) * gw
        width = max(width, w)
        panels.append((kernel, cases, impls, gw))
    y0 = 50
    body = []
    for kernel, cases, impls, gw in panels:
        unit = "TFLOP/s" if kernel in TENSOR_CORE else "GB/s"
        ceiling = ce.get("gemm_bf16_tflops") if kernel in TENSOR_CORE else ce.get("copy_gbps")
        vals = [metric(kernel, r) for g in cases.values() for r in g.values()]
        vals = [v for v in vals if v]
        vmax = nice_max(max(vals + ([ceiling] if ceiling else []) + [1e-9]))
        top = y0 + top_pad
        base = top + plot_h
        body.append(text(left, y0 + 18, f"{kernel} ({unit}, higher is better)", 14, weight="bold"))
        x = left
        lx = left
        for impl in impls:  # legend, on its own line under the title
            body.append(f'<rect x="{lx}" y="{y0 + 28}" width="10" height="10" fill="{COLORS.get(impl, "#444")}"/>')
            body.append(text(lx + 14, y0 + 37, impl, 10))
            lx += 24 + 6.5 * len(impl)
        for k in range(5):  # y grid
            v = vmax * k / 4
            y = base - plot_h * k / 4
            body.append(f'<line x1="{left}" y1="{y:.1f}" x2="{left + len(cases) * gw}" y2="{y:.1f}" stroke="#ddd"/>')
            body.append(text(left - 6, y + 4, f"{v:.4g}", 10, "end"))
        if ceiling:
            y = base - plot_h * ceiling / vmax
            body.append(f'<line x1="{left}" y1="{y:.1f}" x2="{left + len(cases) * gw}" y2="{y:.1f}" '
                        f'stroke="#000" stroke-dasharray="5,4"/>')
            what = "cuBLAS bf16 GEMM" if kernel in TENSOR_CORE else "device copy"
            body.append(text(left + len(cases) * gw + 4, y + 4, f"{what} {ceiling:.0f}", 10))
        for label, g in cases.items():
            for i, impl in enumerate(impls):
                bx = x + i * (bar_w + bar_gap)
                r = g.get(impl)
                if r is None:
                    continue
                v = metric(kernel, r)
                if v:
                    h = plot_h * v / vmax
                    tip = f"{impl} {r.get('variant') or ''} {label}: {v:.4g} {unit}, {r['median_ms']:.4f} ms"
                    body.append(f'<rect x="{bx:.1f}" y="{base - h:.1f}" width="{bar_w}" height="{h:.1f}" '
                                f'fill="{COLORS.get(impl, "#444")}"><title>{escape(tip)}</title></rect>')
                else:
                    cx = bx + bar_w / 2
                    body.append(f'<path d="M{cx - 4:.1f},{base - 12:.1f} l8,8 m0,-8 l-8,8" stroke="#d00" '
                                f'stroke-width="2"><title>{escape(impl + " " + label + ": " + str(r.get("status")))}'
                                f'</title></path>')
            body.append(text(x + gw / 2 - group_gap / 2, base + 10, label, 10, "end", rotate=-45))
            x += gw
        body.append(f'<line x1="{left}" y1="{base}" x2="{x}" y2="{base}" stroke="#444"/>')
        y0 = base + bottom
    head = (f"{res.get('gpu', '?')} — commit {res.get('commit', '?')} — {res.get('date', '?')} — "
            f"copy {ce.get('copy_gbps') or '?'} GB/s, bf16 GEMM {ce.get('gemm_bf16_tflops') or '?'} TFLOP/s")
    return svg_doc(width, y0, [text(10, 24, "tilec benchmark: per-shape bars", 16, weight="bold"),
                               text(10, 40, head, 11)] + body)


def svg_doc(w, h, body):
    return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{w:.0f}" height="{h:.0f}" '
            f'viewBox="0 0 {w:.0f} {h:.0f}" font-family="sans-serif">\n'
            f'<rect width="100%" height="100%" fill="white"/>\n' + "\n".join(body) + "\n</svg>\n")


def marker(shape, x, y, color, tip):
    t = f"<title>{escape(tip)}</title>"
    if shape == "circle":
        return f'<circle cx="{x:.1f}" cy="{y:.1f}" r="4.5" fill="{color}" fill-opacity="0.8">{t}</circle>'
    if shape == "square":
        return f'<rect x="{x - 4:.1f}" y="{y - 4:.1f}" width="8" height="8" fill="{color}" fill-opacity="0.8">{t}</rect>'
    if shape == "triangle":
        return f'<path d="M{x:.1f},{y - 5:.1f} l5,9 h-10 z" fill="{color}" fill-opacity="0.8">{t}</path>'
    if shape == "diamond":
        return f'<path d="M{x:.1f},{y - 5:.1f} l5,5 l-5,5 l-5,-5 z" fill="{color}" fill-opacity="0.8">{t}</path>'
    if shape == "cross":
        return f'<path d="M{x - 4:.1f},{y - 4:.1f} l8,8 m0,-8 l-8,8" stroke="{color}" stroke-width="2.5">{t}</path>'
    return f'<path d="M{x:.1f},{y - 5:.1f} l1.5,3.5 h3.5 l-3,2.2 l1.2,3.8 l-3.2,-2.3 l-3.2,2.3 l1.2,-3.8 l-3,-2.2 h3.5 z" fill="{color}">{t}</path>'


def roofline_svg(res):
    ce = res.get("ceilings") or {}
    bw, peak = ce.get("copy_gbps"), ce.get("gemm_bf16_tflops")
    pts = []
    for kernel, cases in best_rows(res).items():
        for label, g in cases.items():
            for impl, r in g.items():
                if not (r.get("verified") and r.get("median_ms") and r.get("flops") and r.get("bytes")):
                    continue
                ai = r["flops"] / r["bytes"]
                perf = r["flops"] / (r["median_ms"] * 1e-3) / 1e12
                pts.append((kernel, impl, label, ai, perf, r))
    W, H, L, R, T, B = 860, 560, 80, 220, 50, 60
    pw, ph = W - L - R, H - T - B
    xs = [p[3] for p in pts] or [1.0]
    ys = [p[4] for p in pts] or [1.0]
    xmin = 10 ** math.floor(math.log10(max(1e-3, min(xs) / 2)))
    xmax = 10 ** math.ceil(math.log10(max(xs) * 2))
    ymin = 10 ** math.floor(math.log10(max(1e-4, min(ys) / 2)))
    ymax = 10 ** math.ceil(math.log10(max(ys + [peak or 1]) * 1.5))
    lx0, lx1, ly0, ly1 = map(math.log10, (xmin, xmax, ymin, ymax))
    X = lambda v: L + pw * (math.log10(v) - lx0) / (lx1 - lx0)  # noqa: E731
    Y = lambda v: T + ph * (1 - (math.log10(v) - ly0) / (ly1 - ly0))  # noqa: E731
    body = [text(10, 24, "tilec benchmark: roofline (measured ceilings of this run)", 16, weight="bold"),
            text(10, 40, f"{res.get('gpu', '?')} — commit {res.get('commit', '?')} — copy {bw or '?'} GB/s, "
                         f"bf16 GEMM {peak or '?'} TFLOP/s", 11)]
    for e in range(int(lx0), int(lx1) + 1):
        x = X(10 ** e)
        body.append(f'<line x1="{x:.1f}" y1="{T}" x2="{x:.1f}" y2="{T + ph}" stroke="#e4e4e4"/>')
        body.append(text(x, T + ph + 16, f"{10 ** e:g}", 10, "middle"))
    for e in range(int(ly0), int(ly1) + 1):
        y = Y(10 ** e)
        body.append(f'<line x1="{L}" y1="{y:.1f}" x2="{L + pw}" y2="{y:.1f}" stroke="#e4e4e4"/>')
        body.append(text(L - 6, y + 4, f"{10 ** e:g}", 10, "end"))
    body.append(f'<rect x="{L}" y="{T}" width="{pw}" height="{ph}" fill="none" stroke="#444"/>')
    body.append(text(L + pw / 2, H - 18, "arithmetic intensity (FLOP per minimum byte moved)", 12, "middle"))
    body.append(text(22, T + ph / 2, "TFLOP/s", 12, "middle", rotate=-90))
    if bw and peak:
        # roof: perf = min(bw * ai, peak), sampled on a log grid and clipped to the plot
        path = []
        n = 200
        for i in range(n + 1):
            ai = 10 ** (lx0 + (lx1 - lx0) * i / n)
            p = min(bw * ai / 1e3, peak)
            if ymin <= p <= ymax:
                path.append(f"{'M' if not path else 'L'}{X(ai):.1f},{Y(p):.1f}")
        body.append(f'<path d="{" ".join(path)}" fill="none" stroke="#000" stroke-width="2"/>')
        knee = peak * 1e3 / bw
        if xmin <= knee <= xmax:
            body.append(text(X(knee), Y(peak) - 6, f"ridge {knee:.0f} FLOP/B", 10, "middle"))
    kernels = sorted({p[0] for p in pts})
    shape_of = {k: MARKERS[i % len(MARKERS)] for i, k in enumerate(kernels)}
    for kernel, impl, label, ai, perf, r in pts:
        tip = f"{kernel} {label} {impl} {r.get('variant') or ''}: {perf:.4g} TFLOP/s at {ai:.3g} FLOP/B"
        body.append(marker(shape_of[kernel], X(ai), Y(perf), COLORS.get(impl, "#444"), tip))
    ly = T + 10
    for impl in [i for i in IMPL_ORDER if any(p[1] == i for p in pts)]:
        body.append(f'<rect x="{L + pw + 20}" y="{ly}" width="10" height="10" fill="{COLORS[impl]}"/>')
        body.append(text(L + pw + 36, ly + 9, impl, 11))
        ly += 18
    ly += 10
    for k in kernels:
        body.append(marker(shape_of[k], L + pw + 25, ly + 5, "#444", k))
        body.append(text(L + pw + 36, ly + 9, k, 11))
        ly += 18
    return svg_doc(W, H, body)


def write_charts(res, out):
    os.makedirs(out, exist_ok=True)
    paths = []
    for name, fn in (("bars.svg", bars_svg), ("roofline.svg", roofline_svg)):
        p = os.path.join(out, name)
        with open(p, "w") as f:
            f.write(fn(res))
        paths.append(p)
    return paths


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("results", help="results JSON from bench/run.py")
    ap.add_argument("--out", help="folder for the SVGs (default: the JSON's folder)")
    a = ap.parse_args()
    with open(a.results) as f:
        res = json.load(f)
    for p in write_charts(res, a.out or os.path.dirname(os.path.abspath(a.results))):
        print(p)
    return 0


if __name__ == "__main__":
    sys.exit(main())
