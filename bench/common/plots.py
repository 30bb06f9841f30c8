"""PNG plots from result rows (matplotlib, Agg backend); skipped if it is missing."""

import os
import re


def _plt():
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        return plt
    except ImportError:
        return None


def _series(rows, param, unit_test):
    """{(workload, system, metric): [(x, value), ...]} for rows with params[param]."""
    out = {}
    for r in rows:
        p = r.get("params") or {}
        if param in p and r["value"] is not None and unit_test(r["unit"]):
            key = (r["workload"], r["system"], r["metric"], r["unit"])
            out.setdefault(key, []).append((p[param], r["value"]))
    return {k: sorted(v) for k, v in out.items()}


def _plot(series, path, xlabel, title, xfmt=None, xscale=None, ticks=None, diagonal=False):
    plt = _plt()
    if plt is None or not series:
        return None
    workloads = sorted({k[0] for k in series})
    cols = min(len(workloads), 3)
    nrows = -(-len(workloads) // cols)
    fig, axes = plt.subplots(nrows, cols, figsize=(6 * cols, 4.2 * nrows), squeeze=False)
    for ax in axes.flat[len(workloads):]:
        ax.set_visible(False)
    for ax, w in zip(axes.flat, workloads):
        for (wl, system, metric, unit), pts in sorted(series.items()):
            if wl != w:
                continue
            xs = [xfmt(x) if xfmt else x for x, _ in pts]
            ax.plot(xs, [v for _, v in pts], marker="o", label=f"{system} ({metric})")
            ax.set_ylabel(unit)
        if diagonal:  # raw bytes: the floor a cache of these bytes cannot go below
            top = max(x for (wl, *_), pts in series.items() if wl == w for x, _ in pts)
            ax.plot([0, top], [0, top], "k--", lw=1, label="raw bytes (y = x)")
        if ticks:
            ax.set_xticks(list(ticks), list(ticks.values()))
        ax.set_title(w, fontsize=10)
        ax.set_xlabel(xlabel)
        if xscale:
            ax.set_xscale(xscale)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    fig.suptitle(title)
    fig.tight_layout()
    os.makedirs(os.path.dirname(path), exist_ok=True)
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return path


def throughput_vs_parallelism(rows, path):
    """Throughput (units with /s) against params.parallelism ("autotune" drawn rightmost)."""
    series = {}
    for r in rows:
        p = (r.get("params") or {}).get("parallelism")
        if p is None or r["value"] is None or "/s" not in r["unit"]:
            continue
        # One line per config once its parallelism words are taken out of it ("P=2",
        # "parallelism 2", "2 threads"), so different setups of one workload stay apart.
        config = re.sub(r",?\s*(P=\w+|parallelism \w+|\d+ threads)", "", r["config"]).strip(", ")
        key = (r["workload"], f"{r['system']}, {config}", r["metric"], r["unit"])
        series.setdefault(key, []).append((p, r["value"]))
    # AUTOTUNE (or a system's default) sits one step right of the largest explicit setting.
    top = max([x for pts in series.values() for x, _ in pts if isinstance(x, int) and x > 0] or [1])
    fixed = {k: sorted((x if isinstance(x, int) and x > 0 else top + 1, v) for x, v in pts)
             for k, pts in series.items()}
    ticks = {i: str(i) for i in range(1, top + 1)}
    ticks[top + 1] = "AUTOTUNE /\ndefault"
    return _plot(fixed, path, "parallelism (threads or worker processes)",
                 "Throughput against parallelism", ticks=ticks)


def memory_vs_size(rows, path):
    """Memory (MiB units) against params.dataset_bytes (in MiB on the x axis)."""
    series = _series(rows, "dataset_bytes", lambda u: u == "MiB")
    series = {k: [(x / 2**20, v) for x, v in pts] for k, pts in series.items()}
    return _plot(series, path, "raw dataset size (MiB)", "Memory against dataset size",
                 diagonal=True)
