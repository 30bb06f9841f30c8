"""The tf.data oracle (issue 49): random pipelines recorded from tf.data, run in stokehold.

``testdata/oracle/tf_oracle.json`` holds pipelines drawn by ``testdata/oracle/pipelines.py`` and
what tensorflow-cpu yielded for each (``testdata/oracle/record.py``, run in a venv outside the
tests). Each must give tf.data's elements, raise where tf.data raises, or fall under a named,
documented difference (``pipelines.DIFFERENCES``, GUIDE's "tf.data habits"). ``ORACLE_CASES``
points the test at another recording (``make oracle`` records thousands).
"""

import collections
import importlib.util
import json
import os
from pathlib import Path
from typing import Any, Dict

import stokehold as sh

ROOT = Path(__file__).resolve().parents[2]
FIXTURE = ROOT / "testdata" / "oracle" / "tf_oracle.json"


def _pipelines() -> Any:
    spec = importlib.util.spec_from_file_location("oracle_pipelines",
                                                  ROOT / "testdata" / "oracle" / "pipelines.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_recorded_pipeline_matches_tf_data_or_a_documented_difference() -> None:
    pipelines = _pipelines()
    recording = json.loads(Path(os.environ.get("ORACLE_CASES", FIXTURE)).read_text())
    counts: Dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    unexplained = []
    for case in recording["cases"]:
        spec = case["spec"]
        got = pipelines.run_sh(sh, spec)
        if "crashed" in case["tf"]:  # TensorFlow died on it (record.py); stokehold ran it
            counts[spec["family"]]["tf-crashed"] += 1
            continue
        verdict, detail = pipelines.compare(spec, case["tf"], got)
        counts[spec["family"]][verdict] += 1
        if verdict == "unexplained":
            unexplained.append(f"{spec['id']} {spec['source']['kind']} {spec['ops']}: {detail}")
    total: collections.Counter = collections.Counter()
    for family in sorted(counts):
        total.update(counts[family])
        print(f"{family:14} {dict(counts[family])}")
    print(f"{'all':14} {dict(total)} of {len(recording['cases'])}")
    assert not unexplained, f"{len(unexplained)} unexplained:\n" + "\n".join(unexplained[:40])


def test_the_guide_lists_every_documented_difference() -> None:
    guide = (ROOT / "docs" / "GUIDE.md").read_text()
    for name in _pipelines().DIFFERENCES:
        assert f"| `{name}` |" in guide, f"docs/GUIDE.md's tf.data table lacks {name}"
