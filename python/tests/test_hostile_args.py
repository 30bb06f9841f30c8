"""The standing adversarial suite (issue 50, item 6): every declared op of the Python API
(``Dataset``'s public methods, the public functions of ``stokehold``, ``stokehold.tfrecord``,
``stokehold.audio``, ``stokehold.image``), found by ``inspect`` and the type annotations, gets each
hostile value (0, -1, -2**31, 2**31, 2**40, 2**63; NaN and +-inf too for a float) in each parameter
that holds a number, the others sane, and at most three of its elements are made. Each op's cases
run in one child interpreter under a 4 GiB ``RLIMIT_AS`` with a per-case watchdog; the outcome of
each must be a result or an exception (a named error), never an abort, a hang or a Rust panic.

A new op is picked up from its declaration: if no sane call of it is known (``hostile.SANE``,
``SANE_BY_OP``, ``BASE``), it is "not exercised" and this test fails until it gets one or a
reason in ``hostile.NOT_EXERCISED``."""

from __future__ import annotations

import collections
import json
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Dict, List, Tuple

import hostile
import pytest

#: A case running longer than this is a hang (its child's watchdog dumps the stacks and exits).
CASE_S = 30

#: (op, param, repr(value)) -> why: cases known to abort, hang or panic, each an open bug. Such a
#: case does not fail the test; one that no longer fails does, so that this stays true. (Empty:
#: the five the suite found first, pack's packed length and read_tfrecord's batch size of 2**31
#: and more, allocate through stokehold_core::alloc now.)
KNOWN: Dict[Tuple[str, str, str], str] = {}


def _cases() -> Tuple[Dict[str, List[Dict[str, Any]]], List[str], List[str]]:
    """The cases by op, the ops not exercised (no sane call known), and the parameters left out
    (a container of numbers with no sane value to put the hostile one in)."""
    by_op: Dict[str, List[Dict[str, Any]]] = {}
    not_exercised, left_out = [], []
    n = 0
    for op, f in hostile.discover().items():
        params = hostile.numeric_params(f)
        if not params:
            continue
        if op in hostile.NOT_EXERCISED or not hostile.has_sane_call(op, f):
            not_exercised.append(op)
            continue
        for name, direct, t in params:
            if not direct and not hostile.has_template(op, f, name):
                left_out.append(f"{op}({name})")
                continue
            for v in hostile.hostile_values(t):
                by_op.setdefault(op, []).append({"id": n, "op": op, "param": name, "value": v})
                n += 1
    return by_op, not_exercised, left_out


def _input_cases(start: int) -> Dict[str, List[Dict[str, Any]]]:
    """Each decoder on each broken version of its valid file (``hostile.DECODERS``)."""
    by_op: Dict[str, List[Dict[str, Any]]] = {}
    for decoder in hostile.DECODERS:
        for m in hostile.MUTATIONS:
            by_op.setdefault("input " + decoder, []).append(
                {"id": start, "op": decoder, "param": m, "value": None, "input": True})
            start += 1
    return by_op


def _run(fixtures: Path, cases: List[Dict[str, Any]]) -> Dict[int, Tuple[str, str]]:
    """Runs cases in one child; a child that dies or hangs names the case it was in (the last
    ``start`` without an outcome), and the cases after it run in a new child."""
    here = str(Path(__file__).parent)
    script = (f"import sys\nsys.path.insert(0, {here!r})\nimport hostile\n"
              f"hostile.child_main({str(fixtures)!r}, {CASE_S!r})\n")
    out: Dict[int, Tuple[str, str]] = {}
    todo = list(cases)
    while todo:
        stdin = "".join(json.dumps(c) + "\n" for c in todo)
        try:
            r = hostile.run_limited(script, timeout=CASE_S * len(todo) + 60, stdin=stdin)
            stdout, stderr, rc = r.stdout, r.stderr, r.returncode
        except subprocess.TimeoutExpired as e:
            stdout = e.stdout.decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
            stderr, rc = "backstop timeout", None
        started = None
        for line in stdout.splitlines():
            msg = json.loads(line)
            if "start" in msg:
                started = msg["start"]
            else:
                out[msg["id"]] = (msg["outcome"], msg["detail"])
                started = None
        if rc == 0 and started is None:
            break
        if started is None:  # died between cases: blame the next one (the last, at exit)
            rest = [c["id"] for c in todo if c["id"] not in out]
            started = rest[0] if rest else todo[-1]["id"]
        hang = rc is None or "Timeout (" in stderr
        out[started] = ("hang" if hang else "abort", f"exit {rc}: {stderr[:400]}")
        todo = [c for c in todo if c["id"] not in out]
    return out


def _judge(tmp_path: Path, by_op: Dict[str, List[Dict[str, Any]]], what: str) -> None:
    """Runs the cases (two children at a time), prints the counts, and fails on an abort, a
    hang or a panic that is not in ``KNOWN``."""
    hostile.make_fixtures(tmp_path)
    with ThreadPoolExecutor(2) as pool:
        results = list(pool.map(lambda cs: _run(tmp_path, cs), by_op.values()))
    outcomes: Dict[int, Tuple[str, str]] = {k: v for r in results for k, v in r.items()}
    cases = {c["id"]: c for cs in by_op.values() for c in cs}
    counts = collections.Counter(o for o, _ in outcomes.values())
    errors = collections.Counter(d.split(":", 1)[0] for o, d in outcomes.values() if o == "error")
    bad, known, fixed = [], [], []
    for i, (outcome, detail) in sorted(outcomes.items()):
        c = cases[i]
        key = (c["op"], c["param"], repr(c["value"]))
        if outcome in ("abort", "hang", "panic"):
            (known if key in KNOWN else bad).append(
                f"{outcome}: {c['op']}({c['param']}={c['value']!r}): {detail}")
        elif key in KNOWN:
            fixed.append(key)
    print(f"\nadversarial suite, {what}: {len(by_op)} ops x their values = {len(cases)} cases: "
          f"{dict(counts)}; aborts {counts['abort']}, hangs {counts['hang']}, "
          f"panics {counts['panic']}")
    print(f"errors by type: {dict(errors)}")
    unnamed = collections.Counter(cases[i]["op"] for i, (o, d) in outcomes.items()
                                  if o == "error" and cases[i]["op"].rsplit(".", 1)[1] not in d)
    print(f"errors whose message does not name the op, by op: {dict(unnamed)}")
    print(f"known failures (xfail, each an open bug): {len(known)}")
    for k in known:
        print("  " + k.splitlines()[0])
    assert len(outcomes) == len(cases), "a case has no outcome"
    assert not bad, "\n".join(bad)
    assert not fixed, f"known failures that no longer fail (take them out of KNOWN): {fixed}"


@pytest.mark.timeout(600)
def test_every_op_with_hostile_numbers_ends_in_a_result_or_a_named_error(tmp_path: Path) -> None:
    by_op, not_exercised, left_out = _cases()
    unlisted = sorted(set(not_exercised) - set(hostile.NOT_EXERCISED))
    assert not unlisted, (f"ops with no known sane call: {unlisted}; add their required arguments "
                          "to hostile.SANE / SANE_BY_OP / BASE (or a reason to NOT_EXERCISED)")
    print(f"\nnot exercised: {sorted(not_exercised)}; parameters left out: {left_out}")
    _judge(tmp_path, by_op, "(op, numeric parameter, hostile value)")


@pytest.mark.timeout(600)
def test_every_decoder_on_broken_files_ends_in_a_result_or_a_named_error(tmp_path: Path) -> None:
    # Each decoder is a declared op: a rename or a removal fails here, not silently.
    missing = sorted(set(hostile.DECODERS) - set(hostile.discover()))
    assert not missing, f"decoders no longer declared: {missing}"
    _judge(tmp_path, _input_cases(0), "(decoder, broken input)")
