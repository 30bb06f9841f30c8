"""The tf.data ops stokehold lacked (issue 49, class 9): each gives what tf.data's documentation
says (the expected values below were checked by hand against tensorflow-cpu 2.21; TensorFlow is
never imported here)."""

import numpy as np
import pytest

import stokehold as sh
from stokehold import Dataset


def xs(ds, feature="x"):
    return [int(e[feature]) for e in ds]


def resumed(make, n):
    """The rest of epoch 0 after ``n`` elements, through a checkpoint into a fresh pipeline,
    and the rest of the uninterrupted run."""
    run = make().iter(epoch=0)
    for _ in range(n):
        next(run)
    state = run.get_state()
    again = make().iter(epoch=0)
    again.set_state(state)
    return [e for e in again], [e for e in run]


@pytest.mark.parametrize("args, want", [
    ((5,), [0, 1, 2, 3, 4]),
    ((2, 5), [2, 3, 4]),
    ((2, 10, 3), [2, 5, 8]),
    ((5, 0, -2), [5, 3, 1]),
    ((-3,), []),
    ((3, 3), []),
    ((1, 10, -1), []),
    ((-2, 2), [-2, -1, 0, 1]),
])
def test_range_takes_tf_datas_start_stop_step(args, want):
    ds = Dataset.range(*args)
    assert xs(ds) == want
    assert ds.is_random_access and len(ds) == len(want)
    assert all(e["x"].dtype == np.int64 and e["x"].shape == () for e in ds)
    if want:
        assert int(ds[len(want) - 1]["x"]) == want[-1]


def test_range_refuses_a_zero_step_and_non_ints():
    with pytest.raises(sh.InvalidArgumentError, match="step"):
        Dataset.range(0, 5, 0)
    with pytest.raises(sh.InvalidArgumentError, match="stop"):
        Dataset.range(0, 2.5)


def test_enumerate_counts_from_start():
    ds = Dataset.range(3).enumerate(start=5)
    assert [(int(e["x"]), int(e["index"])) for e in ds] == [(0, 5), (1, 6), (2, 7)]
    assert ds.is_random_access and int(ds[2]["index"]) == 7 and ds[2]["index"].dtype == np.int64
    # tf.data's positional spelling, and the feature name as before
    assert xs(Dataset.range(3).enumerate(5), "index") == [5, 6, 7]
    assert xs(Dataset.range(3).enumerate("i", start=-1), "i") == [-1, 0, 1]
    assert xs(Dataset.range(3).enumerate(), "index") == [0, 1, 2]


def test_counter_is_endless_and_random_access():
    ds = Dataset.counter(3, 2)
    assert ds.cardinality() == sh.INFINITE and ds.is_random_access
    assert xs(ds.take(4)) == [3, 5, 7, 9]
    assert int(ds[1000]["x"]) == 3 + 2 * 1000 and ds[0]["x"].dtype == np.int64
    assert xs(Dataset.counter().take(3)) == [0, 1, 2]
    assert xs(Dataset.counter(0, -1).take(3)) == [0, -1, -2]


def test_from_tensors_is_one_element():
    ds = Dataset.from_tensors({"a": np.array([1, 2, 3]), "b": 7})
    assert len(ds) == 1 and ds.is_random_access
    e = ds[0]
    assert e["a"].tolist() == [1, 2, 3] and int(e["b"]) == 7
    assert sh.from_tensors({"a": [1, 2]}).get_single_element()["a"].tolist() == [1, 2]
    with pytest.raises(sh.InvalidArgumentError, match="from_tensors"):
        Dataset.from_tensors(np.arange(3))


def test_apply_passes_the_whole_dataset():
    def evens(ds):
        return ds.filter(lambda e: int(e["x"]) % 2 == 0)

    assert xs(Dataset.range(6).apply(evens)) == [0, 2, 4]
    with pytest.raises(sh.InvalidArgumentError, match="not a Dataset"):
        Dataset.range(3).apply(lambda ds: [1])


def test_get_single_element_needs_exactly_one():
    assert int(Dataset.range(1).get_single_element()["x"]) == 0
    with pytest.raises(sh.InvalidArgumentError, match="has 0 elements"):
        Dataset.range(0).get_single_element()
    with pytest.raises(sh.InvalidArgumentError, match="has 3 elements"):
        Dataset.range(3).get_single_element()
    with pytest.raises(sh.InvalidArgumentError, match="has at least 2 elements"):
        Dataset.range(5).filter(lambda e: True).get_single_element()


def test_reduce_folds_with_dict_states():
    assert Dataset.range(5).reduce(0, lambda s, e: s + int(e["x"])) == 10
    assert Dataset.range(0).reduce("empty", lambda s, e: 1 / 0) == "empty"
    state = Dataset.range(4).reduce(
        {"sum": 0, "count": 0}, lambda s, e: {"sum": s["sum"] + int(e["x"]), "count": s["count"] + 1})
    assert state == {"sum": 6, "count": 4}


def test_take_while_stops_at_the_first_false():
    ds = Dataset.range(10).take_while(lambda e: e["x"] < 4)
    assert xs(ds) == [0, 1, 2, 3]
    assert not ds.is_random_access
    assert xs(Dataset.range(6).map(lambda e: {"x": 5 - e["x"]}).take_while(lambda e: e["x"] != 3)) == [5, 4]
    assert xs(Dataset.counter().take_while(lambda e: e["x"] < 3)) == [0, 1, 2]   # an endless input
    assert xs(Dataset.range(3).take_while(lambda e: False)) == []
    rest, want = resumed(lambda: Dataset.range(10).take_while(lambda e: e["x"] < 7), 3)
    assert xs(rest) == xs(want) == [3, 4, 5, 6]


def test_take_while_passes_the_predicates_exception_through():
    def boom(e):
        raise KeyError("boom")

    with pytest.raises(KeyError, match="boom"):
        list(Dataset.range(3).take_while(boom))


def test_unique_keeps_first_appearances_in_order():
    ds = sh.from_arrays({"v": np.array([1, 3, 1, 2, 3, 5])}).unique()
    assert xs(ds, "v") == [1, 3, 2, 5]
    words = sh.from_arrays({"w": [b"a", b"b", b"a", b"c"]}).unique()
    assert [e["w"].item() for e in words] == [b"a", b"b", b"c"]
    rest, want = resumed(lambda: sh.from_arrays({"v": np.array([4, 4, 1, 4, 2, 1, 3])}).unique(), 2)
    assert xs(rest, "v") == xs(want, "v") == [2, 3]


def test_unique_names_what_it_cannot_take():
    with pytest.raises(sh.InvalidArgumentError, match=r"\['a', 'b'\]"):
        list(sh.from_arrays({"a": np.arange(3), "b": np.arange(3)}).unique())
    with pytest.raises(sh.InvalidArgumentError, match="'v'.*shape"):
        list(sh.from_arrays({"v": np.zeros((3, 2))}).unique())


def test_scan_carries_a_state():
    ds = Dataset.range(5).scan(0, lambda s, e: (s + int(e["x"]), {"y": s * 10}))
    assert xs(ds, "y") == [0, 0, 10, 30, 60]

    def running(state, e):
        new = {"total": state["total"] + e["x"], "n": state["n"] + 1}
        return new, {"mean": new["total"] / new["n"]}

    means = [float(e["mean"]) for e in Dataset.range(4).scan({"total": 0, "n": 0}, running)]
    assert means == [0.0, 0.5, 1.0, 1.5]
    assert xs(Dataset.range(5).scan(0, lambda s, e: (s, e)).repeat(2)) == [0, 1, 2, 3, 4] * 2


def test_scan_resumes_with_its_state():
    def make():
        return Dataset.range(10).scan(0, lambda s, e: (s + int(e["x"]), {"y": s}))

    rest, want = resumed(make, 3)
    assert xs(rest, "y") == xs(want, "y") == [3, 6, 10, 15, 21, 28, 36]


def test_scan_names_a_result_that_is_not_a_pair():
    with pytest.raises(sh.InvalidArgumentError, match="new_state, output_element"):
        list(Dataset.range(3).scan(0, lambda s, e: e))


def choices(values):
    return sh.from_arrays({"c": np.array(values, np.int64)})


def test_choose_from_datasets_follows_the_choices():
    a, b = Dataset.range(2), Dataset.range(10, 15)
    assert xs(Dataset.choose_from_datasets([a, b], choices([0, 1, 0, 0, 1, 1]))) == [0, 10, 1]
    assert xs(sh.choose_from_datasets([a, b], choices([0, 1, 0, 0, 1, 1]),
                                      stop_on_empty_dataset=False)) == [0, 10, 1, 11, 12]
    # the documented round robin: choices from a counter, ending with the inputs
    robin = Dataset.counter().map(lambda e: {"c": e["x"] % 3}).take(9)
    three = [Dataset.range(i * 10, i * 10 + 3) for i in range(3)]
    assert xs(Dataset.choose_from_datasets(three, robin)) == [0, 10, 20, 1, 11, 21, 2, 12, 22]
    rest, want = resumed(lambda: Dataset.choose_from_datasets(three, robin), 4)
    assert xs(rest) == xs(want) == [11, 21, 2, 12, 22]


def test_choose_from_datasets_names_a_bad_choice():
    a, b = Dataset.range(2), Dataset.range(10, 15)
    with pytest.raises(sh.InvalidArgumentError, match="choice element 1 is 2, outside 0..1"):
        list(Dataset.choose_from_datasets([a, b], choices([0, 2])))
    with pytest.raises(sh.InvalidArgumentError, match="must be a scalar integer"):
        list(Dataset.choose_from_datasets([a, b], sh.from_arrays({"c": np.array([0.5])})))
    with pytest.raises(sh.InvalidArgumentError, match="at least one"):
        Dataset.choose_from_datasets([], choices([0]))


def test_save_then_load_gives_the_same_elements(tmp_path):
    ds = sh.from_arrays({"x": np.arange(6), "v": [np.ones(n, np.float32) for n in range(6)]})
    ds.save(tmp_path / "saved")
    back = Dataset.load(tmp_path / "saved", element_spec=ds.element_spec)
    assert back.is_random_access and len(back) == 6
    for got, want in zip(back, ds):
        assert int(got["x"]) == int(want["x"]) and got["v"].tolist() == want["v"].tolist()
    with pytest.raises(sh.SchemaError, match="element_spec"):
        Dataset.load(tmp_path / "saved", element_spec=Dataset.range(1).element_spec)
    with pytest.raises(FileNotFoundError):
        Dataset.load(tmp_path / "missing")


def lines(ds):
    return [e["line"].item() for e in ds]


@pytest.fixture
def texts(tmp_path):
    (tmp_path / "t1.txt").write_bytes(b"a\nbb\r\n\nccc")
    (tmp_path / "t2.txt").write_bytes(b"x\ny\n")
    (tmp_path / "t3.txt").write_bytes(b"")
    return [str(tmp_path / n) for n in ("t1.txt", "t2.txt", "t3.txt")]


def test_text_lines_as_tf_data_splits_them(texts):
    ds = sh.TextLineDataset(texts)
    assert lines(ds) == [b"a", b"bb", b"", b"ccc", b"x", b"y"]
    assert lines(sh.TextLineDataset(texts[1])) == [b"x", b"y"]
    assert lines(sh.TextLineDataset([])) == []
    rest, want = resumed(lambda: sh.TextLineDataset(texts), 4)
    assert lines(rest) == lines(want) == [b"x", b"y"]


def test_text_lines_interleave_with_num_parallel_reads(texts):
    ds = sh.TextLineDataset(texts[:2], num_parallel_reads=2)
    assert lines(ds) == [b"a", b"x", b"bb", b"y", b"", b"ccc"]


def test_text_lines_of_compressed_files(tmp_path):
    import gzip
    import zlib

    (tmp_path / "a.gz").write_bytes(gzip.compress(b"x\ny\n"))
    (tmp_path / "a.zz").write_bytes(zlib.compress(b"x\ny\n"))
    assert lines(sh.TextLineDataset(str(tmp_path / "a.gz"), compression_type="GZIP")) == [b"x", b"y"]
    assert lines(sh.TextLineDataset(str(tmp_path / "a.zz"), compression_type="ZLIB")) == [b"x", b"y"]
    with pytest.raises(sh.InvalidArgumentError, match="compression_type"):
        sh.TextLineDataset(str(tmp_path / "a.gz"), compression_type="BZIP2")


def test_text_lines_of_a_missing_file_raise_when_reached(tmp_path, texts):
    ds = sh.TextLineDataset([texts[1], str(tmp_path / "nope.txt")])
    it = iter(ds)
    assert next(it)["line"].item() == b"x"
    next(it)
    with pytest.raises(FileNotFoundError, match="nope.txt"):
        next(it)


def records(ds):
    return [e["record"].item() for e in ds]


def test_fixed_length_records_skip_header_and_footer(tmp_path):
    (tmp_path / "r1.bin").write_bytes(b"HHabcdefFF")
    (tmp_path / "r2.bin").write_bytes(b"HH0123456789FF")
    r1, r2 = str(tmp_path / "r1.bin"), str(tmp_path / "r2.bin")
    assert records(sh.FixedLengthRecordDataset(r2, 5, header_bytes=2, footer_bytes=2)) == [b"01234", b"56789"]
    ds = sh.FixedLengthRecordDataset([r1, r1, r1], 3, 2, 2)
    assert ds.is_random_access and len(ds) == 6
    assert ds[3]["record"].item() == b"def" and records(ds) == [b"abc", b"def"] * 3
    mixed = sh.FixedLengthRecordDataset([r1, r1, r1], 3, 2, 2, num_parallel_reads=2)
    assert records(mixed) == [b"abc", b"abc", b"def", b"def", b"abc", b"def"]
    assert records(sh.FixedLengthRecordDataset([], 3)) == []
    whole = sh.FixedLengthRecordDataset(r1, 2)
    assert records(whole) == [b"HH", b"ab", b"cd", b"ef", b"FF"]


def test_fixed_length_records_name_a_bad_file(tmp_path):
    (tmp_path / "r.bin").write_bytes(b"HHabcdefgFF")
    r = str(tmp_path / "r.bin")
    with pytest.raises(sh.InvalidArgumentError, match=r"r\.bin.*body is 7 bytes, not a multiple of record_bytes \(3\)"):
        sh.FixedLengthRecordDataset(r, 3, header_bytes=2, footer_bytes=2)
    with pytest.raises(FileNotFoundError):
        sh.FixedLengthRecordDataset(str(tmp_path / "nope.bin"), 3)
    with pytest.raises(sh.InvalidArgumentError, match="compressed files are not supported"):
        sh.FixedLengthRecordDataset(r, 1, compression_type="GZIP")
    with pytest.raises(sh.InvalidArgumentError, match="record_bytes"):
        sh.FixedLengthRecordDataset(r, 0)


def test_random_is_endless_keyed_and_in_tf_datas_range():
    ds = Dataset.random(seed=4)
    assert ds.cardinality() == sh.INFINITE and ds.is_random_access
    head = xs(ds.take(1000))
    assert all(0 <= v < 2**32 for v in head) and len(set(head)) > 990
    assert xs(Dataset.random(seed=4).take(1000)) == head                      # keyed by the seed
    assert int(ds[999]["x"]) == head[999] and ds[0]["x"].dtype == np.int64
    assert xs(Dataset.random(seed=5).take(5)) != head[:5]
    assert xs(Dataset.random(seed=4, rerandomize_each_iteration=False).take(5)) == head[:5]
    with pytest.raises(sh.InvalidArgumentError, match="rerandomize_each_iteration"):
        Dataset.random(seed=4, rerandomize_each_iteration=True)


def test_counts_must_fit_int64():
    past = r"must be <= 9223372036854775807"
    with pytest.raises(sh.InvalidArgumentError, match=r"range\(stop=9223372036854775808\): " + past):
        Dataset.range(0, 2**63)
    with pytest.raises(sh.InvalidArgumentError, match=past):
        Dataset.counter(2**63)
    with pytest.raises(sh.InvalidArgumentError, match=past):
        Dataset.range(3).enumerate(start=2**63)
    assert xs(Dataset.range(2**63 - 2, 2**63 - 1)) == [2**63 - 2]


# ---- CsvDataset (expected values: tensorflow-cpu 2.21's CsvDataset on the same bytes) ----------

def csv_file(tmp_path, content, name="c.csv"):
    path = tmp_path / name
    path.write_bytes(content)
    return str(path)


def rows(ds):
    return [tuple(v.item() for v in e.values()) for e in ds]


def test_csv_types_defaults_and_quotes(tmp_path):
    p = csv_file(tmp_path, b'1,"a,b",2.5,7\n 3 ,"c""d",,\r\n-4,"e\nf",1e3,"8"')
    ds = sh.CsvDataset(p, [np.int32, b"", [0.0], np.int64(9)])
    got = list(ds)
    assert rows(got) == [(1, b"a,b", 2.5, 7), (3, b'c"d', 0.0, 9), (-4, b"e\nf", 1000.0, 8)]
    assert list(got[0]) == ["col0", "col1", "col2", "col3"]
    assert [got[0][k].dtype for k in got[0]] == [np.int32, object, np.float32, np.int64]
    assert not ds.is_random_access


def test_csv_numbers_parse_as_tensorflow_parses_them(tmp_path):
    ints = csv_file(tmp_path, b" 1 ,+2,-2147483648\n", "i.csv")
    assert rows(sh.CsvDataset(ints, [np.int32] * 3)) == [(1, 2, -2147483648)]
    floats = csv_file(tmp_path, b"inf,-INF,.5,5.,0x1p3,1e400\n", "f.csv")
    got = rows(sh.CsvDataset(floats, [np.float32] * 6))
    assert got == [(np.inf, -np.inf, 0.5, 5.0, 8.0, np.inf)]
    for bad, kind in [(b"1.5", "int32"), (b"1e3", "int32"), (b"0x10", "int32"), (b"2147483648", "int32"),
                      (b"1_0", "float"), (b"-", "double"), (b" ", "int32")]:
        dt = {"int32": np.int32, "float": np.float32, "double": np.float64}[kind]
        p = csv_file(tmp_path, bad + b"\n", "bad.csv")
        where = r"bad\.csv, record 0 \(line 1\): "
        with pytest.raises(sh.InvalidArgumentError, match=rf"{where}field 0 is not a valid {kind}"):
            list(sh.CsvDataset(p, [dt]))
    assert rows(sh.CsvDataset(csv_file(tmp_path, b"99999999999\n"), [np.int64])) == [(99999999999,)]


def test_csv_missing_values_take_defaults_or_raise(tmp_path):
    p = csv_file(tmp_path, b'NA,2\n"",3\n')
    assert rows(sh.CsvDataset(p, [[5], np.int32], na_value="NA")) == [(5, 2), (5, 3)]
    with pytest.raises(sh.InvalidArgumentError, match=r"record 0 \(line 1\): field 0 is required .* but missing"):
        list(sh.CsvDataset(p, [np.int32, np.int32], na_value="NA"))
    two = csv_file(tmp_path, b"1,2\n\n3,4\n", "blank.csv")   # an empty line is a record of one empty field
    with pytest.raises(sh.InvalidArgumentError, match=r"blank\.csv, record 1 \(line 2\): expected 2 fields, found 1"):
        list(sh.CsvDataset(two, [[0], [0]]))
    with pytest.raises(sh.InvalidArgumentError, match="expected 2 fields, found 3"):
        list(sh.CsvDataset(csv_file(tmp_path, b"1,2,3\n", "wide.csv"), [[0], [0]]))


def test_csv_malformed_quotes_name_file_and_line(tmp_path):
    cases = [(b'a"b,c\n', "quote inside an unquoted field"), (b'x,y\n"ab"x,c\n', "closing quote"),
             (b'x,y\n"ab,c\n', "ends inside a quoted field"), (b' "a",3\n', "quote inside an unquoted field")]
    for content, what in cases:
        p = csv_file(tmp_path, content, "q.csv")
        with pytest.raises(sh.InvalidArgumentError, match=rf"q\.csv, record \d \(line \d\): .*{what}"):
            list(sh.CsvDataset(p, [b"", b""]))
    # without quote handling a quote is an ordinary character
    p = csv_file(tmp_path, b'"a,b",c\n', "nq.csv")
    assert rows(sh.CsvDataset(p, [b"", b"", b""], use_quote_delim=False)) == [(b'"a', b'b"', b"c")]


def test_csv_lone_carriage_returns_end_records(tmp_path):
    assert rows(sh.CsvDataset(csv_file(tmp_path, b"a\rb\r\nc\r"), [b""])) == [(b"a",), (b"b",), (b"c",)]
    # a quoted field keeps its line ends; the record after it starts on the line it ends on
    p = csv_file(tmp_path, b'"x\ny",1\n"\r",2\nbad\n', "multi.csv")
    with pytest.raises(sh.InvalidArgumentError, match=r"record 2 \(line 4\)"):
        list(sh.CsvDataset(p, [b"", np.int32]))


def test_csv_header_columns_delimiter_and_names(tmp_path):
    p = csv_file(tmp_path, b'"h\n1";h2;h3\n1;2;3\n4;5;6\n')
    ds = sh.CsvDataset(p, [np.int32, np.int32], header=True, field_delim=";", select_cols=[0, 2])
    assert [dict((k, int(v)) for k, v in e.items()) for e in ds] == [{"col0": 1, "col2": 3}, {"col0": 4, "col2": 6}]
    ex = sh.CsvDataset(p, [np.int32, np.int32], header=True, field_delim=";", exclude_cols=[1],
                       column_names=["a", "c"])
    assert [(int(e["a"]), int(e["c"])) for e in ex] == [(1, 3), (4, 6)]
    with pytest.raises(sh.InvalidArgumentError, match="empty; header=True"):
        list(sh.CsvDataset(csv_file(tmp_path, b"", "e.csv"), [np.int32], header=True))
    assert rows(sh.CsvDataset(csv_file(tmp_path, b"", "e.csv"), [np.int32])) == []


def test_csv_refuses_bad_arguments_when_built(tmp_path):
    p = csv_file(tmp_path, b"1,2\n")
    for kwargs, what in [({"select_cols": [1, 0]}, "strictly increasing"), ({"select_cols": [0]}, "has 1 columns"),
                         ({"select_cols": [0, 1], "exclude_cols": [2]}, "exclude_cols"),
                         ({"field_delim": ";;"}, "field_delim"), ({"compression_type": "BZIP2"}, "compression_type")]:
        with pytest.raises(sh.InvalidArgumentError, match=what):
            sh.CsvDataset(p, [np.int32, np.int32], **kwargs)
    for defaults, what in [([], "record_defaults"), ([True], "not bool"), ([np.complex64], "int32, int64"),
                           ([[]], "give a type")]:
        with pytest.raises(sh.InvalidArgumentError, match=what):
            sh.CsvDataset(p, defaults)


def test_csv_files_compressed_several_and_resumed(tmp_path):
    import gzip

    a = csv_file(tmp_path, b"1,x\n2,y\n", "a.csv")
    (tmp_path / "b.csv.gz").write_bytes(gzip.compress(b"3,z\n"))
    assert rows(sh.CsvDataset(str(tmp_path / "b.csv.gz"), [0, b""], compression_type="GZIP")) == [(3, b"z")]
    both = sh.CsvDataset([a, a], [0, b""])
    assert rows(both) == [(1, b"x"), (2, b"y")] * 2
    rest, want = resumed(lambda: sh.CsvDataset([a, a], [0, b""]), 3)
    assert rows(rest) == rows(want) == [(2, b"y")]
