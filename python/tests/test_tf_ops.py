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


def test_unique_compares_whole_values_of_any_shape():
    # tensorflow 2.21: [[1, 2], [1, 2], [3], [], [], [2, 1], [1, 2, 0]] -> [[1, 2], [3], [], [2, 1], [1, 2, 0]]
    rows = [[1, 2], [1, 2], [3], [], [], [2, 1], [1, 2, 0]]
    vectors = sh.from_generator(lambda: iter([{"v": np.array(r, np.int64)} for r in rows])).unique()
    assert [e["v"].tolist() for e in vectors] == [[1, 2], [3], [], [2, 1], [1, 2, 0]]
    mats = sh.from_arrays({"m": np.array([[[1, 2]], [[1, 2]], [[3, 4]]])}).unique()
    assert [e["m"].tolist() for e in mats] == [[[1, 2]], [[3, 4]]]
    ragged = sh.from_list([{"v": np.arange(n)} for n in (1, 2, 1, 2, 3)]).batch(2).unique()
    assert len(list(ragged)) == 2                          # [[0], [0, 1]] twice, then [[0, 1, 2]]


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


# ---- the Python streams read their own epoch of the input -------------------------------------

def test_stream_ops_read_the_same_epoch_of_their_input():
    import itertools

    shuffled = Dataset.range(20).shuffle(seed=3)
    ops = {
        "take_while": (lambda ds: ds.take_while(lambda e: e["x"] != 7),
                       lambda xs_: list(itertools.takewhile(lambda v: v != 7, xs_))),
        "scan": (lambda ds: ds.scan(0, lambda s, e: (s + int(e["x"]), {"x": s})),
                 lambda xs_: [sum(xs_[:i]) for i in range(len(xs_))]),
        "unique": (lambda ds: ds.map(lambda e: {"x": e["x"] % 5}).unique(),
                   lambda xs_: list(dict.fromkeys(v % 5 for v in xs_))),
    }
    for name, (op, by_hand) in ops.items():
        ds = op(shuffled)
        epochs = [xs(ds.iter(epoch=k)) for k in range(3)]
        assert epochs == [by_hand(xs(shuffled.iter(epoch=k))) for k in range(3)], name
        assert epochs[0] != epochs[1] or name == "unique", name   # the input reshuffles
        run = ds.iter(epoch=2)
        head = [next(run) for _ in range(2)]
        again = op(Dataset.range(20).shuffle(seed=3)).iter(epoch=2)
        again.set_state(run.get_state())
        assert xs(head) + xs(again) == epochs[2], name
    picks = Dataset.range(6).map(lambda e: {"c": e["x"] % 2})
    chosen = Dataset.choose_from_datasets([shuffled, Dataset.range(100, 120)], picks)
    assert xs(chosen.iter(epoch=1))[::2] == xs(shuffled.iter(epoch=1))[:3]


# ---- rejection_resample (expected values from tf.data's formulas, worked by hand) ---------------

def classes(ds):
    return [int(e["class"]) for e in ds]


def test_rejection_resample_passes_everything_when_the_distributions_agree():
    ds = Dataset.range(6).rejection_resample(lambda e: e["x"] % 2, [0.5, 0.5], initial_dist=[0.5, 0.5], seed=1)
    got = list(ds)
    assert xs(got) == [0, 1, 2, 3, 4, 5] and classes(got) == [0, 1, 0, 1, 0, 1]
    assert got[0]["class"].dtype == np.int64


def test_rejection_resample_with_a_zero_target_only_filters():
    # r = target / initial = [2, 0], m = 0: acceptance (r - m) / (max r - m) = [1, 0], no mixing
    ds = Dataset.range(10).rejection_resample(lambda e: int(e["x"]) % 2, [1.0, 0.0], [0.5, 0.5], seed=1)
    assert xs(ds) == [0, 2, 4, 6, 8] and set(classes(ds)) == {0}


@pytest.mark.parametrize("initial", [[0.9, 0.1], None])
def test_rejection_resample_reaches_the_target(initial):
    labels = np.array([0] * 9 + [1]) [np.arange(20000) % 10]
    src = sh.from_arrays({"label": labels})
    ds = src.rejection_resample(lambda e: e["label"], [0.5, 0.5], initial_dist=initial, seed=7)
    got = classes(ds)
    assert len(got) > 2000 and abs(np.mean(got) - 0.5) < 0.05
    assert classes(src.rejection_resample(lambda e: e["label"], [0.5, 0.5], initial, seed=7)) == got  # keyed
    assert classes(ds.iter(epoch=1)) != got                                     # each epoch draws anew
    rest, want = resumed(lambda: src.rejection_resample(lambda e: e["label"], [0.5, 0.5], initial, seed=7), 50)
    assert classes(rest) == classes(want) == got[50:]


def test_rejection_resample_names_bad_arguments_and_classes():
    ds = Dataset.range(4)
    with pytest.raises(sh.InvalidArgumentError, match="initial_dist.*has 3 classes"):
        ds.rejection_resample(lambda e: 0, [0.5, 0.5], [0.2, 0.3, 0.5])
    with pytest.raises(sh.InvalidArgumentError, match="target_dist"):
        ds.rejection_resample(lambda e: 0, [-1.0, 2.0])
    with pytest.raises(sh.InvalidArgumentError, match="returned 2 for element 0; classes are 0..1"):
        list(ds.rejection_resample(lambda e: 2, [0.5, 0.5], seed=0))
    with pytest.raises(sh.InvalidArgumentError, match="has a feature 'x' already"):
        list(ds.rejection_resample(lambda e: 0, [1.0], seed=0, class_feature="x"))


# ---- sparse_batch (expected values: tensorflow 2.21's sparse_batch on the same elements) -------

def sparse(ds, k="v"):
    return [(b[f"{k}.indices"].tolist(), b[f"{k}.values"].tolist(), b[f"{k}.dense_shape"].tolist()) for b in ds]


def ragged_rows(rows, dtype=np.int64):
    return sh.from_list([{"v": np.array(r, dtype)} for r in rows])


def test_sparse_batch_gives_tf_datas_coo_parts():
    ds = ragged_rows([[1], [2, 0, 3], [], [4, 5]]).sparse_batch(2, [5])
    assert sparse(ds) == [([[0, 0], [1, 0], [1, 1], [1, 2]], [1, 2, 0, 3], [2, 5]),
                          ([[1, 0], [1, 1]], [4, 5], [2, 5])]
    assert ds.is_random_access and len(ds) == 2
    b = ds[0]
    assert b["v.indices"].dtype == np.int64 and b["v.dense_shape"].dtype == np.int64
    unknown = ragged_rows([[1], [2, 0, 3], [], [4, 5]]).sparse_batch(3, [None])
    assert sparse(unknown) == [([[0, 0], [1, 0], [1, 1], [1, 2]], [1, 2, 0, 3], [3, 3]),
                               ([[0, 0], [0, 1]], [4, 5], [1, 2])]


def test_sparse_batch_of_matrices_scalars_and_bytes():
    mats = sh.from_generator(lambda: iter([{"v": np.ones((2, 1))}, {"v": np.arange(3.0).reshape(1, 3)}]))
    mats = mats.sparse_batch(2, [3, 4])
    assert sparse(mats) == [([[0, 0, 0], [0, 1, 0], [1, 0, 0], [1, 0, 1], [1, 0, 2]],
                             [1.0, 1.0, 0.0, 1.0, 2.0], [2, 3, 4])]
    assert sparse(Dataset.range(3).sparse_batch(2, []), "x") == [([[0], [1]], [0, 1], [2]), ([[0]], [2], [1])]
    words = sh.from_arrays({"s": np.array([[b"a"], [b"b"]], dtype=object)}).sparse_batch(2, [3])
    assert sparse(words, "s") == [([[0, 0], [1, 0]], [b"a", b"b"], [2, 3])]
    scalars = sh.from_arrays({"s": np.array([b"a", b"b"], dtype=object)}).sparse_batch(1, [])
    assert sparse(scalars, "s") == [([[0]], [b"a"], [1]), ([[0]], [b"b"], [1])]


def test_sparse_batch_names_an_element_that_does_not_fit():
    too_long = r"'v' of batch row 0 has shape \(3,\), larger than row_shape \[2\]"
    with pytest.raises(sh.InvalidArgumentError, match=too_long):
        list(ragged_rows([[1, 2, 3]]).sparse_batch(2, [2]))
    with pytest.raises(sh.InvalidArgumentError, match="rank 1; row_shape"):
        list(ragged_rows([[1, 2, 3]]).sparse_batch(2, [2, 2]))
    with pytest.raises(sh.InvalidArgumentError, match="row_shape"):
        Dataset.range(3).sparse_batch(2, 5)


# ---- snapshot --------------------------------------------------------------------------------

def counted(calls):
    def f(e):
        calls.append(int(e["x"]))
        return {"x": e["x"], "y": e["x"] * 10}

    return f


def test_snapshot_writes_the_first_pass_and_reads_it_after(tmp_path):
    calls = []
    ds = Dataset.range(5).map(counted(calls)).snapshot(tmp_path / "snap")
    assert [int(e["y"]) for e in ds] == [0, 10, 20, 30, 40] and len(calls) == 5
    assert [int(e["y"]) for e in ds] == [0, 10, 20, 30, 40] and len(calls) == 5   # read back
    again = Dataset.range(5).map(counted(calls)).snapshot(tmp_path / "snap")     # a later run
    assert xs(again) == [0, 1, 2, 3, 4] and len(calls) == 5
    other = Dataset.range(3).map(counted(calls)).snapshot(tmp_path / "snap")     # its own snapshot
    assert xs(other) == [0, 1, 2] and len(calls) == 8
    assert len(list((tmp_path / "snap").iterdir())) == 2


def test_an_interrupted_snapshot_is_written_again(tmp_path):
    import subprocess
    import sys

    code = ("import os, stokehold as sh\n"
            f"it = iter(sh.Dataset.range(50).map(lambda e: {{'x': e['x']}}, name='m').snapshot({str(tmp_path)!r}))\n"
            "[next(it) for _ in range(20)]\n"
            "os._exit(0)\n")
    subprocess.run([sys.executable, "-c", code], check=True)
    calls = []

    def make():
        return Dataset.range(50).map(lambda e: counted(calls)(e) and {"x": e["x"]}, name="m").snapshot(tmp_path)

    ds = make()
    it = iter(ds)
    [next(it) for _ in range(10)]
    del it                                                           # dropped early: nothing kept
    assert xs(ds) == list(range(50)) and len(calls) == 60
    assert xs(make()) == list(range(50)) and len(calls) == 60        # complete now: read back


def test_snapshot_refuses_what_it_cannot_honour(tmp_path):
    with pytest.raises(sh.InvalidArgumentError, match=r"compression.*save\(path, compression=\"zstd\"\)"):
        Dataset.range(3).snapshot(tmp_path, compression="GZIP")
    with pytest.raises(sh.InvalidArgumentError, match="reader_func"):
        Dataset.range(3).snapshot(tmp_path, reader_func=lambda datasets: datasets)
    assert xs(Dataset.range(3).snapshot(tmp_path, compression=None)) == [0, 1, 2]


# ---- with_options takes tf.data's Options ------------------------------------------------------

def ran(ds):
    assert xs(ds) == list(range(50))
    return ds.stats()


def mapped():
    return Dataset.range(50).map(lambda e: e, num_parallel_calls=sh.AUTOTUNE)


def test_with_options_reads_tf_datas_options():
    options = sh.Options()
    options.autotune.ram_budget = 1 << 24
    options.threading.private_threadpool_size = 2
    stats = ran(mapped().with_options(options))
    assert stats["memory_budget"] == 1 << 24 and stats["cores"] == 2
    options.autotune.cpu_budget = 1                                  # both given: the smaller
    assert ran(mapped().with_options(options))["cores"] == 1
    assert ran(mapped().with_options(options, memory_budget=1 << 25))["memory_budget"] == 1 << 25
    assert ran(mapped().with_options(memory_budget=1 << 23, cores=1))["memory_budget"] == 1 << 23


def test_with_options_accepts_the_fields_without_a_meaning_here():
    options = sh.Options()
    options.deterministic = False
    options.threading.max_intra_op_parallelism = 1
    options.experimental_optimization.map_and_batch_fusion = True
    options.experimental_distribute.auto_shard_policy = 1
    options.experimental_slack = True
    assert xs(Dataset.range(5).with_options(options)) == [0, 1, 2, 3, 4]   # in order still


def test_with_options_a_tf_data_options_object_is_read_by_attribute():
    from types import SimpleNamespace

    tf_like = SimpleNamespace(deterministic=None, autotune=SimpleNamespace(enabled=True, ram_budget=1 << 24,
                                                                           cpu_budget=0),
                              threading=SimpleNamespace(private_threadpool_size=0, max_intra_op_parallelism=None))
    assert ran(mapped().with_options(tf_like))["memory_budget"] == 1 << 24


def test_with_options_refuses_what_it_cannot_do():
    options = sh.Options()
    with pytest.raises(AttributeError):
        options.autotune.ram_budgets = 1                            # a misspelt field, as in tf.data
    options.autotune.enabled = False
    with pytest.raises(sh.InvalidArgumentError, match="autotune.enabled.*num_parallel_calls a number"):
        Dataset.range(3).with_options(options)
    with pytest.raises(sh.InvalidArgumentError, match="memory_budget="):
        Dataset.range(3).with_options(1 << 20)
    options = sh.Options()
    options.autotune.ram_budget = -1
    with pytest.raises(sh.InvalidArgumentError, match="ram_budget"):
        Dataset.range(3).with_options(options)


def test_csv_defaults_given_as_numpy_values_keep_their_type(tmp_path):
    p = csv_file(tmp_path, b",,,\n")
    got = next(iter(sh.CsvDataset(p, [np.int64(7), [np.int64(8)], np.array([9.5]), np.array([b"z"])])))
    assert [(v.dtype, v.item()) for v in got.values()] == [
        (np.int64, 7), (np.int64, 8), (np.float64, 9.5), (object, b"z")]
    with pytest.raises(sh.InvalidArgumentError, match="field 0 is required"):
        list(sh.CsvDataset(p, [np.array([], np.int64), 0, 0, 0]))
