"""Makes the Parquet, Arrow IPC and Hugging Face fixtures of testdata/parquet/ and expected.json.

Run in a venv OUTSIDE the repository (never a test dependency):
    python3 -m venv /tmp/pqvenv && /tmp/pqvenv/bin/pip install 'pyarrow==26.*' datasets
    /tmp/pqvenv/bin/python testdata/parquet/make_fixtures.py
expected.json holds what pyarrow / datasets read back: for each fixture, its row count and some
rows (all of them for the small ones), bytes as hex, floats as Python floats.
"""

import json
import os
import shutil

import datasets
import pyarrow as pa
import pyarrow.ipc as ipc
import pyarrow.parquet as pq

HERE = os.path.dirname(os.path.abspath(__file__))


def main_table(n):
    cats = ["red", "green", "blue"]
    return pa.table(
        {
            "id": pa.array(range(n), pa.int64()),
            "x": pa.array([i * 0.5 for i in range(n)], pa.float32()),
            "flag": pa.array([i % 3 == 0 for i in range(n)], pa.bool_()),
            "text": pa.array([f"row {i} é" for i in range(n)], pa.string()),
            "blob": pa.array([bytes([i % 256, (i * 7) % 256]) for i in range(n)], pa.binary()),
            "vec": pa.array([[i, i + 1.5, -i] for i in range(n)], pa.list_(pa.float32(), 3)),
            "tokens": pa.array([list(range(i % 5)) for i in range(n)], pa.list_(pa.int32())),
            "meta": pa.array(
                [{"score": i / 4, "tag": f"t{i % 7}"} for i in range(n)],
                pa.struct([("score", pa.float64()), ("tag", pa.string())]),
            ),
            "cat": pa.array([cats[i % 3] for i in range(n)]).dictionary_encode(),
        }
    )


def hexed(v):
    if isinstance(v, bytes):
        return v.hex()
    if isinstance(v, list):
        return [hexed(x) for x in v]
    if isinstance(v, dict):
        return {k: hexed(x) for k, x in v.items()}
    return v


def flat(row, prefix=""):
    out = {}
    for k, v in row.items():
        if isinstance(v, dict):
            out.update(flat(v, f"{prefix}{k}."))
        else:
            out[f"{prefix}{k}"] = hexed(v)
    return out


def rows_of(table, picks):
    rows = table.to_pylist()
    return {str(i): flat(rows[i]) for i in picks}


def main():
    expected = {}
    t = main_table(1000)
    picks = [0, 1, 99, 100, 101, 249, 250, 500, 777, 999]
    # Four row groups of 250 rows, pages of at most 100 rows, with an offset index.
    pq.write_table(t, f"{HERE}/paged.parquet", row_group_size=250, max_rows_per_page=100,
                   write_batch_size=50, write_page_index=True, compression="zstd")
    # The same rows without a page index (blocks are row groups), snappy.
    pq.write_table(t, f"{HERE}/nopage.parquet", row_group_size=250, write_page_index=False,
                   compression="snappy")
    for name in ("paged", "nopage"):
        back = pq.read_table(f"{HERE}/{name}.parquet")
        md = pq.ParquetFile(f"{HERE}/{name}.parquet").metadata
        expected[name] = {"rows": back.num_rows, "row_groups": md.num_row_groups,
                          "picks": rows_of(back, picks)}
    # Nulls: a nullable column, a null struct, a null inside a list, a null list.
    nt = pa.table(
        {
            "id": pa.array(range(6), pa.int64()),
            "maybe": pa.array([1, 2, None, 4, None, 6], pa.int64()),
            "s": pa.array([{"a": 1}, None, {"a": 3}, {"a": None}, {"a": 5}, {"a": 6}],
                          pa.struct([("a", pa.int32())])),
            "l": pa.array([[1], [2, None], [3], None, [], [6]], pa.list_(pa.int64())),
        }
    )
    pq.write_table(nt, f"{HERE}/nullable.parquet", write_page_index=True)
    expected["nullable"] = {"rows": 6, "picks": rows_of(pq.read_table(f"{HERE}/nullable.parquet"),
                                                        range(6))}
    # A column stokehold does not read (date32) beside one it does.
    ut = pa.table({"id": pa.array([1, 2], pa.int64()),
                   "day": pa.array([1, 2], pa.int32()).cast(pa.date32())})
    pq.write_table(ut, f"{HERE}/unsupported.parquet")
    # Arrow IPC, file and stream formats (two record batches each).
    small = t.slice(0, 100).combine_chunks()
    batches = small.to_batches(max_chunksize=60)
    with ipc.new_file(f"{HERE}/data.arrow", small.schema) as w:
        for b in batches:
            w.write_batch(b)
    with ipc.new_stream(f"{HERE}/data.arrows", small.schema) as w:
        for b in batches:
            w.write_batch(b)
    expected["ipc"] = {"rows": 100, "picks": rows_of(small, [0, 59, 60, 99])}
    # Hugging Face datasets: from_dict + save_to_disk, and one with map + shuffle applied.
    d = datasets.Dataset.from_dict(
        {"text": [f"doc {i}" for i in range(50)], "label": [i % 4 for i in range(50)],
         "emb": [[float(i), float(-i)] for i in range(50)]}
    )
    for name in ("hf_saved", "hf_shuffled"):
        shutil.rmtree(f"{HERE}/{name}", ignore_errors=True)
    d.save_to_disk(f"{HERE}/hf_saved")
    m = d.map(lambda e: {"len": len(e["text"])}).shuffle(seed=3)
    m.save_to_disk(f"{HERE}/hf_shuffled")
    for name, ds in (("hf_saved", d), ("hf_shuffled", m)):
        back = datasets.load_from_disk(f"{HERE}/{name}")
        assert back.to_list() == ds.to_list()
        expected[name] = {"rows": len(back),
                          "picks": {str(i): flat(back[i]) for i in range(len(back))}}
    # A loaded dataset shuffled without save_to_disk: its data file plus an indices mapping.
    loaded = datasets.load_from_disk(f"{HERE}/hf_saved").shuffle(seed=5, keep_in_memory=True)
    expected["hf_indices"] = {"indices": loaded._indices.column(0).to_pylist(),
                              "picks": {str(i): flat(loaded[i]) for i in range(len(loaded))}}
    with open(f"{HERE}/expected.json", "w") as f:
        json.dump(expected, f, indent=1, sort_keys=True)
        f.write("\n")


if __name__ == "__main__":
    main()
