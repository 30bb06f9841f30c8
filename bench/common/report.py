"""Ratios to stokehold and markdown tables of result rows."""

from .rows import REFERENCE, better_of


def add_ratios(rows):
    """Set ``ratio`` = value / stokehold's value for the same (workload, config, metric)."""
    ref = {}
    for r in rows:
        if r["system"] == REFERENCE and r["value"] is not None:
            ref[(r["workload"], r["config"], r["metric"])] = r["value"]
    for r in rows:
        base = ref.get((r["workload"], r["config"], r["metric"]))
        r.pop("ratio", None)
        r.pop("ratio_text", None)
        if r["value"] is None or base is None:
            continue
        if base:
            r["ratio"] = r["value"] / base
        elif r["system"] != REFERENCE:  # stokehold's figure is 0 (e.g. no stall at all)
            r["ratio_text"] = "— (stokehold: 0)" if not r["value"] else "∞ (stokehold: 0)"
    return rows


def fmt(v):
    """A number in 3-4 significant digits, thousands separated; '—' for None."""
    if v is None:
        return "—"
    if isinstance(v, int) or (abs(v) >= 1000 and float(v).is_integer()):
        return f"{int(v):,}"
    a = abs(v)
    if a >= 1000:
        return f"{v:,.0f}"
    if a >= 100:
        return f"{v:.1f}"
    if a >= 1:
        return f"{v:.2f}"
    if a == 0:
        return "0"
    return f"{v:.3g}"


def _cell(text):
    return str(text).replace("|", "\\|").replace("\n", " ")


def _grouped(rows):
    """Rows per workload; inside one, each (config, metric) in order of first appearance,
    stokehold first, so the systems being compared sit on adjacent lines."""
    order, groups = [], {}
    for r in rows:
        key = (r["workload"], r["config"], r["metric"])
        if key not in groups:
            order.append(key)
            groups[key] = []
        groups[key].append(r)
    by_workload = {}
    for key in order:
        group = sorted(groups[key], key=lambda r: r["system"] != REFERENCE)
        by_workload.setdefault(key[0], []).extend(group)
    return by_workload


def _line(r):
    arrow = "" if r["metric"] == "status" else (" ↑" if better_of(r) == "higher" else " ↓")
    ratio = r.get("ratio")
    ratio_s = "1 (ref)" if r["system"] == REFERENCE and r["value"] is not None else (
        f"{ratio:.2f}x" if ratio is not None else r.get("ratio_text", "—"))
    runs = r.get("runs")
    runs_s = "" if runs is None else (str(len(runs)) + (" (<3!)" if len(runs) < 3 else ""))
    cells = [r["config"], r["metric"] + arrow, r["system"], fmt(r["value"]), r["unit"], ratio_s,
             runs_s, r.get("note", "")]
    return "| " + " | ".join(_cell(c) for c in cells) + " |"


def table(rows, level="###"):
    """Markdown: one table per workload (config, metric, system, value, unit, ratio, runs, note)."""
    head = ["config", "metric", "system", "value", "unit", "ratio to stokehold", "runs", "note"]
    out = []
    for workload, group in _grouped(rows).items():
        out += [f"{level} {workload}", "", "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        out += [_line(r) for r in group]
        out.append("")
    return "\n".join(out)


LEGEND = (
    "`ratio to stokehold` = the system's value / stokehold's value for the same workload, config "
    "and metric. ↑: higher is better (a peer ratio below 1 means stokehold is ahead); ↓: lower is "
    "better (a peer ratio above 1 means stokehold is ahead). Values are medians of `runs` runs; "
    "`—` means the system could not run it (see note).\n"
)


def summary(rows):
    """Markdown: per (workload, config, metric), stokehold's best setting against the BEST peer.

    Both sides are taken at their best, each among its own rows: a peer's variants
    (``grain/mp_prefetch``) and stokehold's (``stokehold/threads``, ``stokehold/P=1``); the
    stokehold column names the variant when it is not the plain ``stokehold`` row, so a reader
    sees which setting holds the figure (the plain row is the subject of the workload, e.g. the
    process map in bench/udf, and may not be stokehold's best where peers run threads).

    ``advantage`` > 1 means stokehold is better by that factor (peer/stokehold for ↓ metrics,
    stokehold/peer for ↑ ones); < 1 means the best peer wins. Peers that could not run, machine
    limits (memcpy) and floors (systems named with ``floor``: a part of the work measured alone,
    such as numpy's own part of a hand-off, inside every system's figure) are not counted, nor
    the bench's own set-up (metrics marked
    ``bench set-up``: the same code for every system); where stokehold's figure is 0 there is no
    factor.
    """
    out = ["| workload | config | metric | stokehold | best peer | advantage |",
           "|---|---|---|---|---|---|"]
    for workload, group in _grouped(rows).items():
        if any("uniform" in r["system"] for r in group):
            # Quality measures read against an ideal (a uniform permutation), where closer to
            # the ideal is better, not higher or lower: the full table shows them.
            continue
        keyed = {}
        for r in group:
            keyed.setdefault((r["config"], r["metric"]), []).append(r)
        for (config, metric), rs in keyed.items():
            if "bench set-up" in metric:
                continue
            plain = [r for r in rs if r["system"] == REFERENCE and r["value"] is not None]
            ours = [r for r in rs if r["system"].split("/")[0] == REFERENCE
                    and r["value"] is not None]
            peers = [r for r in rs if not r["system"].startswith(REFERENCE)
                     and r["value"] is not None
                     and r["system"] not in ("machine", "raw bytes", "memcpy")
                     and "floor" not in r["system"]]
            if not plain or not peers:
                continue
            higher = better_of(plain[0]) == "higher"
            key = (lambda r: r["value"]) if higher else (lambda r: -r["value"])
            # The plain row wins ties (max keeps the first).
            ref = max(plain + [r for r in ours if r is not plain[0]], key=key)
            best = max(peers, key=key)
            if ref["value"] > 0 and best["value"] > 0:
                adv = ref["value"] / best["value"] if higher else best["value"] / ref["value"]
                adv_s = f"**{adv:.2f}x**"
            else:
                adv_s = "stokehold 0" if not ref["value"] else "—"
            arrow = " ↑" if higher else " ↓"
            out.append("| " + " | ".join(_cell(c) for c in [
                workload, config, metric + arrow,
                f"{fmt(ref['value'])} {ref['unit']}" + (
                    "" if ref["system"] == REFERENCE else f" ({ref['system']})"),
                f"{best['system']}: {fmt(best['value'])}", adv_s]) + " |")
    return "\n".join(out) + "\n"
